// Site relay, store level: what a site's store packs into its outbox (relayCollect) and what the
// central's store makes of it (ingestRelay) — the same verdict history under "SITE:JOBID", node
// history, symptom summaries with the summed counts; replays deduplicated, the outbox bound, and
// batches split under the verdict byte budget. Both stores are real SQLite files.
#include <catch2/catch.hpp>

#include "aggregator/query/query.h"
#include "aggregator/store/store.h"
#include "common/relay_wire.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

void failedJob(Store& store, const std::string& id, const std::string& nodes, int64_t start, int64_t end) {
  JobUpdate u;
  u.job_id = id;
  u.state = "FAILED";
  u.exit_code = "1:0";
  u.start_ns = start;
  u.end_ns = end;
  u.nodelist = nodes;
  u.source = "cli";
  std::string error;
  INFO(error);
  REQUIRE(store.recordJob(u, &error));
}

int verdict(Store& store, const std::string& id, const std::string& status, const std::string& node,
            common::SubDomain sd = common::SubDomain::kHardware, size_t padding = 0) {
  VerdictRow v;
  v.job_id = id;
  v.status = status;
  v.reason = status == "final" ? "reported" : "job_end";
  v.diagnosis.job_id = id;
  v.diagnosis.terminal_state = "fail";
  v.diagnosis.sub_domain = sd;
  v.diagnosis.responsible = {{node, "0000:3b:00.0", 0.9}};
  v.diagnosis.recommended_action = std::string(padding, 'x');
  v.missing_nodes = {"gpu-09"};
  std::string error;
  int rev = store.addVerdict(v, &error);
  INFO(error);
  REQUIRE(rev > 0);
  return rev;
}

// Ships every unacked relay batch from `site` into `central`, acking what was stored.
size_t ship(Store& site, Store& central, const std::string& authenticated = "edge1") {
  size_t shipped = 0;
  for (const auto& b : site.relayUnacked(1000, false, {})) {
    std::string reason;
    auto decoded = common::decodeRelayBatch(b.payload.data(), b.payload.size(), &reason);
    INFO(reason);
    REQUIRE(decoded);
    CHECK(decoded->sequence == b.sequence);
    auto r = central.ingestRelay(*decoded, authenticated);
    INFO(r.reason);
    REQUIRE(r.status != IngestResult::Status::kRejected);
    site.relayAck(b.sequence);
    ++shipped;
  }
  return shipped;
}

std::vector<std::string> historyJson(Store& store, const std::string& job) {
  std::vector<std::string> out;
  for (const auto& v : store.verdictHistory(job))
    out.push_back(std::to_string(v.revision) + " " + v.status + " " + v.reason + " " +
                  common::toJson(v.diagnosis).dump());
  return out;
}

// A site's store and a central's, real SQLite files in one temp dir, on one manual clock.
struct SiteAndCentral {
  TempDir dir;
  ManualClock clock{kT0};
  std::unique_ptr<Store> site = openStore(dir.file("site.db"), clock);
  std::unique_ptr<Store> central = openStore(dir.file("central.db"), clock);
};

}  // namespace

