// An agent of wire version 1 talks to the current aggregator: its batch and heartbeat, written with
// the frozen v1 builders, decode with the current common::decodeBatch / decodeHeartbeat to the
// same values (fields v1 lacks at their defaults), and over CurveZMQ the real
// faultline-aggregator acks and stores them (read back with `faultline --db`).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "aggregator/jobs/sacct_poller.h"
#include "tests/aggregator/core/test_util.h"
#include "tests/compat/compat_util.h"

extern char** environ;

using namespace faultline;
using namespace faultline::compat::testing;
using aggregator::testing::pollUntil;
using aggregator::testing::TempDir;
using nlohmann::json;

TEST_CASE("compat: a v1 batch and heartbeat decode with the current decoders to the same values",
          "[compat]") {
  const auto batch = v1Batch();
  const std::string batch_bytes = packV1<v1::SymptomBatch>(batch);
  const auto hb = sampleHeartbeat(false);
  const std::string hb_bytes = packV1<v1::Heartbeat>(hb);

  SECTION("the old agent's messages hold every v1 field") {
    PackedReader b(batch_bytes), h(hb_bytes);
    CHECK(unsetFields(capnp::toDynamic(b.root<v1::SymptomBatch>())).empty());
    CHECK(unsetFields(capnp::toDynamic(h.root<v1::Heartbeat>())).empty());
  }
  SECTION("every field reads the same through the current schema; the appended ones at defaults") {
    std::vector<std::string> diffs;
    PackedReader old_b(batch_bytes), new_b(batch_bytes);
    diffStructs(capnp::toDynamic(old_b.root<v1::SymptomBatch>()),
                capnp::toDynamic(new_b.root<now::SymptomBatch>()), "", true, &diffs);
    PackedReader old_h(hb_bytes), new_h(hb_bytes);
    diffStructs(capnp::toDynamic(old_h.root<v1::Heartbeat>()),
                capnp::toDynamic(new_h.root<now::Heartbeat>()), "", true, &diffs);
    INFO(Catch::Detail::stringify(diffs));
    CHECK(diffs.empty());
    CHECK_FALSE(new_h.root<now::Heartbeat>().hasInventory());
  }
  SECTION("common::decodeBatch and decodeHeartbeat give the values the old agent sent") {
    std::string reason;
    auto got = common::decodeBatch(batch_bytes.data(), batch_bytes.size(), &reason);
    INFO(reason);
    REQUIRE(got);
    checkSame(*got, batch);
    auto got_hb = common::decodeHeartbeat(hb_bytes, &reason);
    REQUIRE(got_hb);
    checkSame(*got_hb, hb);  // hb has no inventory and hash 0: the defaults
  }
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s(std::istreambuf_iterator<char>(in), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Aggregator {
  pid_t pid = -1;
  ~Aggregator() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

void keygen(const std::string& dir, const std::string& name) {
  auto out = aggregator::runCommand(
      std::string(FAULTLINE_CLI_BIN) + " keygen " + dir + " --name " + name, 4096);
  REQUIRE(out.status == 0);
}

json cliJson(const std::string& db, const std::string& args) {
  auto out = aggregator::runCommand(
      std::string(FAULTLINE_CLI_BIN) + " --db " + db + " " + args + " --json 2>/dev/null", 1 << 20);
  if (out.status != 0) return nullptr;
  return json::parse(out.out, nullptr, false);
}

}  // namespace

TEST_CASE(
    "compat: the real aggregator acks and stores a v1 agent's batch and heartbeat over CurveZMQ",
    "[compat][binary]") {
  TempDir dir;
  const std::string db = dir.file("agg.db");
  keygen(dir.file("server"), "server");
  keygen(dir.file("agent"), "agent");
  std::filesystem::create_directories(dir.file("agents.d"));
  std::filesystem::copy_file(dir.file("agent/agent.pub"), dir.file("agents.d/") + kHost + ".pub");
  std::ofstream(dir.file("token")) << "t0ken\n";

  std::vector<std::string> args = {FAULTLINE_AGGREGATOR_BIN,
                                   "--db",
                                   db,
                                   "--port",
                                   "0",
                                   "--port-file",
                                   dir.file("port"),
                                   "--token-file",
                                   dir.file("token"),
                                   "--rules",
                                   FAULTLINE_SOURCE_DIR "/rules",
                                   "--ingest-endpoint",
                                   "tcp://127.0.0.1:*",
                                   "--ingest-endpoint-file",
                                   dir.file("ingest"),
                                   "--curve-secret-key",
                                   dir.file("server/server.key"),
                                   "--allow-dir",
                                   dir.file("agents.d")};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, dir.file("aggregator.log").c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  Aggregator agg;
  REQUIRE(posix_spawn(&agg.pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  bool up = pollUntil([&] { return !slurp(dir.file("ingest")).empty(); }, std::chrono::seconds(20));
  {
    INFO(slurp(dir.file("aggregator.log")));
    REQUIRE(up);
  }

  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, kAgentId);
  dealer.set(zmq::sockopt::curve_serverkey, slurp(dir.file("server/server.pub")));
  dealer.set(zmq::sockopt::curve_publickey, slurp(dir.file("agent/agent.pub")));
  dealer.set(zmq::sockopt::curve_secretkey, slurp(dir.file("agent/agent.key")));
  dealer.connect(slurp(dir.file("ingest")));

  const auto batch = v1Batch();
  const auto hb = sampleHeartbeat(false);
  const std::string batch_bytes = packV1<v1::SymptomBatch>(batch),
                    hb_bytes = packV1<v1::Heartbeat>(hb);
  dealer.send(zmq::str_buffer("batch"), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(batch_bytes));

  // The ack comes after the batch is committed: wait for it on the socket, against a deadline.
  std::optional<common::Ack> ack;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ack && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(1))) <= 0) continue;
    zmq::message_t type, payload;
    REQUIRE(dealer.recv(type));
    REQUIRE(type.more());
    REQUIRE(dealer.recv(payload));
    if (type.to_string_view() == common::kTypeAck)
      ack = common::decodeAck(payload.to_string_view());
  }
  {
    INFO(slurp(dir.file("aggregator.log")));
    REQUIRE(ack);
  }
  CHECK(ack->agent_id == kAgentId);
  CHECK(ack->sequence == batch.header.sequence);

  dealer.send(zmq::str_buffer("heartbeat"), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(hb_bytes));
  // Heartbeats are not acked: poll the store until the agent's row shows this one.
  json agents;
  bool stored = pollUntil(
      [&] {
        agents = cliJson(db, "agents");
        return agents.is_array() && agents.size() == 1 &&
               agents[0].value("spool_batches", uint64_t{0}) == hb.spool_batches;
      },
      std::chrono::seconds(20));
  {
    INFO(slurp(dir.file("aggregator.log")) << "\nagents: " << agents.dump());
    REQUIRE(stored);
  }
  const auto& a = agents[0];
  CHECK(a["agent_id"] == kAgentId);
  CHECK(a["hostname"] == kHost);
  CHECK(a["boot_id"] == hb.boot_id);
  CHECK(a["agent_version"] == hb.agent_version);
  CHECK(a["ruleset_version"] == hb.ruleset_version);
  CHECK(a["spool_bytes"] == hb.spool_bytes);
  CHECK(a["dropped_symptoms"] == hb.dropped_symptoms);
  CHECK(a["batches"] == 1);
  CHECK(a["symptoms"] == batch.symptoms.size());
  CHECK_FALSE(a["last_heartbeat"].is_null());
  CHECK_FALSE(a["started"].is_null());
  REQUIRE(a["sources"].size() == hb.sources.size());
  for (const auto& want : hb.sources) {
    INFO("source " << want.name);
    auto it = std::find_if(a["sources"].begin(), a["sources"].end(),
                           [&](const json& s) { return s["source"] == want.name; });
    REQUIRE(it != a["sources"].end());
    CHECK((*it)["format"] == want.format);
    CHECK((*it)["status"] == want.status);
    CHECK((*it)["reason"] == want.reason);
    CHECK((*it)["records"] == want.records);
    CHECK((*it)["skipped"] == want.skipped);
    CHECK((*it)["lost"] == want.lost);
  }

  json symptoms = cliJson(db, std::string("symptoms --node ") + kHost);
  REQUIRE(symptoms.is_array());
  REQUIRE(symptoms.size() == batch.symptoms.size());
  for (const auto& want : batch.symptoms) {
    INFO("symptom " << want.rule_id);
    auto it = std::find_if(symptoms.begin(), symptoms.end(),
                           [&](const json& s) { return s["rule_id"] == want.rule_id; });
    REQUIRE(it != symptoms.end());
    const json& s = *it;
    CHECK(s["agent_id"] == kAgentId);
    CHECK(s["symptom"] == want.symptom);
    CHECK(s["sub_domain"] == common::subDomainName(want.sub_domain));
    CHECK(s["category"] == want.category);
    CHECK(s["role"] == common::roleName(want.role));
    CHECK(s["severity"] == common::severityName(want.severity));
    CHECK(s["fallback_root"] == want.fallback_root);
    CHECK(s["node"] == want.node);
    CHECK(s["device"] == want.device);
    CHECK(s["source"] == want.source);
    CHECK(s["source_kind"] == common::sourceKindName(want.source_kind));
    CHECK(s["first_ns"] == want.first_ns);
    CHECK(s["last_ns"] == want.last_ns);
    CHECK(s["time_known"] == want.time_known);
    CHECK(s["count"] == want.count);
    CHECK(s["evidence"] == want.evidence);
    CHECK(s["fields"] == want.fields);
    CHECK(s["summary"] == want.summary);
    CHECK(s["boot_id"] == want.boot_id);
  }

  ::kill(agg.pid, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(agg.pid, &status, 0) == agg.pid);
  agg.pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
