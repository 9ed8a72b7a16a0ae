// aggregator_load: drives the real faultline-aggregator binary with thousands of simulated agents
// through a fleet-wide cascade and reports ingest rate, send->ack latency and the time from a
// large job's end to its stored verdict (bench/README.md, "aggregator load"; run it with
// bench/aggregator_load.sh, which makes the keys and starts the aggregator).
//
//   aggregator_load keygen DIR --agents N        DIR/keys/HOST.{key,pub}, DIR/allow/HOST.pub
//   aggregator_load run --endpoint E --server-key F --keys DIR --http-port P --token-file T ...
//
// Each simulated agent is what faultline-agent is on the wire (common/uplink/shipper.cpp): a
// DEALER with routing id = agent id = hostname, its own CurveZMQ key pair, ZMQ_IMMEDIATE, up to
// --in-flight unacknowledged batches, resends after --ack-timeout-ms, a heartbeat every
// --heartbeat-ms. The symptoms are the cascade sample's (--sample), produced by the real rule engine
// over its node logs and rank output (cascade_sample.h) and moved to this run's hosts and time.
//
// One thread, one zmq context, every socket's ZMQ_FD in one epoll set. Talks to the aggregator
// only over 127.0.0.1 (ZeroMQ ingest, HTTP API); links faultline_common, never the aggregator.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench/cascade_sample.h"
#include "common/protocol.h"
#include "common/rule_set.h"
#include "common/wire.h"

namespace {

using namespace faultline;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t wallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string hostName(const std::string& prefix, size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04zu", i);
  return prefix + buf;
}

// ---- HTTP (blocking, one connection per request) -------------------------------------------

struct HttpResponse {
  int status = 0;
  std::string body;
};

std::optional<HttpResponse> http(uint16_t port, const std::string& method, const std::string& path,
                                 const std::string& token = "", const std::string& body = "") {
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

// ---- Where the aggregator's threads spend their time (/proc/PID/task/TID/schedstat) ---------

struct ThreadTime {
  std::string name;
  int64_t on_cpu_ns = 0;    // running
  int64_t runqueue_ns = 0;  // runnable, waiting for a CPU (the machine is busy)
};

std::map<int, ThreadTime> threadTimes(int pid) {
  std::map<int, ThreadTime> out;
  if (pid <= 0) return out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    ThreadTime t;
    std::ifstream(e.path() / "schedstat") >> t.on_cpu_ns >> t.runqueue_ns;
    t.name = readLine((e.path() / "comm").string());
    out[std::atoi(e.path().filename().c_str())] = t;
  }
  return out;
}

double selfCpu() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// ---- Simulated agents ---------------------------------------------------------------------

struct Pending {
  uint64_t sequence = 0;
  int64_t first_sent_ns = 0;
  int64_t last_sent_ns = 0;
};

struct Agent {
  std::string host;  // also the agent id and routing id, like the real agent's default
  std::string boot_id;
  std::string public_key, secret_key;
  common::NodeInventory inventory;
  std::vector<std::string> batches;  // encoded SymptomBatch payloads; sequence = index + 1
  std::vector<uint32_t> batch_symptoms;
  std::unique_ptr<zmq::socket_t> sock;
  bool first_heartbeat_sent = false;
  int64_t connected_ns = 0;  // when the first heartbeat could go out (handshake done)
  bool active = false;       // in the running phase
  size_t next = 0;           // next batch index to send
  size_t limit = 0;          // the running phase sends batches [next, limit)
  size_t acked = 0;
  std::vector<Pending> in_flight;
  int64_t next_heartbeat_ns = 0;
  uint64_t heartbeats = 0;
};

struct PhaseStats {
  size_t agents = 0;
  uint64_t batches = 0, symptoms = 0, total_batches = 0;
  uint64_t resends = 0, duplicate_acks = 0, bad_messages = 0, heartbeats = 0;
  std::vector<int64_t> latency_ns;
  int64_t start_ns = 0, last_ack_ns = 0;
  bool complete() const { return batches == total_batches; }
  double seconds() const { return double(last_ack_ns - start_ns) / 1e9; }
};

struct DriverOptions {
  std::string endpoint;
  std::string server_key;
  std::string ruleset_version;
  size_t in_flight = 16;
  int64_t ack_timeout_ns = 10 * kSec;
  int64_t heartbeat_ns = 30 * kSec;
};

// Owns the agents' sockets and serves them from one epoll loop. Not thread-safe.
class Driver {
 public:
  Driver(zmq::context_t& ctx, DriverOptions o) : ctx_(ctx), o_(std::move(o)), ep_(::epoll_create1(EPOLL_CLOEXEC)) {}
  ~Driver() {
    for (auto& a : agents_) a.sock.reset();  // before the context
    ::close(ep_);
  }

  size_t add(Agent a) {
    agents_.push_back(std::move(a));
    return agents_.size() - 1;
  }
  Agent& agent(size_t i) { return agents_[i]; }

