#include "agent/inventory.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/system_info.h"
#include "common/symptom.h"

extern char** environ;

namespace faultline::agent {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::string firstLine(std::string_view s) {
  s = trim(s);
  auto nl = s.find('\n');
  return std::string(trim(s.substr(0, std::min<size_t>(nl, 200))));
}

std::string readTrimmed(const std::filesystem::path& p) {
  auto s = readSmallFile(p.string(), 256);
  return s ? std::string(trim(*s)) : std::string();
}

}  // namespace

std::vector<common::GpuInfo> parseNvidiaSmiGpus(std::string_view csv, std::string* error) {
  std::vector<common::GpuInfo> out;
  size_t bad = 0;
  std::string first_bad;
  while (!csv.empty()) {
    auto nl = csv.find('\n');
    std::string_view line = trim(csv.substr(0, nl));
    csv = nl == std::string_view::npos ? std::string_view() : csv.substr(nl + 1);
    if (line.empty()) continue;
    std::vector<std::string_view> f;
    size_t pos = 0;
    while (true) {
      auto comma = line.find(',', pos);
      f.push_back(trim(line.substr(pos, comma == std::string_view::npos ? comma : comma - pos)));
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    uint32_t index = 0;
    bool numeric = f.size() == 4 && !f[0].empty() && f[0].size() <= 4 &&
                   std::all_of(f[0].begin(), f[0].end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric) {
      if (bad++ == 0) first_bad = std::string(line.substr(0, 200));
      continue;
    }
    for (char c : f[0]) index = index * 10 + static_cast<uint32_t>(c - '0');
    common::GpuInfo g;
    g.index = index;
    g.pci_bus_id = common::normalizePciId(f[1]);
    g.uuid = std::string(f[2]);
    if (f[3] != "[N/A]" && f[3] != "N/A") g.serial = std::string(f[3]);
    out.push_back(std::move(g));
  }
  if (bad > 0 && error) {
    *error = "nvidia-smi: " + std::to_string(bad) + " unparsable line(s), first: " + first_bad;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return out;
}

std::vector<common::HcaPortInfo> readHcaPorts(const std::string& sysfs_root, std::string* error) {
  namespace fs = std::filesystem;
  std::vector<common::HcaPortInfo> out;
  fs::path cls = fs::path(sysfs_root) / "class" / "infiniband";
  std::error_code ec;
  if (!fs::is_directory(cls, ec)) return out;
  std::vector<std::string> problems;
  for (const auto& hca : fs::directory_iterator(cls, ec)) {
    std::string name = hca.path().filename().string();
    // <hca>/device -> ../../../0000:0c:00.0 (the PCI function of the adapter).
    std::string pci;
    auto target = fs::read_symlink(hca.path() / "device", ec);
    if (ec) {
      problems.push_back(name + ": no device link");
      ec.clear();
    } else {
      pci = common::normalizePciId(target.filename().string());
    }
    std::vector<common::HcaPortInfo> ports;
    for (const auto& port : fs::directory_iterator(hca.path() / "ports", ec)) {
      common::HcaPortInfo p;
      p.name = name;
      p.pci_address = pci;
      const std::string n = port.path().filename().string();
      if (n.empty() || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) || n.size() > 4)
        continue;
      p.port = static_cast<uint32_t>(std::stoul(n));
      std::string state = readTrimmed(port.path() / "state");  // "4: ACTIVE"
      auto colon = state.find(':');
      p.state = colon == std::string::npos ? state : std::string(trim(std::string_view(state).substr(colon + 1)));
      p.link_layer = readTrimmed(port.path() / "link_layer");
      ports.push_back(std::move(p));
    }
    if (ec) {
      problems.push_back(name + ": no ports");
      ec.clear();
    }
    out.insert(out.end(), ports.begin(), ports.end());
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name != b.name ? a.name < b.name : a.port < b.port; });
  if (!problems.empty() && error) {
    std::sort(problems.begin(), problems.end());
    std::string joined;
    for (const auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    *error = joined;
  }
  return out;
}

std::vector<std::string> interfaceAddresses(const struct ifaddrs* list) {
  std::vector<std::string> out;
  for (const struct ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      const uint32_t v4 = ntohl(in->sin_addr.s_addr);
      if (v4 == 0 || (v4 >> 24) == 127) continue;
      if (!::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) continue;
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) || IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
          IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
        continue;
      if (!::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text)) continue;
    } else {
      continue;
    }
    out.emplace_back(text);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> readInterfaceAddresses(std::string* error) {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    if (error) *error = std::string("getifaddrs: ") + std::strerror(errno);
    return {};
  }
  auto out = interfaceAddresses(list);
  ::freeifaddrs(list);
  return out;
}

InventoryCollector::InventoryCollector(boost::asio::io_context& io, const Clock& clock, InventoryOptions options)
    : io_(io), clock_(clock), options_(std::move(options)), pipe_(io), timeout_(io), reap_timer_(io) {}

