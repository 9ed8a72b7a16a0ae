// Which hosts' agents are connected to this aggregator right now, so that "live" means alive: an
// agent that crashes or is stopped closes its TCP connection at once, and its host stops being
// live then — not a heartbeat timeout (90 s) later, which stays for deaths that close nothing
// (a hung node, a cut cable).
//
// libzmq 4.3's ROUTER says nothing per peer when a connection closes, so this joins two things
// by the connection's file descriptor: the ingest thread binds a host to the fd its messages
// arrived on (ZMQ_SRCFD), and the endpoint's socket monitor reports ACCEPTED / DISCONNECTED with
// the fd. Every ACCEPTED starts a new generation of its fd, so a message still queued from a
// closed connection (read after its DISCONNECTED) cannot bind a host to a reused fd, and a new
// connection's close cannot unbind the host of an old one.
//
// In memory, for this process's connections only (with several replicas an agent is connected
// to one of them). Thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace faultline::aggregator {

class ConnectionTracker {
 public:
  // Monitor thread.
  void accepted(int fd);
  void disconnected(int fd, int64_t now_ns);
  // Ingest thread: a message of `host` arrived on `fd`.
  void seen(const std::string& host, int fd);
  // When `host`'s connection closed (realtime ns) and it has not been seen on an open one since;
  // 0: connected, or never seen here.
  int64_t disconnectedAt(const std::string& host) const;

 private:
  struct Connection {
    uint64_t generation = 0;
    std::string host;  // "" until a message arrived on it
  };
  struct Binding {
    uint64_t generation = 0;
    int64_t disconnected_ns = 0;
  };
  mutable std::mutex mu_;
  uint64_t generations_ = 0;
  std::map<int, Connection> fds_;  // open connections, by fd
  std::map<std::string, Binding> hosts_;
};

}  // namespace faultline::aggregator