  // Socket options as the agent's shipper sets them; connects (the handshake runs in the
  // background).
  void connect(size_t i) {
    Agent& a = agents_[i];
    a.sock = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    a.sock->set(zmq::sockopt::linger, 0);
    a.sock->set(zmq::sockopt::immediate, 1);
    a.sock->set(zmq::sockopt::routing_id, a.host);
    a.sock->set(zmq::sockopt::reconnect_ivl, 500);
    a.sock->set(zmq::sockopt::reconnect_ivl_max, 30000);
    a.sock->set(zmq::sockopt::curve_serverkey, o_.server_key);
    a.sock->set(zmq::sockopt::curve_publickey, a.public_key);
    a.sock->set(zmq::sockopt::curve_secretkey, a.secret_key);
    a.sock->connect(o_.endpoint);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, a.sock->get(zmq::sockopt::fd), &ev);
  }

  // Sends each agent's first heartbeat (with its inventory) as soon as its connection is up
  // (ZMQ_IMMEDIATE refuses it before the Curve handshake and ZAP are done). false on timeout.
  bool sendFirstHeartbeats(const std::vector<size_t>& which, int64_t deadline_ns) {
    size_t left = which.size();
    while (left) {
      left = 0;
      for (size_t i : which)
        if (!agents_[i].first_heartbeat_sent && !sendHeartbeat(agents_[i], true)) ++left;
      if (!left) break;
      if (steadyNs() > deadline_ns) return false;
      waitAndDrain(5);
    }
    return true;
  }

  // Every agent in `which` sends its next `batches` batches; returns when all are acked or at the
  // deadline. Agent k starts at start + k/|which| * spread (0: all at once, a cascade's worst case).
  PhaseStats run(const std::vector<size_t>& which, size_t batches, int64_t spread_ns, int64_t deadline_ns) {
    PhaseStats st;
    cur_ = &st;
    st.agents = which.size();
    for (size_t i : which) {
      Agent& a = agents_[i];
      a.limit = std::min(a.batches.size(), a.next + batches);
      st.total_batches += a.limit - a.next;
    }
    st.start_ns = steadyNs();
    std::vector<std::pair<int64_t, size_t>> starts;
    for (size_t k = 0; k < which.size(); ++k)
      starts.push_back({st.start_ns + (which.size() > 1 ? spread_ns * int64_t(k) / int64_t(which.size()) : 0),
                        which[k]});
    size_t started = 0;
    int64_t next_scan = st.start_ns + 100 * kMs;
    while (!st.complete()) {
      int64_t now = steadyNs();
      if (now > deadline_ns) break;
      for (; started < starts.size() && starts[started].first <= now; ++started) {
        Agent& a = agents_[starts[started].second];
        a.active = true;
        a.next_heartbeat_ns = now + o_.heartbeat_ns;
        service(starts[started].second);
      }
      waitAndDrain(started < starts.size() ? 0 : 2);
      if (now >= next_scan) {
        scan(which, now);
        next_scan = now + 100 * kMs;
      }
    }
    // Resent batches still queued at the aggregator are acked again: wait for those acks (the
    // aggregator is idle only then), without counting the wait in the phase's time.
    while (st.duplicate_acks < st.resends && steadyNs() < deadline_ns) waitAndDrain(5);
    for (size_t i : which) agents_[i].active = false;
    cur_ = nullptr;
    return st;
  }

