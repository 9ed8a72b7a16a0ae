// What the live verdicts know of a job's nodes beyond their symptoms (issue 12): the agents'
// inventories (addresses resolve the peer an NCCL error names; GPU count) and the nodes' recent
// record in other jobs' verdicts (node history: a repeat offender). Real SQLite files, the
// shipped rules, an injected clock.
#include <catch2/catch.hpp>

#include <algorithm>

#include "aggregator/verdicts/verdict_engine.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

constexpr int64_t kDay = 86400 * kSec;

// Moves the clock forward to `t`.
void setClock(ManualClock& clock, int64_t t) {
  REQUIRE(t >= clock.nowNs());
  clock.advance(t - clock.nowNs());
}

std::shared_ptr<const common::RuleSet> shippedRules() {
  static auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  return loaded.rules;
}

common::NodeInventory inventory(std::vector<std::string> addresses, size_t gpus, std::string gpu_error = "") {
  common::NodeInventory inv;
  inv.collected_ns = kT0;
  for (size_t i = 0; i < gpus; ++i)
    inv.gpus.push_back({uint32_t(i), "0000:" + std::to_string(10 + i) + ":00.0", "GPU-" + std::to_string(i), ""});
  inv.gpu_error = std::move(gpu_error);
  inv.addresses = std::move(addresses);
  return inv;
}

struct Fixture {
  TempDir dir;
  ManualClock clock{kT0};
  std::unique_ptr<Store> store = openStore(dir.file("facts.db"), clock);
  VerdictOptions options;
  std::unique_ptr<VerdictEngine> engine;

  Fixture() { engine = std::make_unique<VerdictEngine>(*store, clock, shippedRules(), options); }
  void heartbeat(const std::string& node, std::optional<common::NodeInventory> inv) {
    HeartbeatInfo hb;
    hb.agent_id = "agent-" + node;
    hb.hostname = node;
    hb.boot_id = "boot-1";
    hb.created_ns = clock.nowNs();
    hb.inventory = std::move(inv);
    std::string reason;
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  }
  void job(const std::string& id, const std::string& nodes, int64_t start, int64_t end, const std::string& state) {
    recordTestJob(*store, id, nodes, start, end, state);
  }
  void ingest(const std::string& node, uint64_t seq, std::vector<common::Symptom> symptoms) {
    REQUIRE(store->ingestBatch(makeBatch(node, seq, std::move(symptoms)), "agent-" + node).status ==
            IngestResult::Status::kStored);
  }
  // A stored verdict naming `blamed` (node, device) responsible.
  // `cause_at`: the verdict's cause is an Xid 79 at that time (an event); 0: no cause recorded.
  void verdict(const std::string& job_id, std::vector<std::pair<std::string, std::string>> blamed, int64_t cause_at = 0) {
    VerdictRow v;
    v.job_id = job_id;
    v.created_ns = clock.nowNs();
    v.status = "final";
    v.reason = "job_end";
    v.diagnosis.terminal_state = "fail";
    v.diagnosis.sub_domain = common::SubDomain::kHardware;
    for (auto& [node, device] : blamed) v.diagnosis.responsible.push_back({node, device, 0.9});
    if (cause_at) {
      common::Cause c;
      c.rule_id = "xid.79";
      c.node = blamed.front().first;
      c.device = blamed.front().second;
      c.time_ns = cause_at;
      c.time_known = true;
      v.diagnosis.cause = c;
    }
    std::string error;
    REQUIRE(store->addVerdict(v, &error) > 0);
  }
  JobRow jobRow(const std::string& id) {
    auto j = store->job(id);
    REQUIRE(j);
    return *j;
  }
};

// NCCL's "NET/IB : Got completion from peer 10.0.0.2<1234> with error 12" on a rank of `node`,
// as the shipped rule nccl.ib_completion_error makes it: network, cascade, fallback root.
common::Symptom ncclCompletionError(const std::string& node, int64_t t, const std::string& peer) {
  auto s = makeSymptom(node, "nccl.ib_completion_error", t, common::SubDomain::kNetwork, common::Role::kCascade);
  s.symptom = "nccl_ib_completion_error";
  s.category = "infiniband";
  s.severity = common::Severity::kError;
  s.fallback_root = true;
  s.source = "rank.log";
  s.source_kind = common::SourceKind::kApplication;
  s.fields = {{"peer", peer}};
  s.summary = "NCCL IB completion error from peer " + peer;
  return s;
}