TEST_CASE("relay store: verdict history, node events and symptom summaries reach the central once", "[relay]") {
  SiteAndCentral pair;
  auto& [dir, clock, site, central] = pair;
  std::string error;

  // Before the relay is switched on: a verdict (sent by the first collect) and symptoms (not:
  // summaries start when the relay does).
  REQUIRE(site->ingestBatch(makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "xid.79", kT0)}), "agent-gpu-01").status ==
          IngestResult::Status::kStored);
  failedJob(*site, "7", "gpu-[01-02]", kT0 - 600 * kSec, kT0 + 10 * kSec);
  verdict(*site, "7", "provisional", "gpu-01");
  REQUIRE(site->setRelayCapture(true, &error));
  REQUIRE(site->setRelayCapture(true, &error));  // idempotent: no second seeding

  auto s1 = makeSymptom("gpu-01", "xid.79", kT0 + 1 * kSec, common::SubDomain::kHardware, common::Role::kRoot,
                        "0000:3b:00.0");
  auto s2 = s1;
  s2.first_ns = s2.last_ns = kT0 + 5 * kSec;
  s2.count = 3;
  auto s3 = makeSymptom("gpu-02", "nccl.remote_error", kT0 + 2 * kSec, common::SubDomain::kNetwork,
                        common::Role::kCascade);
  REQUIRE(site->ingestBatch(makeBatch("gpu-01", 2, {s1, s2}), "agent-gpu-01").status == IngestResult::Status::kStored);
  REQUIRE(site->ingestBatch(makeBatch("gpu-02", 1, {s3}), "agent-gpu-02").status == IngestResult::Status::kStored);
  verdict(*site, "7", "final", "gpu-01");

  RelayCollectOptions o;
  o.site_id = "edge1";
  o.ruleset_version = "rules-test";
  o.symptoms = true;
  auto r = site->relayCollect(o, &error);
  INFO(error);
  REQUIRE(r);
  CHECK(r->sequence == 1);
  CHECK(r->verdicts == 2);
  CHECK(r->symptoms == 2);  // (gpu-01, xid.79, dev) merged; (gpu-02, nccl.remote_error)
  CHECK(r->node_events >= 2);  // the verdicts blamed gpu-01 twice
  CHECK_FALSE(r->more);
  auto again = site->relayCollect(o, &error);
  REQUIRE(again);
  CHECK(again->sequence == 0);  // nothing new

  // Unacked batches survive a reopen of the site's store (the outbox is durable).
  site.reset();
  site = openStore(dir.file("site.db"), clock);
  REQUIRE(site->relayUnacked(10, true, {}).size() == 1);
  auto payload = site->relayUnacked(10, true, {}).front().payload;
  CHECK(ship(*site, *central) == 1);
  CHECK(site->relayUnacked(10, true, {}).empty());

  auto job = central->job("edge1:7");
  REQUIRE(job);
  CHECK(job->site == "edge1");
  CHECK(job->terminal_state == "fail");
  CHECK(job->info.nodes == std::vector<std::string>{"gpu-01", "gpu-02"});
  CHECK(historyJson(*central, "edge1:7") == historyJson(*site, "7"));
  CHECK(central->latestVerdict("edge1:7")->revision == 2);
  CHECK(central->latestVerdict("edge1:7")->missing_nodes == std::vector<std::string>{"gpu-09"});
  // The central never judges a relayed job itself.
  CHECK(central->jobsAwaitingVerdict().empty());
  CHECK(central->openVerdicts().empty());

  SymptomFilter f;
  f.limit = 100;
  auto summaries = central->symptoms(f);
  REQUIRE(summaries.size() == 2);
  std::map<std::string, uint32_t> counts;
  for (const auto& s : summaries) counts[s.symptom.node + " " + s.symptom.rule_id] += s.symptom.count;
  CHECK(counts == std::map<std::string, uint32_t>{{"gpu-01 xid.79", 4}, {"gpu-02 nccl.remote_error", 1}});
  for (const auto& s : summaries)
    if (s.symptom.node == "gpu-01") {
      CHECK(s.symptom.first_ns == kT0 + 1 * kSec);
      CHECK(s.symptom.last_ns == kT0 + 5 * kSec);
      CHECK(s.symptom.device == "0000:3b:00.0");
    }
  // At the central, a relayed symptom maps to the relayed job whose window holds it (its central
  // id), never to a central job of the same name on a node of the same name.
  failedJob(*central, "7", "gpu-[01-02]", kT0 - 600 * kSec, kT0 + 10 * kSec);
  QueryContext q{*central, kT0, 90 * kSec};
  for (const auto& j : querySymptoms(q, f)) {
    INFO(j.dump());
    CHECK(j["jobs"] == nlohmann::json::array({"edge1:7"}));
  }
  CHECK(central->jobsAt("gpu-01", kT0, kT0, 0, 0) == std::vector<std::string>{"7"});
  CHECK(central->jobsAt("gpu-01", kT0, kT0, 0, 0, "edge1") == std::vector<std::string>{"edge1:7"});
  auto events = central->nodeHistory("gpu-01", 0);
  CHECK(events.size() == site->nodeHistory("gpu-01", 0).size());
  for (const auto& e : events)
    if (!e.job_id.empty()) CHECK(e.job_id == "edge1:7");

  // A replayed batch is a duplicate and changes nothing; another site's key cannot send it.
  std::string reason;
  auto decoded = common::decodeRelayBatch(payload.data(), payload.size(), &reason);
  REQUIRE(decoded);
  CHECK(central->ingestRelay(*decoded, "edge1").status == IngestResult::Status::kDuplicate);
  CHECK(central->ingestRelay(*decoded, "edge2").status == IngestResult::Status::kRejected);
  CHECK(central->symptoms(f).size() == 2);
  CHECK(central->verdictHistory("edge1:7").size() == 2);

  // A later revision (late symptoms) follows; the central's latest moves with it.
  clock.advance(60 * kSec);
  verdict(*site, "7", "final", "gpu-02", common::SubDomain::kNetwork);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->sequence == 2);
  CHECK(ship(*site, *central) == 1);
  CHECK(historyJson(*central, "edge1:7") == historyJson(*site, "7"));
  CHECK(central->latestVerdict("edge1:7")->diagnosis.sub_domain == common::SubDomain::kNetwork);

  // Switching the relay off and on again re-seeds every revision; the central ignores the
  // revisions it has.
  REQUIRE(site->setRelayCapture(false, &error));
  REQUIRE(site->setRelayCapture(true, &error));
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->verdicts == 3);
  CHECK(ship(*site, *central) == 1);
  CHECK(historyJson(*central, "edge1:7") == historyJson(*site, "7"));
}