 private:
  bool sendFrames(Agent& a, std::string_view type, const std::string& payload) {
    try {
      if (!a.sock->send(zmq::buffer(type), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      a.sock->send(zmq::buffer(payload), zmq::send_flags::dontwait);  // never EAGAIN after the first part
      return true;
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  bool sendHeartbeat(Agent& a, bool first) {
    common::HeartbeatData hb;
    hb.agent_id = a.host;
    hb.hostname = a.host;
    hb.node = a.host;
    hb.boot_id = a.boot_id;
    hb.agent_version = "bench";
    hb.ruleset_version = o_.ruleset_version;
    hb.created_ns = wallNs();
    hb.started_ns = hb.created_ns;
    hb.sources = {{"kmsg", "kmsg", "ok", "", a.acked, 0, 0, 0}, {"/var/log/slurm/job.out", "application", "ok", "", 0, 0, 0, 0}};
    hb.spool_batches = a.batches.size() - a.acked;
    hb.next_sequence = a.batches.size() + 1;
    hb.inventory_hash = common::inventoryHash(a.inventory);
    if (first) hb.inventory = a.inventory;
    if (!sendFrames(a, common::kTypeHeartbeat, common::encodeHeartbeat(hb))) return false;
    if (!a.first_heartbeat_sent) a.connected_ns = steadyNs();
    a.first_heartbeat_sent = true;
    ++a.heartbeats;
    if (cur_) ++cur_->heartbeats;
    return true;
  }

  // Sends while the window has room; true when anything went out.
  bool topUp(Agent& a) {
    bool any = false;
    while (a.active && a.in_flight.size() < o_.in_flight && a.next < a.limit) {
      if (!sendFrames(a, common::kTypeBatch, a.batches[a.next])) break;  // not connected: the scan retries
      int64_t now = steadyNs();
      a.in_flight.push_back({a.next + 1, now, now});
      ++a.next;
      any = true;
    }
    return any;
  }

  // Receives everything queued on one socket. ZMQ_FD only says "look": a send may have consumed
  // the signal of a waiting ack, so this runs after sends too, until nothing moves.
  void service(size_t i) {
    Agent& a = agents_[i];
    while (true) {
      bool got = false;
      while (true) {
        zmq::message_t type, payload;
        if (!a.sock->recv(type, zmq::recv_flags::dontwait)) break;
        got = true;
        if (!type.more() || !a.sock->recv(payload, zmq::recv_flags::dontwait)) {
          if (cur_) ++cur_->bad_messages;
          continue;
        }
        while (payload.more()) (void)a.sock->recv(payload, zmq::recv_flags::dontwait);
        onMessage(a, type.to_string_view(), payload.to_string_view());
      }
      bool sent = topUp(a);
      if (!got && !sent && !(a.sock->get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
    }
  }

  void onMessage(Agent& a, std::string_view type, std::string_view payload) {
    auto ack = type == common::kTypeAck ? common::decodeAck(payload) : std::nullopt;
    if (!ack || ack->agent_id != a.host) {
      if (cur_) ++cur_->bad_messages;
      return;
    }
    auto it = std::find_if(a.in_flight.begin(), a.in_flight.end(),
                           [&](const Pending& p) { return p.sequence == ack->sequence; });
    if (it == a.in_flight.end()) {
      if (cur_) ++cur_->duplicate_acks;  // a resend's second ack
      return;
    }
    int64_t now = steadyNs();
    ++a.acked;
    if (cur_) {
      cur_->latency_ns.push_back(now - it->first_sent_ns);
      ++cur_->batches;
      cur_->symptoms += a.batch_symptoms[it->sequence - 1];
      cur_->last_ack_ns = now;
    }
    a.in_flight.erase(it);
  }

  void waitAndDrain(int timeout_ms) {
    epoll_event evs[512];
    int n = ::epoll_wait(ep_, evs, 512, timeout_ms);
    for (int k = 0; k < n; ++k) service(static_cast<size_t>(evs[k].data.u64));
  }

  // Resends what was not acked in time, sends due heartbeats, retries sends that found no
  // connection.
  void scan(const std::vector<size_t>& which, int64_t now) {
    for (size_t i : which) {
      Agent& a = agents_[i];
      if (!a.active) continue;
      for (auto& p : a.in_flight)
        if (now - p.last_sent_ns >= o_.ack_timeout_ns && sendFrames(a, common::kTypeBatch, a.batches[p.sequence - 1])) {
          p.last_sent_ns = now;
          ++cur_->resends;
        }
      if (now >= a.next_heartbeat_ns && sendHeartbeat(a, false)) a.next_heartbeat_ns = now + o_.heartbeat_ns;
      service(i);
    }
  }

  zmq::context_t& ctx_;
  DriverOptions o_;
  int ep_;
  std::vector<Agent> agents_;
  PhaseStats* cur_ = nullptr;
};

// ---- Batches --------------------------------------------------------------------------------

// Batch b of an agent carries symptoms b*K .. b*K+K-1 of its node's cascade list, taken
// cyclically: the first pass is the node's own symptoms, later passes re-report them (moved
// `pass` seconds later, as the next aggregation window of an ongoing cascade would).
void buildBatches(Agent& a, const std::vector<common::Symptom>& tmpl, const std::string& sample_host, int64_t shift_ns,
                  size_t batches, size_t per_batch, const std::string& ruleset_version) {
  std::vector<common::CoverageEntry> sources = {{a.host, "kmsg", "kmsg", 1000, 0, "ok", ""},
                                                {a.host, "/var/log/slurm/job.out", "application", 5000, 0, "ok", ""}};
  for (size_t b = 0; b < batches; ++b) {
    common::SymptomBatchData d;
    d.header.agent_id = a.host;
    d.header.hostname = a.host;
    d.header.boot_id = a.boot_id;
    d.header.sequence = b + 1;
    d.header.agent_version = "bench";
    d.header.ruleset_version = ruleset_version;
    d.header.created_ns = wallNs();
    for (size_t k = 0; k < per_batch; ++k) {
      size_t idx = b * per_batch + k;
      int64_t pass = static_cast<int64_t>(idx / tmpl.size());
      d.symptoms.push_back(bench::moveSymptom(tmpl[idx % tmpl.size()], sample_host, a.host, shift_ns + pass * kSec));
      d.symptoms.back().boot_id = a.boot_id;
    }
    d.sources = sources;
    a.batches.push_back(common::encodeBatch(d));
    a.batch_symptoms.push_back(static_cast<uint32_t>(per_batch));
  }
}

std::optional<std::pair<std::string, std::string>> readKeyPair(const std::string& dir, const std::string& host) {
  std::string sec = readLine(dir + "/" + host + ".key"), pub = readLine(dir + "/" + host + ".pub");
  if (sec.size() != 40 || pub.size() != 40) return std::nullopt;
  return std::make_pair(pub, sec);
}

// ---- Report ---------------------------------------------------------------------------------

double percentileMs(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
  return double(v[std::min(idx, v.size() - 1)]) / 1e6;
}

void printPhase(const char* label, const PhaseStats& st) {
  double s = st.seconds();
  std::printf("%-9s %5zu sender%s %8llu symptoms in %6llu batches, %6.2f s: %8.0f symptoms/s %7.0f batches/s | "
              "ack p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms | resends %llu, duplicate acks %llu, heartbeats %llu%s\n",
              label, st.agents, st.agents == 1 ? " " : "s", static_cast<unsigned long long>(st.symptoms),
              static_cast<unsigned long long>(st.batches), s, s > 0 ? double(st.symptoms) / s : 0,
              s > 0 ? double(st.batches) / s : 0, percentileMs(st.latency_ns, 0.5), percentileMs(st.latency_ns, 0.99),
              percentileMs(st.latency_ns, 1.0), static_cast<unsigned long long>(st.resends),
              static_cast<unsigned long long>(st.duplicate_acks), static_cast<unsigned long long>(st.heartbeats),
              st.complete() ? "" : "  INCOMPLETE (deadline)");
}

// A Prometheus sample's value: NAME (summed over its labels) or NAME{labels} (that series).
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

// TcpExt ListenOverflows of this network namespace: connections a full accept queue refused.
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

// Repeats one GET on its own thread (one request at a time, `pause_ms` between) and records how
// long each took: what an operator's `faultline job ID` waits while the aggregator is busy.
class Prober {
 public:
  Prober(uint16_t port, std::string path, int pause_ms) : port_(port), path_(std::move(path)), pause_ms_(pause_ms) {
    thread_ = std::thread([this] {
      while (!stop_) {
        int64_t t = steadyNs();
        auto r = http(port_, "GET", path_);
        if (r && r->status == 200) latency_ns_.push_back(steadyNs() - t);
        ::usleep(static_cast<useconds_t>(pause_ms_) * 1000);
      }
    });
  }
  // Stops and returns the latencies.
  std::vector<int64_t> finish() {
    stop_ = true;
    thread_.join();
    return latency_ns_;
  }

 private:
  uint16_t port_;
  std::string path_;
  int pause_ms_;
  std::atomic<bool> stop_{false};
  std::vector<int64_t> latency_ns_;
  std::thread thread_;
};

// CPU seconds per aggregator thread between two snapshots, busiest first, and how the ingest
// thread (the one that stores and acks) spent the wall time: on a CPU, waiting for one, or
// blocked (SQLite I/O, the store lock, or idle in zmq_poll when nothing is queued).
struct CpuDelta {
  double total = 0;
  double main = 0;  // the main thread: HTTP API and verdict ticks
  double ingest_cpu = 0, ingest_runqueue = 0;
  std::string top;  // "name 1.23 s, ..."
};
CpuDelta cpuDelta(const std::map<int, ThreadTime>& before, const std::map<int, ThreadTime>& after, int pid) {
  CpuDelta d;
  std::vector<std::pair<double, std::string>> threads;
  for (const auto& [tid, t] : after) {
    auto it = before.find(tid);
    double s = double(t.on_cpu_ns - (it == before.end() ? 0 : it->second.on_cpu_ns)) / 1e9;
    double q = double(t.runqueue_ns - (it == before.end() ? 0 : it->second.runqueue_ns)) / 1e9;
    d.total += s;
    // The unnamed non-main thread of the aggregator's own is the ingest loop (zmq threads are ZMQbg/...).
    bool ingest = tid != pid && t.name.rfind("ZMQbg", 0) != 0;
    if (tid == pid) d.main = s;
    if (ingest) {
      d.ingest_cpu += s;
      d.ingest_runqueue += q;
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

// "ingest thread on-cpu 45 %, waiting for a cpu 10 %, blocked 45 %" over `wall_s`.
std::string ingestShare(const CpuDelta& d, double wall_s) {
  if (wall_s <= 0) return "";
  char buf[160];
  double on = 100 * d.ingest_cpu / wall_s, q = 100 * d.ingest_runqueue / wall_s;
  std::snprintf(buf, sizeof buf, "ingest thread on a cpu %.0f %%, runnable but waiting for one %.0f %%, blocked %.0f %%",
                on, q, std::max(0.0, 100 - on - q));
  return buf;
}

struct RunOptions {
  std::string endpoint, server_key_file, keys_dir, token_file, sample_dir, rules_dir, prefix = "gpu-n";
  std::string peer_host = "gpu-peer", job_id = "900001";
  uint16_t http_port = 0;
  int aggregator_pid = 0;
  size_t agents = 2048, job_nodes = 1024, root_index = 0, batches = 4, per_batch = 8, peer_batches = 0;
  size_t after_batches = 4;
  size_t in_flight = 16, io_threads = 1;
  double ack_timeout_ms = 10000, heartbeat_ms = 30000, spread_ms = 0, timeout_s = 170;
};

int cmdRun(const RunOptions& o) {
  auto loaded = common::loadRuleDirs({o.rules_dir});
  if (!loaded.rules) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return 2;
  }
  common::RuleEngine engine(loaded.rules);
  std::string error;
  auto sample = bench::loadCascadeSample(o.sample_dir, engine, &error);
  if (!sample) {
    std::fprintf(stderr, "aggregator_load: %s\n", error.c_str());
    return 2;
  }
  if (sample->expected_node.empty() || !sample->by_node.count(sample->expected_node)) {
    std::fprintf(stderr, "aggregator_load: %s: expected.json names no node with symptoms\n", o.sample_dir.c_str());
    return 2;
  }
  const size_t job_nodes = std::min(o.job_nodes, o.agents);
  const size_t root_index = o.root_index ? o.root_index : job_nodes / 2 + 1;  // 1-based
  if (root_index > job_nodes) {
    std::fprintf(stderr, "aggregator_load: --root-index beyond --job-nodes\n");
    return 2;
  }
  const std::string root_host = hostName(o.prefix, root_index);
  std::vector<std::string> others;  // the cascade's other nodes, in host order
  size_t sample_symptoms = 0;
  for (const auto& [h, list] : sample->by_node) {
    sample_symptoms += list.size();
    if (h != sample->expected_node) others.push_back(h);
  }
  const std::string server_key = readLine(o.server_key_file);
  const std::string token = readLine(o.token_file);
  if (server_key.size() != 40 || token.empty()) {
    std::fprintf(stderr, "aggregator_load: bad --server-key or --token-file\n");
    return 2;
  }

  // The sample's job ends "now": every symptom keeps its offset from the job's end.
  const int64_t shift_ns = wallNs() - sample->job.end_ns;
  const int64_t job_start_ns = sample->job.start_ns + shift_ns;

  zmq::context_t ctx(static_cast<int>(o.io_threads), static_cast<int>(o.agents + 64));
  DriverOptions dopt;
  dopt.endpoint = o.endpoint;
  dopt.server_key = server_key;
  dopt.ruleset_version = loaded.rules->version;
  dopt.in_flight = o.in_flight;
  dopt.ack_timeout_ns = static_cast<int64_t>(o.ack_timeout_ms * kMs);
  dopt.heartbeat_ns = static_cast<int64_t>(o.heartbeat_ms * kMs);
  Driver driver(ctx, dopt);

  auto makeAgent = [&](const std::string& host, const std::string& sample_host, size_t batches) -> std::optional<size_t> {
    auto keys = readKeyPair(o.keys_dir, host);
    if (!keys) {
      std::fprintf(stderr, "aggregator_load: no key pair for %s in %s\n", host.c_str(), o.keys_dir.c_str());
      return std::nullopt;
    }
    Agent a;
    a.host = host;
    a.boot_id = "b00710ad-" + host;
    a.public_key = keys->first;
    a.secret_key = keys->second;
    a.inventory = sample->inventory[sample_host];
    a.inventory.collected_ns = wallNs();
    buildBatches(a, sample->by_node[sample_host], sample_host, shift_ns, batches, o.per_batch, loaded.rules->version);
    return driver.add(std::move(a));
  };
  const int64_t t_build = steadyNs();
  std::vector<size_t> fleet, outside;  // outside: the agents not in the judged job
  for (size_t i = 1; i <= o.agents; ++i) {
    std::string host = hostName(o.prefix, i);
    const std::string& from = host == root_host ? sample->expected_node : others[(i - 1) % others.size()];
    auto idx = makeAgent(host, from, o.batches + (i > job_nodes ? o.after_batches : 0));
    if (!idx) return 2;
    fleet.push_back(*idx);
    if (i > job_nodes) outside.push_back(*idx);
  }
  const size_t peer_batches = o.peer_batches ? o.peer_batches : std::min<size_t>(o.agents * o.batches, 1000);
  auto peer = makeAgent(o.peer_host, others.front(), peer_batches);
  if (!peer) return 2;
  size_t encoded = peer_batches + fleet.size() * o.batches + outside.size() * o.after_batches;
  const double build_s = double(steadyNs() - t_build) / 1e9;

  std::printf("aggregator load: %zu agents, %zu of them in job %s (%s%s-%s), root %s <- %s of %s; %zu batches x %zu "
              "symptoms per agent, in-flight %zu, ack timeout %.0f ms, spread %.0f ms; cpus %ld\n",
              o.agents, job_nodes, o.job_id.c_str(), o.prefix.c_str(), hostName("", 1).c_str(),
              hostName("", job_nodes).c_str(), root_host.c_str(), sample->expected_node.c_str(),
              fs::path(o.sample_dir).filename().c_str(), o.batches, o.per_batch, o.in_flight, o.ack_timeout_ms,
              o.spread_ms, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("sample    %zu nodes, %zu symptoms (rule engine over node logs and rank output), ruleset %s; "
              "%zu batches encoded in %.2f s\n",
              sample->by_node.size(), sample_symptoms, loaded.rules->version.c_str(), encoded, build_s);
  std::fflush(stdout);

  auto healthAgents = [&]() -> int64_t {
    auto r = http(o.http_port, "GET", "/healthz");
    if (!r || r->status != 200) return -1;
    auto j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j.value("agents", int64_t(-1)) : -1;
  };
  auto waitAgents = [&](int64_t want, int64_t deadline) {
    while (steadyNs() < deadline) {
      if (healthAgents() >= want) return true;
      ::usleep(20000);
    }
    return false;
  };
  auto getMetrics = [&] {
    auto r = http(o.http_port, "GET", "/metrics");
    return r ? r->body : std::string();
  };
  const int64_t deadline = steadyNs() + static_cast<int64_t>(o.timeout_s * kSec);
  bool ok = true;

  // 1. Peer: one sender, the same kind of batches, on the idle aggregator.
  driver.connect(*peer);
  if (!driver.sendFirstHeartbeats({*peer}, deadline) || !waitAgents(1, deadline)) {
    std::fprintf(stderr, "aggregator_load: the peer agent did not get through (keys? allow-list?)\n");
    return 1;
  }
  PhaseStats peer_st = driver.run({*peer}, peer_batches, 0, deadline);
  printPhase("peer", peer_st);
  std::fflush(stdout);

  // 2. Connect the fleet: every Curve handshake, ZAP check and first heartbeat stored.
  const int64_t overflows0 = listenOverflows();
  const int64_t t_conn = steadyNs();
  for (size_t i : fleet) driver.connect(i);
  bool sent = driver.sendFirstHeartbeats(fleet, deadline);
  bool stored = sent && waitAgents(static_cast<int64_t>(o.agents) + 1, deadline);
  const double connect_s = double(steadyNs() - t_conn) / 1e9;
  std::vector<int64_t> handshake_ns;
  for (size_t i : fleet)
    if (driver.agent(i).connected_ns) handshake_ns.push_back(driver.agent(i).connected_ns - t_conn);
  std::printf("connect   %5zu agents: handshake (TCP, Curve, ZAP) done p50 %.2f s, p99 %.2f s, max %.2f s; all first "
              "heartbeats stored after %.2f s; TCP listen-queue overflows %lld%s\n",
              o.agents, percentileMs(handshake_ns, 0.5) / 1e3, percentileMs(handshake_ns, 0.99) / 1e3,
              percentileMs(handshake_ns, 1.0) / 1e3, connect_s,
              static_cast<long long>(listenOverflows() - overflows0), stored ? "" : "  INCOMPLETE (deadline)");
  std::fflush(stdout);
  if (!stored) return 1;

  // 3. The job starts (prolog), long before the cascade (the sample's start, moved).
  std::string nodelist = o.prefix + "[" + hostName("", 1) + "-" + hostName("", job_nodes) + "]";
  auto started = http(o.http_port, "POST", "/jobs/" + o.job_id + "/start", token,
                      json{{"nodes", nodelist}, {"time", common::formatTimeNs(job_start_ns)}}.dump());
  if (!started || started->status != 200) {
    std::fprintf(stderr, "aggregator_load: POST start: %s\n", started ? started->body.c_str() : "no answer");
    return 1;
  }

  // 4. The cascade: every agent at once.
  auto cpu0 = threadTimes(o.aggregator_pid);
  double self0 = selfCpu();
  auto probe = std::make_unique<Prober>(o.http_port, "/jobs/" + o.job_id, 50);
  PhaseStats st = driver.run(fleet, o.batches, static_cast<int64_t>(o.spread_ms * kMs), deadline);
  auto probe_cascade = probe->finish();
  auto cpu1 = threadTimes(o.aggregator_pid);
  double self1 = selfCpu();
  printPhase("cascade", st);
  ok = ok && st.complete() && peer_st.complete();
  if (o.aggregator_pid > 0) {
    auto d = cpuDelta(cpu0, cpu1, o.aggregator_pid);
    std::printf("          cpu over %.2f s: aggregator %.2f s (%s), load generator %.2f s; %s; GET /jobs/%s p50 %.0f "
                "ms, max %.0f ms\n",
                st.seconds(), d.total, d.top.c_str(), self1 - self0, ingestShare(d, st.seconds()).c_str(),
                o.job_id.c_str(), percentileMs(probe_cascade, 0.5), percentileMs(probe_cascade, 1.0));
  }
  std::fflush(stdout);

  // 5. The job ends (epilog) right after the cascade: FAILED; then wait for the stored verdict.
  const int64_t t_end = steadyNs();
  auto ended = http(o.http_port, "POST", "/jobs/" + o.job_id + "/end", token,
                    json{{"state", "FAILED"}, {"exit_code", "1:0"}, {"time", common::formatTimeNs(wallNs())}}.dump());
  const double end_post_s = double(steadyNs() - t_end) / 1e9;
  json verdict;
  double verdict_s = -1;
  while (steadyNs() < deadline) {
    auto r = http(o.http_port, "GET", "/jobs/" + o.job_id);
    if (r && r->status == 200) {
      auto j = json::parse(r->body, nullptr, false);
      if (j.is_object() && j.contains("verdict") && j["verdict"].is_object()) {
        verdict_s = double(steadyNs() - t_end) / 1e9;
        verdict = j["verdict"];
        break;
      }
    }
    ::usleep(2000);
  }
  std::string m1 = getMetrics();
  if (verdict_s < 0) {
    std::printf("verdict   none within the deadline (end POST answered %s in %.3f s)\n",
                ended ? std::to_string(ended->status).c_str() : "nothing", end_post_s);
    ok = false;
  } else {
    std::string responsible;
    for (const auto& n : verdict.value("responsible_nodes", json::array()))
      responsible += (responsible.empty() ? "" : ",") + n.get<std::string>();
    std::string sub = verdict.value("sub_domain", std::string());
    std::string cause = verdict["cause"].is_string() ? verdict["cause"].get<std::string>() : "-";
    bool right = responsible == root_host && (sample->expected_sub_domain.empty() || sub == sample->expected_sub_domain) &&
                 (sample->expected_rule.empty() || cause == sample->expected_rule);
    ok = ok && right;
    std::printf("verdict   %zu-node job: end POST -> stored verdict readable (GET /jobs/%s) %.3f s; the end POST itself "
                "%.3f s; revision %d %s over %lld symptoms: sub_domain %s, responsible %s, cause %s (expected %s %s %s): "
                "%s\n",
                job_nodes, o.job_id.c_str(), verdict_s, end_post_s, verdict.value("revision", 0),
                verdict.value("status", "").c_str(), static_cast<long long>(verdict.value("symptoms", int64_t(0))),
                sub.c_str(), responsible.c_str(), cause.c_str(), root_host.c_str(),
                sample->expected_sub_domain.c_str(), sample->expected_rule.c_str(), right ? "RIGHT" : "WRONG");
    std::printf("          aggregator's own histograms: faultline_verdict_compute_seconds %.3f s, "
                "faultline_verdict_latency_seconds %.3f s\n",
                metric(m1, "faultline_verdict_compute_seconds_sum"), metric(m1, "faultline_verdict_latency_seconds_sum"));
  }
  std::fflush(stdout);

  // 6. Aftershock: the agents outside the job keep shipping while the big job's verdict is still
  // provisional (it stays so until every node reports past the end, or --final-timeout).
  PhaseStats after_st;
  if (!outside.empty() && o.after_batches > 0) {
    auto c0 = threadTimes(o.aggregator_pid);
    auto probe_after = std::make_unique<Prober>(o.http_port, "/jobs/" + o.job_id, 50);
    after_st = driver.run(outside, o.after_batches, 0, deadline);
    auto lat = probe_after->finish();
    auto c1 = threadTimes(o.aggregator_pid);
    std::string m2 = getMetrics();
    printPhase("after", after_st);
    ok = ok && after_st.complete();
    if (o.aggregator_pid > 0) {
      auto d = cpuDelta(c0, c1, o.aggregator_pid);
      double ticks = metric(m2, "faultline_verdict_tick_seconds_count") - metric(m1, "faultline_verdict_tick_seconds_count");
      double tick_s = metric(m2, "faultline_verdict_tick_seconds_sum") - metric(m1, "faultline_verdict_tick_seconds_sum");
      std::printf("          cpu over %.2f s: aggregator %.2f s (%s), main thread busy %.0f %%; %s; verdict ticks "
                  "that wrote a revision %.0f (%.2f s); GET /jobs/%s p50 %.0f ms, max %.0f ms\n",
                  after_st.seconds(), d.total, d.top.c_str(),
                  after_st.seconds() > 0 ? 100 * d.main / after_st.seconds() : 0, ingestShare(d, after_st.seconds()).c_str(),
                  ticks, tick_s, o.job_id.c_str(), percentileMs(lat, 0.5), percentileMs(lat, 1.0));
    }
  }

  std::string mtext = getMetrics();
  std::printf("store     faultline_ingest_seconds mean %.3f ms over %.0f batches; stored symptoms %.0f, duplicate "
              "batches %.0f, rejects %.0f\n",
              metric(mtext, "faultline_ingest_seconds_count") > 0
                  ? 1e3 * metric(mtext, "faultline_ingest_seconds_sum") / metric(mtext, "faultline_ingest_seconds_count")
                  : 0,
              metric(mtext, "faultline_ingest_seconds_count"), metric(mtext, "faultline_symptoms_total"),
              metric(mtext, "faultline_batches_total{result=\"duplicate\"}"), metric(mtext, "faultline_rejects_total"));
  auto rate = [](const PhaseStats& p) { return p.seconds() > 0 ? double(p.symptoms) / p.seconds() : 0; };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  std::printf("ratio     vs the 1-sender peer of this run: cascade (%zu senders) symptoms/s x%.2f, ack p50 x%.0f",
              st.agents, ratio(rate(st), rate(peer_st)),
              ratio(percentileMs(st.latency_ns, 0.5), percentileMs(peer_st.latency_ns, 0.5)));
  if (after_st.agents)
    std::printf("; after the verdict (%zu senders) symptoms/s x%.2f", after_st.agents, ratio(rate(after_st), rate(peer_st)));
  std::printf("\n");
  return ok ? 0 : 1;
}

// Writes DIR/keys/HOST.key + HOST.pub (the agent's side, like `faultline-agent keygen`) and
// DIR/allow/HOST.pub (the aggregator's allow-list) for PREFIX0001..PREFIXnnnn and the peer.
int cmdKeygen(const std::string& dir, size_t agents, const std::string& prefix, const std::string& peer) {
  std::error_code ec;
  fs::create_directories(dir + "/keys", ec);
  fs::create_directories(dir + "/allow", ec);
  if (ec) {
    std::fprintf(stderr, "aggregator_load keygen: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::vector<std::string> hosts;
  for (size_t i = 1; i <= agents; ++i) hosts.push_back(hostName(prefix, i));
  hosts.push_back(peer);
  for (const auto& h : hosts) {
    char pub[41] = {}, sec[41] = {};
    if (zmq_curve_keypair(pub, sec) != 0) {
      std::fprintf(stderr, "aggregator_load keygen: %s\n", zmq_strerror(zmq_errno()));
      return 1;
    }
    std::ofstream(dir + "/keys/" + h + ".key") << sec << "\n";
    std::ofstream(dir + "/keys/" + h + ".pub") << pub << "\n";
    std::ofstream(dir + "/allow/" + h + ".pub") << pub << "\n";
  }
  std::printf("%zu key pairs in %s/keys, allow-list %s/allow\n", hosts.size(), dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aggregator_load: simulated agents against a running faultline-aggregator"};
  app.require_subcommand(1);
  RunOptions o;
  std::string keygen_dir;
  auto* keygen = app.add_subcommand("keygen", "write agent key pairs and the allow-list directory");
  keygen->add_option("dir", keygen_dir)->required();
  for (auto* c : {keygen}) {
    c->add_option("--agents", o.agents, "number of agents (hosts PREFIX0001..)");
    c->add_option("--prefix", o.prefix, "hostname prefix");
    c->add_option("--peer-host", o.peer_host, "hostname of the single-sender peer");
  }
  auto* run = app.add_subcommand("run", "the load run (see bench/README.md)");
  run->add_option("--agents", o.agents, "concurrent senders (hosts PREFIX0001..)");
  run->add_option("--prefix", o.prefix, "hostname prefix");
  run->add_option("--peer-host", o.peer_host, "hostname of the single-sender peer");
  run->add_option("--endpoint", o.endpoint, "aggregator ingest endpoint (tcp://127.0.0.1:PORT)")->required();
  run->add_option("--server-key", o.server_key_file, "the aggregator's public key file (server.pub)")->required();
  run->add_option("--keys", o.keys_dir, "directory of HOST.key/HOST.pub (keygen DIR/keys)")->required();
  run->add_option("--http-port", o.http_port, "aggregator HTTP port")->required();
  run->add_option("--token-file", o.token_file, "bearer token for job start/end")->required();
  run->add_option("--sample", o.sample_dir, "cascade sample bundle (samples/cascade64-xid79)")->required();
  run->add_option("--rules", o.rules_dir, "rule directory")->required();
  run->add_option("--aggregator-pid", o.aggregator_pid, "for per-thread CPU time from /proc");
  run->add_option("--job-id", o.job_id, "id of the judged job");
  run->add_option("--job-nodes", o.job_nodes, "nodes of the judged job (the first agents)");
  run->add_option("--root-index", o.root_index, "1-based agent that carries the root symptom (default middle)");
  run->add_option("--batches", o.batches, "batches per agent");
  run->add_option("--symptoms-per-batch", o.per_batch, "symptoms per batch");
  run->add_option("--peer-batches", o.peer_batches, "batches of the single-sender peer (default min(total, 1000))");
  run->add_option("--after-batches", o.after_batches, "batches per agent outside the job after the verdict (0: no phase)");
  run->add_option("--in-flight", o.in_flight, "unacked batches per agent (the agent's max_in_flight)");
  run->add_option("--ack-timeout-ms", o.ack_timeout_ms, "resend after (the agent's ack_timeout_ms)");
  run->add_option("--heartbeat-ms", o.heartbeat_ms, "heartbeat interval during the cascade");
  run->add_option("--spread-ms", o.spread_ms, "agents start over this span (0: all at once)");
  run->add_option("--io-threads", o.io_threads, "zmq io threads of the generator");
  run->add_option("--timeout", o.timeout_s, "give up after this many seconds");
  CLI11_PARSE(app, argc, argv);
  if (*keygen) return cmdKeygen(keygen_dir, o.agents, o.prefix, o.peer_host);
  if (o.agents == 0 || o.batches == 0 || o.per_batch == 0 || o.in_flight == 0) {
    std::fprintf(stderr, "aggregator_load: --agents, --batches, --symptoms-per-batch, --in-flight must be > 0\n");
    return 2;
  }
  return cmdRun(o);
}
