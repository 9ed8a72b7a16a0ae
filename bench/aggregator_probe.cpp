#include "bench/aggregator_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/sim_fleet.h"

namespace faultline::bench {

namespace fs = std::filesystem;

std::optional<HttpResponse> http(uint16_t port, const std::string& method, const std::string& path,
                                 const std::string& token, const std::string& body) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    off += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t head_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos) return std::nullopt;
  HttpResponse r;
  r.status = std::atoi(raw.c_str() + 9);
  r.body = raw.substr(head_end + 4);
  return r;
}

double metric(const std::string& text, const std::string& name) {
  double total = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.rfind(name, 0) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    total += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return total;
}

int64_t listenOverflows() {
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value)
      if (name == "ListenOverflows") return std::stoll(value);
  }
  return -1;
}

double selfCpu() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::map<int, ThreadTime> threadTimes(int pid) {
  std::map<int, ThreadTime> out;
  if (pid <= 0) return out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    ThreadTime t;
    std::ifstream(e.path() / "schedstat") >> t.on_cpu_ns >> t.runqueue_ns;
    std::getline(std::ifstream(e.path() / "comm"), t.name);
    std::ifstream io(e.path() / "io");
    for (std::string key; io >> key;) {
      int64_t v = 0;
      io >> v;
      if (key == "wchar:") t.write_bytes = v;
      if (key == "syscw:") t.write_calls = v;
    }
    out[std::atoi(e.path().filename().c_str())] = t;
  }
  return out;
}

CpuDelta cpuDelta(const std::map<int, ThreadTime>& before, const std::map<int, ThreadTime>& after, int pid) {
  CpuDelta d;
  std::vector<std::pair<double, std::string>> threads;
  for (const auto& [tid, t] : after) {
    auto it = before.find(tid);
    double s = double(t.on_cpu_ns - (it == before.end() ? 0 : it->second.on_cpu_ns)) / 1e9;
    double q = double(t.runqueue_ns - (it == before.end() ? 0 : it->second.runqueue_ns)) / 1e9;
    d.total += s;
    bool ingest = tid != pid && t.name.rfind("ZMQbg", 0) != 0;
    if (tid == pid) d.main = s;
    if (ingest) {
      d.ingest_cpu += s;
      d.ingest_runqueue += q;
      d.ingest_write_calls += t.write_calls - (it == before.end() ? 0 : it->second.write_calls);
      d.ingest_write_bytes += t.write_bytes - (it == before.end() ? 0 : it->second.write_bytes);
    }
    threads.push_back({s, tid == pid ? "main/http+verdicts" : ingest ? "ingest" : t.name});
  }
  std::sort(threads.rbegin(), threads.rend());
  for (size_t k = 0; k < threads.size() && k < 3; ++k) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.2f s", k ? ", " : "", threads[k].second.c_str(), threads[k].first);
    d.top += buf;
  }
  return d;
}

std::string ingestShare(const CpuDelta& d, double wall_s, uint64_t batches) {
  if (wall_s <= 0 || batches == 0) return "";
  char buf[256];
  double on = 100 * d.ingest_cpu / wall_s, q = 100 * d.ingest_runqueue / wall_s;
  std::snprintf(buf, sizeof buf,
                "ingest thread on a cpu %.0f %%, runnable but waiting for one %.0f %%, blocked %.0f %%; per batch %.2f "
                "ms cpu, %.0f writes, %.0f KiB",
                on, q, std::max(0.0, 100 - on - q), 1e3 * d.ingest_cpu / double(batches),
                double(d.ingest_write_calls) / double(batches), double(d.ingest_write_bytes) / 1024 / double(batches));
  return buf;
}

Prober::Prober(uint16_t port, std::string path, int pause_ms)
    : port_(port), path_(std::move(path)), pause_ms_(pause_ms) {
  thread_ = std::thread([this] {
    while (!stop_) {
      int64_t t = steadyNs();
      auto r = http(port_, "GET", path_);
      if (r && r->status == 200) latency_ns_.push_back(steadyNs() - t);
      ::usleep(static_cast<useconds_t>(pause_ms_) * 1000);
    }
  });
}

Prober::~Prober() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<int64_t> Prober::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return latency_ns_;
}

}  // namespace faultline::bench
