// agent_bench_receiver: the smallest aggregator stand-in for the agent benchmarks. Binds a ZeroMQ
// ROUTER, acknowledges every batch it can decode (as the aggregator does after storing it),
// counts messages and bytes per frame type, and on SIGTERM/SIGINT prints one line of
// `key=value` facts:
//
//   messages=12 wire_bytes=5234 batch.messages=3 batch.bytes=4100 heartbeat.messages=9 ...
//   batches=3 duplicates=0 symptoms=17 occurrences=100412 bad=0 templates=12 template_lines=40 templates_left_out=0
//
// wire_bytes counts the type and payload frames (what the agent chose to send); ZMTP framing
// adds a few bytes per frame and CurveZMQ 33 per message on top (not counted).
//
// Usage: agent_bench_receiver ENDPOINT   (e.g. ipc:///tmp/x/agg.sock or tcp://127.0.0.1:7400)
#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/protocol.h"
#include "common/wire.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void onSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline::common;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ENDPOINT\n", argv[0]);
    return 2;
  }
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::router);
  sock.set(zmq::sockopt::linger, 0);
  sock.set(zmq::sockopt::rcvtimeo, 100);
  sock.bind(argv[1]);
  std::printf("listening %s\n", sock.get(zmq::sockopt::last_endpoint).c_str());
  std::fflush(stdout);

  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // messages, bytes
  std::set<std::pair<std::string, uint64_t>> seen;
  uint64_t messages = 0, wire = 0, batches = 0, duplicates = 0, symptoms = 0, occurrences = 0, bad = 0;
  uint64_t templates = 0, template_lines = 0, templates_left_out = 0;  // issue 30's unmatched templates
  uint64_t inflated = 0;  // payload bytes after removing zstd
  while (!g_stop) {
    std::vector<zmq::message_t> frames;
    zmq::message_t m;
    try {
      if (!sock.recv(m)) continue;  // timeout: look at g_stop
      frames.push_back(std::move(m));
      while (frames.back().more()) {
        zmq::message_t part;
        (void)sock.recv(part);
        frames.push_back(std::move(part));
      }
    } catch (const zmq::error_t&) {
      continue;  // EINTR
    }
    if (frames.size() != 3) {
      ++bad;
      continue;
    }
    ++messages;
    uint64_t bytes = frames[1].size() + frames[2].size();
    wire += bytes;
    auto& t = by_type[frames[1].to_string()];
    ++t.first;
    t.second += bytes;
    UnwrappedPayload u;
    std::string reason;
    if (!unwrapPayload(frames[1].to_string_view(), frames[2].to_string_view(), &u, &reason)) {
      ++bad;
      continue;
    }
    inflated += u.payload.size();
    if (u.type != kTypeBatch) continue;
    auto b = decodeBatch(u.payload.data(), u.payload.size(), &reason);
    if (!b) {
      ++bad;
      continue;
    }
    if (seen.insert({b->header.agent_id, b->header.sequence}).second) {
      ++batches;
      symptoms += b->symptoms.size();
      for (const auto& s : b->symptoms) occurrences += s.count;
      templates += b->unmatched.size();
      for (const auto& t : b->unmatched) template_lines += t.count;
      templates_left_out += b->unmatched_left_out;
    } else {
      ++duplicates;
    }
    sock.send(zmq::buffer(frames[0].to_string_view()), zmq::send_flags::sndmore);
    sock.send(zmq::buffer(kTypeAck), zmq::send_flags::sndmore);
    sock.send(zmq::buffer(encodeAck({b->header.agent_id, b->header.sequence})));
  }
  std::printf("messages=%llu wire_bytes=%llu unpacked_bytes=%llu", static_cast<unsigned long long>(messages),
              static_cast<unsigned long long>(wire), static_cast<unsigned long long>(inflated));
  for (const auto& [type, mb] : by_type)
    std::printf(" %s.messages=%llu %s.bytes=%llu", type.c_str(), static_cast<unsigned long long>(mb.first),
                type.c_str(), static_cast<unsigned long long>(mb.second));
  std::printf(" batches=%llu duplicates=%llu symptoms=%llu occurrences=%llu bad=%llu templates=%llu template_lines=%llu"
              " templates_left_out=%llu\n",
              static_cast<unsigned long long>(batches), static_cast<unsigned long long>(duplicates),
              static_cast<unsigned long long>(symptoms), static_cast<unsigned long long>(occurrences),
              static_cast<unsigned long long>(bad), static_cast<unsigned long long>(templates),
              static_cast<unsigned long long>(template_lines), static_cast<unsigned long long>(templates_left_out));
  return 0;
}
