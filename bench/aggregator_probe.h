// What the aggregator load bench observes of a running faultline-aggregator from the outside:
// its HTTP API (a minimal blocking HTTP/1.1 client), its /metrics text, where its threads spend
// their time (/proc/PID/task/TID/schedstat) and the kernel's count of refused TCP connections.
// Linux only. Blocking calls on the calling thread; nothing throws.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace faultline::bench {

struct HttpResponse {
  int status = 0;
  std::string body;
};
// One request to 127.0.0.1:port on a fresh connection ("Connection: close"); nullopt when the
// connection fails or the answer is not HTTP/1.1. A non-empty token goes as a bearer token.
std::optional<HttpResponse> http(uint16_t port, const std::string& method, const std::string& path,
                                 const std::string& token = "", const std::string& body = "");

// A Prometheus sample's value: NAME (summed over its label sets) or NAME{labels} (that series).
double metric(const std::string& text, const std::string& name);

// TcpExt ListenOverflows of this network namespace (all sockets): connections refused because an
// accept queue was full. -1 when unreadable.
int64_t listenOverflows();

// CPU seconds (user + system) this process has used.
double selfCpu();

struct ThreadTime {
  std::string name;
  int64_t on_cpu_ns = 0;    // running
  int64_t runqueue_ns = 0;  // runnable, waiting for a CPU (the machine is busy)
  int64_t write_calls = 0;  // write-like system calls (/proc/.../io syscw)
  int64_t write_bytes = 0;  // bytes they wrote (wchar)
};
// Every thread of `pid` by tid; empty when pid <= 0 or gone.
std::map<int, ThreadTime> threadTimes(int pid);

// Between two threadTimes() snapshots of faultline-aggregator: CPU seconds in total, of the main
// thread (HTTP API and verdict ticks) and of the ingest thread (the one that stores and acks; the
// aggregator's only thread that is neither main nor ZMQbg/...), and the three busiest threads.
struct CpuDelta {
  double total = 0;
  double main = 0;
  double ingest_cpu = 0, ingest_runqueue = 0;
  int64_t ingest_write_calls = 0, ingest_write_bytes = 0;
  std::string top;  // "ingest 1.23 s, ZMQbg/IO/0 0.40 s, main/http+verdicts 0.10 s"
};
CpuDelta cpuDelta(const std::map<int, ThreadTime>& before, const std::map<int, ThreadTime>& after, int pid);
// How the ingest thread spent `wall_s`: on a CPU, runnable but waiting for one, blocked (SQLite
// I/O, the store lock, or idle in zmq_poll when nothing is queued); and per batch its CPU time and
// writes (SQLite's WAL frames, mostly).
std::string ingestShare(const CpuDelta& d, double wall_s, uint64_t batches);

// Repeats one GET on its own thread (one request at a time, `pause_ms` between) and records how
// long each successful one took: what an operator's `faultline job ID` waits meanwhile.
class Prober {
 public:
  Prober(uint16_t port, std::string path, int pause_ms);
  ~Prober();
  // Stops the thread and returns the latencies (ns). Call once.
  std::vector<int64_t> finish();

 private:
  uint16_t port_;
  std::string path_;
  int pause_ms_;
  std::atomic<bool> stop_{false};
  std::vector<int64_t> latency_ns_;  // the prober thread's until finish() joins it
  std::thread thread_;
};

}  // namespace faultline::bench