// The kernel's "infiniband mlx5_0: ... WC error: 12, Message: transport retry counter exceeded"
// (kernel.mlx5_ib_wc_error): weak evidence on the node's own kernel log, naming no peer.
common::Symptom kernelWcError(const std::string& node, int64_t t) {
  auto s = makeSymptom(node, "kernel.mlx5_ib_wc_error", t, common::SubDomain::kNetwork, common::Role::kCascade);
  s.symptom = "rdma_completion_error_kernel";
  s.category = "infiniband";
  s.severity = common::Severity::kWarning;
  s.fallback_root = true;
  s.fields = {{"ibdev", "mlx5_0"}, {"wc_msg", "transport retry counter exceeded"}};
  s.summary = "RDMA completion error on mlx5_0: transport retry counter exceeded";
  return s;
}

common::Symptom xid79(const std::string& node, int64_t t) {
  auto s = makeSymptom(node, "gpu.xid.79", t, common::SubDomain::kHardware, common::Role::kRoot, "0000:3b:00.0");
  s.symptom = "gpu_fell_off_bus";
  return s;
}

std::vector<std::string> nodesOf(const common::Diagnosis& d) {
  std::vector<std::string> out;
  for (const auto& r : d.responsible) out.push_back(r.node);
  return out;
}

}  // namespace

TEST_CASE("store: the latest inventory a heartbeat carried is kept per node, also across a reopen", "[store][facts]") {
  TempDir dir;
  ManualClock clock{kT0};
  {
    auto store = openStore(dir.file("inv.db"), clock);
    HeartbeatInfo hb;
    hb.agent_id = "agent-gpu-b";
    hb.hostname = "gpu-b";
    std::string reason;
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
    CHECK(store->inventories({"gpu-b"}).empty());
    hb.inventory = inventory({"10.0.0.2", "fd00::2"}, 8);
    hb.inventory->hcas.push_back({"mlx5_0", "0000:0c:00.0", 1, "ACTIVE", "InfiniBand"});
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
    hb.inventory.reset();  // "unchanged": the stored one stays
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  }
  auto store = openStore(dir.file("inv.db"), clock);
  auto got = store->inventories({"gpu-a", "gpu-b"});
  REQUIRE(got.size() == 1);
  const auto& inv = got.at("gpu-b");
  CHECK(inv.addresses == std::vector<std::string>{"10.0.0.2", "fd00::2"});
  CHECK(inv.gpus.size() == 8);
  CHECK(inv.gpus[3].pci_bus_id == "0000:13:00.0");
  REQUIRE(inv.hcas.size() == 1);
  CHECK(inv.hcas[0].state == "ACTIVE");
  CHECK(inv.collected_ns == kT0);
  CHECK(inv.sameDevices(inventory({"10.0.0.2", "fd00::2"}, 8)) == false);  // the HCA is part of it
  // What the verdict reads of it: the GPU count and the addresses, written beside the text.
  auto facts = store->inventoryFacts({"gpu-a", "gpu-b"});
  REQUIRE(facts.size() == 1);
  CHECK(facts.at("gpu-b").gpu_count == 8);
  CHECK(facts.at("gpu-b").addresses == std::vector<std::string>{"10.0.0.2", "fd00::2"});

  // A changed inventory replaces it (an address moved, nvidia-smi failed).
  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-b";
  hb.hostname = "gpu-b";
  hb.inventory = inventory({"10.0.0.22"}, 0, "nvidia-smi: exit status 9");
  std::string reason;
  REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  got = store->inventories({"gpu-b"});
  CHECK(got.at("gpu-b").addresses == std::vector<std::string>{"10.0.0.22"});
  CHECK(got.at("gpu-b").gpu_error == "nvidia-smi: exit status 9");
  CHECK(got.at("gpu-b").gpus.empty());
  facts = store->inventoryFacts({"gpu-b"});
  CHECK_FALSE(facts.at("gpu-b").gpu_count);  // an unreadable GPU list says nothing of the count
  CHECK(facts.at("gpu-b").addresses == std::vector<std::string>{"10.0.0.22"});
}