InventoryCollector::~InventoryCollector() {
  cancel();
  reapZombies();
}

void InventoryCollector::reapZombies() {
  zombies_.erase(std::remove_if(zombies_.begin(), zombies_.end(),
                                [](pid_t p) { return ::waitpid(p, nullptr, WNOHANG) != 0; }),
                 zombies_.end());
}

bool InventoryCollector::collect(Done done) {
  if (running()) return false;
  reapZombies();
  ++generation_;
  busy_ = true;
  done_ = std::move(done);
  output_.clear();
  pending_ = {};
  pending_.hcas = readHcaPorts(options_.sysfs_root, &pending_.hca_error);
  // A getifaddrs failure (out of memory) leaves the list empty: the aggregator then resolves no
  // peer address to this node, as with an agent that predates addresses.
  if (options_.read_addresses) pending_.addresses = readInterfaceAddresses(nullptr);
  if (options_.nvidia_smi.empty()) {
    boost::asio::post(io_, [this, gen = generation_] {
      if (gen == generation_) finish("", 0);
    });
    return true;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::string why = std::string("pipe: ") + std::strerror(errno);
    boost::asio::post(io_, [this, gen = generation_, why] {
      if (gen == generation_) finish(why, 0);
    });
    return true;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string a0 = options_.nvidia_smi, a1 = "--query-gpu=index,pci.bus_id,uuid,serial", a2 = "--format=csv,noheader";
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, a0.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    std::string why = options_.nvidia_smi + ": " + std::strerror(rc);
    boost::asio::post(io_, [this, gen = generation_, why] {
      if (gen == generation_) finish(why, 0);
    });
    return true;
  }
  pid_ = pid;
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  pipe_.assign(fds[0]);
  timeout_.expires_after(std::chrono::milliseconds(options_.timeout_ms));
  timeout_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (!ec && gen == generation_) onTimeout();
  });
  readMore();
  return true;
}

void InventoryCollector::readMore() {
  pipe_.async_read_some(boost::asio::buffer(buf_), [this, gen = generation_](const boost::system::error_code& ec,
                                                                             size_t n) {
    if (gen != generation_) return;
    output_.append(buf_, n);
    if (output_.size() > options_.max_output_bytes) {
      ::kill(pid_, SIGKILL);
      zombies_.push_back(pid_);
      finish(options_.nvidia_smi + ": output over " + std::to_string(options_.max_output_bytes) + " bytes", 0);
      return;
    }
    if (ec) {  // EOF (or a broken pipe): the command is done writing
      boost::system::error_code ignored;
      pipe_.close(ignored);
      tryReap();
      return;
    }
    readMore();
  });
}

void InventoryCollector::tryReap() {
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno != EINTR)) {
    finish("", r == pid_ ? status : 0);
    return;
  }
  // Closed its stdout but still running: look again shortly, until the timeout kills it.
  reap_timer_.expires_after(std::chrono::milliseconds(10));
  reap_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (!ec && gen == generation_) tryReap();
  });
}

void InventoryCollector::onTimeout() {
  ::kill(pid_, SIGKILL);
  if (::waitpid(pid_, nullptr, WNOHANG) == 0) zombies_.push_back(pid_);
  finish(options_.nvidia_smi + ": timed out after " + std::to_string(options_.timeout_ms) + " ms", 0);
}

void InventoryCollector::finish(std::string failure, int status) {
  ++generation_;
  busy_ = false;
  pid_ = -1;
  boost::system::error_code ignored;
  pipe_.close(ignored);
  timeout_.cancel();
  reap_timer_.cancel();
  common::NodeInventory inv = std::move(pending_);
  pending_ = {};
  inv.collected_ns = clock_.nowNs();
  if (failure.empty() && !options_.nvidia_smi.empty()) {
    std::string parse_error;
    inv.gpus = parseNvidiaSmiGpus(output_, &parse_error);
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      failure = options_.nvidia_smi + ": exit status " + std::to_string(WEXITSTATUS(status));
      if (auto l = firstLine(output_); !l.empty()) failure += ": " + l;
    } else if (WIFSIGNALED(status)) {
      failure = options_.nvidia_smi + ": killed by signal " + std::to_string(WTERMSIG(status));
    } else if (!parse_error.empty()) {
      failure = parse_error;
    }
  }
  inv.gpu_error = std::move(failure);
  output_.clear();
  output_.shrink_to_fit();
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(inv));
}

void InventoryCollector::cancel() {
  if (!running()) return;
  ++generation_;
  busy_ = false;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) zombies_.push_back(pid_);
  }
  pid_ = -1;
  boost::system::error_code ignored;
  pipe_.close(ignored);
  timeout_.cancel();
  reap_timer_.cancel();
  done_ = nullptr;
}

}  // namespace faultline::agent