TEST_CASE("relay store: a revision that repeats the verdict before it goes as a reference, not a diagnosis",
          "[relay]") {
  SiteAndCentral pair;
  auto& [dir, clock, site, central] = pair;
  auto late_central = openStore(dir.file("late-central.db"), clock);
  std::string error;
  REQUIRE(site->setRelayCapture(true, &error));
  RelayCollectOptions o;
  o.site_id = "edge1";

  // Revision 1: a whole diagnosis (20 KB of it).
  failedJob(*site, "8", "gpu-[01-02]", kT0 - 600 * kSec, kT0);
  verdict(*site, "8", "provisional", "gpu-01", common::SubDomain::kHardware, 20'000);
  auto r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->confirmed == 0);
  CHECK(r->bytes > 20'000);
  auto first = site->relayUnacked(10, false, {});
  REQUIRE(first.size() == 1);
  CHECK(ship(*site, *central) == 1);

  // Revisions 2 and 3 (late symptoms, then final): the same terminal state, domain, cause and
  // nodes, other details changed. Each goes as a reference to the revision before it.
  clock.advance(60 * kSec);
  verdict(*site, "8", "provisional", "gpu-01", common::SubDomain::kHardware, 20'500);
  verdict(*site, "8", "final", "gpu-01", common::SubDomain::kHardware, 21'000);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->verdicts == 2);
  CHECK(r->confirmed == 2);
  CHECK(r->bytes < 2'000);
  auto batches = site->relayUnacked(10, false, {});
  REQUIRE(batches.size() == 1);
  std::string reason;
  auto decoded = common::decodeRelayBatch(batches[0].payload.data(), batches[0].payload.size(), &reason);
  REQUIRE(decoded);
  REQUIRE(decoded->verdicts.size() == 2);
  CHECK(decoded->verdicts[0].confirms == 1);
  CHECK(decoded->verdicts[0].diagnosis_json.empty());
  CHECK(decoded->verdicts[1].confirms == 2);
  // A central that never got revision 1 (the site's outbox dropped it) cannot store them: they
  // are counted, not stored, and the job is still known.
  auto late = late_central->ingestRelay(*decoded, "edge1");
  CHECK(late.status == IngestResult::Status::kStored);
  CHECK(late.unresolved_confirms == 2);
  CHECK(late_central->verdictHistory("edge1:8").empty());
  CHECK(late_central->job("edge1:8"));
  CHECK(ship(*site, *central) == 1);

  // At the central: every revision, each with its own status and reason, the diagnosis of the
  // revision it repeats.
  auto history = central->verdictHistory("edge1:8");
  REQUIRE(history.size() == 3);
  const auto site_first = common::toJson(site->verdictHistory("8")[0].diagnosis);
  for (const auto& v : history) CHECK(common::toJson(v.diagnosis) == site_first);
  CHECK(history[1].status == "provisional");
  CHECK(history[2].status == "final");
  CHECK(central->latestVerdict("edge1:8")->revision == 3);

  // A changed verdict goes whole.
  verdict(*site, "8", "final", "gpu-02", common::SubDomain::kNetwork);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->confirmed == 0);
  CHECK(ship(*site, *central) == 1);
  CHECK(central->latestVerdict("edge1:8")->diagnosis.sub_domain == common::SubDomain::kNetwork);
  CHECK(common::toJson(central->latestVerdict("edge1:8")->diagnosis) ==
        common::toJson(site->latestVerdict("8")->diagnosis));

  // --relay-full-revisions (a central older than references): a repeat goes whole.
  o.revision_refs = false;
  verdict(*site, "8", "final", "gpu-02", common::SubDomain::kNetwork, 5'000);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->confirmed == 0);
  CHECK(r->bytes > 5'000);
  CHECK(ship(*site, *central) == 1);
  CHECK(common::toJson(central->latestVerdict("edge1:8")->diagnosis) ==
        common::toJson(site->latestVerdict("8")->diagnosis));
}

TEST_CASE("relay store: big diagnoses split across batches, the outbox bound drops least severe first",
          "[relay]") {
  SiteAndCentral pair;
  auto& [dir, clock, site, central] = pair;
  std::string error;
  REQUIRE(site->setRelayCapture(true, &error));
  for (int i = 0; i < 5; ++i) {
    failedJob(*site, std::to_string(100 + i), "gpu-01", kT0, kT0 + kSec);
    verdict(*site, std::to_string(100 + i), "provisional", "gpu-01", common::SubDomain::kHardware, 40'000);
  }
  RelayCollectOptions o;
  o.site_id = "edge1";
  o.max_verdict_bytes = 100'000;  // two 40 KB diagnoses per batch
  size_t verdicts = 0, batches = 0;
  while (true) {
    auto r = site->relayCollect(o, &error);
    REQUIRE(r);
    if (r->sequence == 0) break;
    CHECK(r->verdicts <= 2);
    verdicts += r->verdicts;
    ++batches;
    if (!r->more && r->verdicts < 2) break;
  }
  CHECK(verdicts == 5);
  CHECK(batches == 3);
  CHECK(ship(*site, *central) == 3);
  for (int i = 0; i < 5; ++i) CHECK(central->latestVerdict("edge1:" + std::to_string(100 + i)));

  // The bound: with the link down, node-event-only batches (warning) go before verdict batches
  // (critical), oldest first.
  o.max_verdict_bytes = 4u << 20;
  o.max_outbox_bytes = 45'000;
  for (int i = 0; i < 4; ++i) {
    site->addNodeEvent({"gpu-0" + std::to_string(i + 2), kT0 + i * kSec, "source", std::string(2'000, 'e'), ""});
    REQUIRE(site->relayCollect(o, &error));
  }
  failedJob(*site, "200", "gpu-01", kT0, kT0 + kSec);
  verdict(*site, "200", "provisional", "gpu-01", common::SubDomain::kHardware, 40'000);
  const auto before = site->relayOutboxStats();
  auto r = site->relayCollect(o, &error);
  REQUIRE(r);
  INFO("outbox before: " << before.batches << " batches, " << before.bytes << " bytes, new " << r->bytes);
  CHECK(r->dropped_batches >= 1);
  auto left = site->relayUnacked(100, false, {});
  REQUIRE_FALSE(left.empty());
  CHECK(left.back().sequence == r->sequence);  // the newest, critical batch stays
  auto stats = site->relayOutboxStats();
  CHECK(stats.dropped_batches == r->dropped_batches);
  CHECK(stats.bytes <= 45'000);
  CHECK(ship(*site, *central) == left.size());
  CHECK(central->latestVerdict("edge1:200"));
}

TEST_CASE("relay store: the site's live nodes go with every batch and alone every 30 s: live at the central, "
          "the relay too",
          "[relay]") {
  SiteAndCentral pair;
  auto& [dir, clock, site, central] = pair;
  std::string error;
  REQUIRE(site->setRelayCapture(true, &error));
  for (const char* host : {"gpu-01", "gpu-02"}) {
    HeartbeatInfo hb;
    hb.agent_id = std::string("agent-") + host;
    hb.hostname = host;
    hb.created_ns = clock.nowNs();
    std::string reason;
    REQUIRE(site->recordHeartbeat(hb, hb.agent_id, &reason));
  }
  RelayCollectOptions o;
  o.site_id = "edge1";
  auto r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->sequence == 1);  // nothing else new: a keepalive with the live nodes
  REQUIRE(ship(*site, *central) == 1);
  auto live = [&](const std::string& host) {
    auto n = central->node(host);
    return n && clock.nowNs() - n->last_heartbeat_ns <= 90 * kSec;
  };
  CHECK(live("gpu-01"));
  CHECK(live("gpu-02"));
  CHECK(central->node("gpu-01")->agent_id == "relay:edge1");
  // Nothing new and under 30 s: no batch. gpu-02's agent goes silent at the site.
  clock.advance(20 * kSec);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->sequence == 0);
  clock.advance(80 * kSec);  // gpu-02's heartbeat is now 100 s old at the site
  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-01";
  hb.hostname = "gpu-01";
  hb.created_ns = clock.nowNs();
  std::string reason;
  REQUIRE(site->recordHeartbeat(hb, hb.agent_id, &reason));
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->sequence == 2);
  REQUIRE(ship(*site, *central) == 1);
  CHECK(live("gpu-01"));
  CHECK_FALSE(live("gpu-02"));
  bool relay_live = false;
  for (const auto& a : central->agents())
    if (a.agent_id == "relay:edge1") relay_live = clock.nowNs() - a.last_heartbeat_ns <= 90 * kSec;
  CHECK(relay_live);
  // While the link is down the outbox is not filled with keepalives.
  clock.advance(40 * kSec);
  REQUIRE(site->recordHeartbeat(hb, hb.agent_id, &reason));
  failedJob(*site, "8", "gpu-01", kT0, clock.nowNs());
  verdict(*site, "8", "provisional", "gpu-01");
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->verdicts == 1);
  clock.advance(40 * kSec);
  r = site->relayCollect(o, &error);
  REQUIRE(r);
  CHECK(r->sequence == 0);  // the verdict's batch still waits: no keepalive behind it
}