TEST_CASE("store: a node's recent failures count other failed jobs whose latest verdict blamed it", "[store][facts]") {
  Fixture f;
  const int64_t end = kT0 + 30 * kDay;
  setClock(f.clock, end + kDay);
  // In the window, blaming gpu-b (twice in one job: two of its GPUs; counted once).
  f.job("11", "gpu-a,gpu-b", end - 3 * kDay - 3600 * kSec, end - 3 * kDay, "FAILED");
  f.verdict("11", {{"gpu-b", "0000:3b:00.0"}, {"gpu-b", "0000:5e:00.0"}});
  f.job("12", "gpu-b", end - 2 * kDay - 3600 * kSec, end - 2 * kDay, "NODE_FAIL");
  f.verdict("12", {{"gpu-b", ""}});
  f.job("13", "gpu-b,gpu-c", end - kDay - 3600 * kSec, end - kDay, "TIMEOUT");
  f.verdict("13", {{"gpu-b", ""}, {"gpu-c", ""}});
  // Not counted: ended before the window, after this job's end, this job itself, a success,
  // and a job whose first revision blamed gpu-b but whose latest one blames gpu-c.
  f.job("10", "gpu-b", end - 9 * kDay - 3600 * kSec, end - 9 * kDay, "FAILED");
  f.verdict("10", {{"gpu-b", ""}});
  f.job("15", "gpu-b", end + 1800 * kSec, end + 3600 * kSec, "FAILED");
  f.verdict("15", {{"gpu-b", ""}});
  f.job("14", "gpu-a,gpu-b", end - 3600 * kSec, end, "FAILED");
  f.verdict("14", {{"gpu-b", ""}});
  f.job("16", "gpu-b", end - 5 * kDay - 3600 * kSec, end - 5 * kDay, "COMPLETED");
  f.verdict("16", {{"gpu-b", ""}});
  f.job("17", "gpu-b,gpu-c", end - 4 * kDay - 3600 * kSec, end - 4 * kDay, "FAILED");
  f.verdict("17", {{"gpu-b", ""}});
  f.verdict("17", {{"gpu-c", ""}});

  auto r = f.store->recentFailures({"gpu-a", "gpu-b", "gpu-c"}, end - 7 * kDay, end, "14", "", 2);
  CHECK(r.count("gpu-a") == 0);
  REQUIRE(r.count("gpu-b") == 1);
  CHECK(r["gpu-b"].failures == 3);
  CHECK(r["gpu-b"].job_ids == std::vector<std::string>{"13", "12"});  // the newest two, newest first
  REQUIRE(r.count("gpu-c") == 1);
  CHECK(r["gpu-c"].failures == 2);
  CHECK(r["gpu-c"].job_ids == std::vector<std::string>{"13", "17"});
  // Only the asked nodes.
  r = f.store->recentFailures({"gpu-c"}, end - 7 * kDay, end, "14", "", 5);
  CHECK(r.size() == 1);
  CHECK(r.count("gpu-c") == 1);
}

TEST_CASE("store: jobs that inherited one lasting fault count it once in a node's record", "[store][facts][owner]") {
  Fixture f;
  const int64_t end = kT0 + 30 * kDay;
  setClock(f.clock, end + kDay);
  const int64_t lost = end - 3 * kDay - 1800 * kSec;  // gpu-b's GPU fell off the bus during job 21
  f.job("21", "gpu-b", end - 3 * kDay - 3600 * kSec, end - 3 * kDay, "FAILED");
  f.verdict("21", {{"gpu-b", "0000:3b:00.0"}}, lost);
  // Jobs 22 and 23 ran on the node before anyone reset the GPU: the same event, inherited.
  f.job("22", "gpu-b", end - 3 * kDay + 600 * kSec, end - 3 * kDay + 700 * kSec, "FAILED");
  f.verdict("22", {{"gpu-b", "0000:3b:00.0"}}, lost);
  f.job("23", "gpu-b", end - 3 * kDay + 900 * kSec, end - 3 * kDay + 1000 * kSec, "FAILED");
  f.verdict("23", {{"gpu-b", "0000:3b:00.0"}}, lost);
  // A second loss a day later: another event.
  f.job("24", "gpu-b", end - 2 * kDay - 3600 * kSec, end - 2 * kDay, "FAILED");
  f.verdict("24", {{"gpu-b", "0000:3b:00.0"}}, end - 2 * kDay - 60 * kSec);
  auto r = f.store->recentFailures({"gpu-b"}, end - 7 * kDay, end, "99", "", 5);
  REQUIRE(r.count("gpu-b") == 1);
  CHECK(r["gpu-b"].failures == 2);
  CHECK(r["gpu-b"].job_ids == std::vector<std::string>{"24", "23"});
}

