// Helpers shared by the agent's tests: temp dirs, a deadline-bounded event loop pump (no
// sleeps), a minimal acking ZeroMQ receiver and journal files made with systemd-journal-remote.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "agent/protocol.h"
#include "common/rule_set.h"
#include "common/uplink/shipper.h"
#include "common/wire.h"

namespace faultline::agent::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "faultline-agent-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs the io_context until pred() holds or the deadline passes. Waits on the loop, never sleeps.
inline bool runUntil(boost::asio::io_context& io, const std::function<bool()>& pred,
                     std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

inline std::shared_ptr<const common::RuleSet> shippedRules() {
  static auto rules = common::loadRuleDirs({std::string(FAULTLINE_SOURCE_DIR) + "/rules"}).rules;
  return rules;
}

// A minimal aggregator: ROUTER on tcp://127.0.0.1:*, stores batches, acks them (unless told not
// to), deduplicates by (agent, sequence) as the real one will.
class Receiver {
 public:
  explicit Receiver(zmq::context_t& ctx, std::string endpoint = "tcp://127.0.0.1:*",
                    const std::string& curve_secret = "")
      : socket_(ctx, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    if (!curve_secret.empty()) {
      socket_.set(zmq::sockopt::curve_server, 1);
      socket_.set(zmq::sockopt::curve_secretkey, curve_secret);
    }
    socket_.bind(endpoint);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  // Blocks on the socket (zmq_poll) until a message is readable or the timeout passes.
  void waitReadable(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
  }
  // Reads everything pending; acks batches when `ack` is set.
  void pump() {
    while (true) {
      std::vector<zmq::message_t> frames;
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::dontwait)) return;
      frames.push_back(std::move(m));
      while (frames.back().more()) {
        zmq::message_t part;
        (void)socket_.recv(part, zmq::recv_flags::none);
        frames.push_back(std::move(part));
      }
      if (frames.size() != 3) continue;
      wire_bytes += frames[1].size() + frames[2].size();
      ++types[frames[1].to_string()];
      common::UnwrappedPayload u;
      std::string reason;
      if (!common::unwrapPayload(frames[1].to_string_view(), frames[2].to_string_view(), &u, &reason)) {
        ++bad;
        continue;
      }
      if (u.type == kTypeHeartbeat) {
        if (auto hb = decodeHeartbeat(u.payload, &reason)) heartbeats.push_back(*hb);
        continue;
      }
      if (u.type != kTypeBatch) continue;
      ++received;
      auto b = common::decodeBatch(u.payload.data(), u.payload.size(), &reason);
      if (!b) {
        ++bad;
        continue;
      }
      order.push_back(b->header.sequence);
      auto key = std::make_pair(b->header.agent_id, b->header.sequence);
      if (!seen.count(key)) {
        seen.insert(key);
        batches.push_back(*b);
      } else {
        ++duplicates;
      }
      if (ack) {
        socket_.send(zmq::buffer(frames[0].to_string_view()), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(kTypeAck), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(encodeAck({b->header.agent_id, b->header.sequence})));
      }
    }
  }
  // Occurrences per rule over the unique batches.
  std::map<std::string, uint64_t> countsByRule() const {
    std::map<std::string, uint64_t> out;
    for (const auto& b : batches)
      for (const auto& s : b.symptoms) out[s.rule_id] += s.count;
    return out;
  }
  uint64_t occurrences() const {
    uint64_t n = 0;
    for (const auto& [r, c] : countsByRule()) n += c;
    return n;
  }

  bool ack = true;
  uint64_t received = 0, duplicates = 0, bad = 0;
  uint64_t wire_bytes = 0;                  // type + payload frames as received
  std::map<std::string, uint64_t> types;    // messages per frame type
  std::vector<uint64_t> order;
  std::set<std::pair<std::string, uint64_t>> seen;
  std::vector<common::SymptomBatchData> batches;
  std::vector<HeartbeatData> heartbeats;

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
};

// A shipper that sends to `rx` as `agent_id`, driven by the test's event loop (no tick timer).
inline uplink::ShipperOptions shipperTo(const Receiver& rx, const std::string& agent_id = "agent-1") {
  uplink::ShipperOptions so;
  so.endpoints = {rx.endpoint()};
  so.agent_id = agent_id;
  so.tick_ms = 0;
  return so;
}

// Writes journal export text into DIR/NAME (must end in .journal) with systemd-journal-remote.
inline bool makeJournal(const std::string& export_text, const std::string& path) {
  std::string cmd = "/lib/systemd/systemd-journal-remote --output=" + path + " - 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "w");
  if (!p) return false;
  std::fwrite(export_text.data(), 1, export_text.size(), p);
  return ::pclose(p) == 0 && std::filesystem::exists(path);
}

// One export-format entry.
inline std::string journalEntry(uint64_t realtime_usec, const std::string& message,
                                const std::string& transport = "syslog",
                                const std::string& ident = "app", const std::string& unit = "") {
  std::string e = "__REALTIME_TIMESTAMP=" + std::to_string(realtime_usec) + "\n";
  e += "__MONOTONIC_TIMESTAMP=" + std::to_string(realtime_usec % 1000000000) + "\n";
  e += "_BOOT_ID=0123456789abcdef0123456789abcdef\n_HOSTNAME=gpu-node-1\n";
  e += "_TRANSPORT=" + transport + "\nPRIORITY=3\nSYSLOG_IDENTIFIER=" + ident + "\n";
  if (!unit.empty()) e += "_SYSTEMD_UNIT=" + unit + "\n";
  e += "MESSAGE=" + message + "\n\n";
  return e;
}

}  // namespace faultline::agent::testing