TEST_CASE("verdicts: the job's nodes' addresses and GPU counts come from their latest inventories", "[verdicts][facts]") {
  Fixture f;
  // gpu-a and gpu-c both have a container bridge's address: it names neither.
  f.heartbeat("gpu-a", inventory({"10.0.0.1", "172.17.0.1"}, 8, "nvidia-smi: 1 unparsable line(s), first: x"));
  f.heartbeat("gpu-b", inventory({"10.0.0.2", "fd00::2"}, 8));
  f.heartbeat("gpu-c", inventory({"172.17.0.1"}, 7));
  f.job("40", "gpu-a,gpu-b,gpu-c", kT0, kT0 + 600 * kSec, "FAILED");
  auto c = f.engine->correlatorOptions(f.jobRow("40"));
  CHECK(c.node_facts["gpu-a"].addresses == std::vector<std::string>{"10.0.0.1"});
  CHECK_FALSE(c.node_facts["gpu-a"].gpu_count);  // its GPU list was not read fine
  CHECK(c.node_facts["gpu-b"].addresses == std::vector<std::string>{"10.0.0.2", "fd00::2"});
  CHECK(c.node_facts["gpu-b"].gpu_count == 8);
  CHECK(c.node_facts["gpu-c"].addresses.empty());
  CHECK(c.node_facts["gpu-c"].gpu_count == 7);
  // Facts configured for a node (nvswitch) are kept; the inventory adds to them.
  f.options.correlator.node_facts["gpu-b"].nvswitch = true;
  VerdictEngine configured(*f.store, f.clock, shippedRules(), f.options);
  c = configured.correlatorOptions(f.jobRow("40"));
  CHECK(c.node_facts["gpu-b"].nvswitch == true);
  CHECK(c.node_facts["gpu-b"].gpu_count == 8);
}

TEST_CASE("verdicts: an NCCL completion error naming a peer's address blames that peer, through its inventory",
          "[verdicts][facts]") {
  const int64_t end = kT0 + 600 * kSec;
  auto judge = [&](bool with_inventory) {
    Fixture f;
    f.heartbeat("gpu-a", inventory({"10.0.0.1"}, 8));
    f.heartbeat("gpu-c", inventory({"10.0.0.3"}, 8));
    f.heartbeat("gpu-b", with_inventory ? std::optional(inventory({"10.0.0.2", "fd00::2"}, 8)) : std::nullopt);
    f.job("50", "gpu-a,gpu-b,gpu-c", kT0, end, "RUNNING");
    f.ingest("gpu-a", 1, {ncclCompletionError("gpu-a", end - 20 * kSec, "10.0.0.2<1234>")});
    f.ingest("gpu-c", 1, {ncclCompletionError("gpu-c", end - 19 * kSec, "10.0.0.2<1234>")});
    setClock(f.clock, end + kSec);
    f.job("50", "", 0, end, "FAILED");
    auto v = f.engine->onJobEnded("50");
    REQUIRE(v);
    return *v;
  };
  auto v = judge(true);
  CHECK(nodesOf(v.diagnosis) == std::vector<std::string>{"gpu-b"});
  CHECK(v.diagnosis.sub_domain == common::SubDomain::kNetwork);
  // Without gpu-b's inventory the address is nobody's: gpu-b is not blamed.
  v = judge(false);
  const auto blamed = nodesOf(v.diagnosis);
  CHECK(std::find(blamed.begin(), blamed.end(), "gpu-b") == blamed.end());
}

namespace {

// Job 310 on gpu-a and gpu-b with only weak evidence on gpu-b (one kernel RDMA completion error:
// cascade, fallback root, no peer): the correlator can name gpu-b only with low confidence. With
// `history`, gpu-b's GPU failed two earlier jobs one and two days before (Xid 79, blamed on it)
// and a third ten days before, outside the 7-day window.
VerdictRow judgeWeakVerdict(bool history, bool gpu_a_agent = true) {
  const int64_t end = kT0 + 30 * kDay;
  Fixture f;
  if (history) {
    int seq = 0;
    for (auto [id, ago] : {std::pair{"301", 10 * kDay}, {"302", 2 * kDay}, {"303", kDay}}) {
      f.job(id, "gpu-b,gpu-x", end - ago - 3600 * kSec, end - ago - 60 * kSec, "RUNNING");
      f.ingest("gpu-b", ++seq, {xid79("gpu-b", end - ago - 120 * kSec)});
      setClock(f.clock, end - ago);
      f.job(id, "", 0, end - ago - 60 * kSec, "FAILED");
      auto v = f.engine->onJobEnded(id);
      REQUIRE(v);
      REQUIRE(nodesOf(v->diagnosis) == std::vector<std::string>{"gpu-b"});
    }
  }
  f.job("310", "gpu-a,gpu-b", end - 3600 * kSec, end, "RUNNING");
  f.ingest("gpu-b", 10, {kernelWcError("gpu-b", end - 600 * kSec)});
  setClock(f.clock, end + kSec);
  // Both nodes' agents answer: gpu-a's logs were read and hold nothing, so the evidence on gpu-b
  // alone localizes (docs/taxonomy.md, "Responsible nodes").
  f.heartbeat("gpu-b", std::nullopt);
  if (gpu_a_agent) f.heartbeat("gpu-a", std::nullopt);
  f.job("310", "", 0, end, "FAILED");
  auto c = f.engine->correlatorOptions(f.jobRow("310"));
  CHECK(c.node_history["gpu-a"].failures == 0);
  CHECK(c.node_history["gpu-b"].window_ns == 7 * kDay);
  if (history) {
    CHECK(c.node_history["gpu-b"].failures == 2);
    CHECK(c.node_history["gpu-b"].jobs == std::vector<std::string>{"303", "302"});
  } else {
    CHECK(c.node_history["gpu-b"].failures == 0);
    CHECK(c.node_history["gpu-b"].jobs.empty());
  }
  auto v = f.engine->onJobEnded("310");
  REQUIRE(v);
  if (!gpu_a_agent) return *v;
  REQUIRE(nodesOf(v->diagnosis) == std::vector<std::string>{"gpu-b"});
  return *v;
}

}  // namespace

TEST_CASE("verdicts: node history is each node's recent record, without one a weak verdict stays weak",
          "[verdicts][facts]") {
  auto weak = judgeWeakVerdict(false);
  CHECK(weak.diagnosis.responsible[0].confidence == Approx(0.4));
  CHECK(weak.diagnosis.explanation.find("repeat offender") == std::string::npos);
  judgeWeakVerdict(true);  // its node_history checks
}

TEST_CASE("verdicts: evidence on one node does not name it while another node of the job has no agent",
          "[verdicts][facts][localization]") {
  auto v = judgeWeakVerdict(false, false);
  CHECK(v.diagnosis.sub_domain != common::SubDomain::kNone);
  CHECK(nodesOf(v.diagnosis).empty());
  CHECK(v.diagnosis.explanation.find("gpu-a had no logs for the window") != std::string::npos);
}

// Needs the correlator's repeat-offender step (issue 12, the correlator rewrite in
// common/correlator*): a responsible node under 0.6 confidence whose node_history.failures >=
// repeat_offender_failures (2) gains 0.2 (at most 0.7), and the explanation gets a sentence
// naming it a repeat offender with its jobs. Fails against a correlator without that step.
TEST_CASE("verdicts: a node blamed in recent failed jobs is a repeat offender: a weak verdict on it gains confidence",
          "[verdicts][facts][repeat-offender]") {
  auto repeat = judgeWeakVerdict(true);
  CHECK(repeat.diagnosis.responsible[0].confidence > 0.4);
  CHECK(repeat.diagnosis.responsible[0].confidence <= 0.7);
  CHECK(repeat.diagnosis.explanation.find("repeat offender") != std::string::npos);
  CHECK(repeat.diagnosis.explanation.find("303") != std::string::npos);
}
