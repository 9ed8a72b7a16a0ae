// The Store's site-relay half (store.h, "site relay"): the sending side's queue and outbox, and
// the receiving side's ingest of a site's RelayBatch. Same rules as store.cpp: one transaction per
// call, bound parameters only, errors returned.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "aggregator/store/db.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/relay_store.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/symptom_codec.h"
#include "common/hostlist.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

namespace {

constexpr const char* kCaptureTrigger =
    "CREATE TRIGGER IF NOT EXISTS relay_capture AFTER INSERT ON verdicts BEGIN "
    "INSERT INTO relay_pending(job_id, revision) VALUES (NEW.job_id, NEW.revision); END";
// The same in PostgreSQL: a trigger runs a function.
constexpr const char* kCaptureTriggerPg =
    "CREATE OR REPLACE FUNCTION faultline_relay_capture() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO relay_pending(job_id, revision) VALUES (NEW.job_id, NEW.revision); RETURN NEW; END $$; "
    "DROP TRIGGER IF EXISTS relay_capture ON verdicts; "
    "CREATE TRIGGER relay_capture AFTER INSERT ON verdicts FOR EACH ROW EXECUTE FUNCTION faultline_relay_capture()";

// What a revision says, for deciding whether the next one only repeats it: terminal state,
// sub_domain, cause rule and the responsible nodes ("" when the diagnosis does not read).
std::string verdictKey(const std::string& diagnosis_json) {
  json d = json::parse(diagnosis_json, nullptr, false);
  if (!d.is_object()) return "";
  std::vector<std::string> nodes;
  if (auto it = d.find("responsible_nodes"); it != d.end() && it->is_array())
    for (const auto& r : *it)
      if (r.is_object() && r.contains("node") && r["node"].is_string()) nodes.push_back(r["node"].get<std::string>());
  std::sort(nodes.begin(), nodes.end());
  std::string cause;
  if (auto it = d.find("cause"); it != d.end() && it->is_object() && it->contains("rule_id") && (*it)["rule_id"].is_string())
    cause = (*it)["rule_id"].get<std::string>();
  return json{d.value("terminal_state", ""), d.value("sub_domain", ""), cause, nodes}.dump();
}

// Per (node, rule, device): one summary with the summed count, the whole time span and the
// first evidence line — what the central's fleet view needs, a fraction of the bytes.
std::vector<common::Symptom> summarise(std::vector<common::Symptom> in) {
  std::map<std::tuple<std::string, std::string, std::string>, common::Symptom> groups;
  for (auto& s : in) {
    auto key = std::make_tuple(s.node, s.rule_id, s.device);
    auto it = groups.find(key);
    if (it == groups.end()) {
      if (s.evidence.size() > 1) s.evidence.resize(1);
      groups.emplace(std::move(key), std::move(s));
      continue;
    }
    auto& g = it->second;
    g.count = static_cast<uint32_t>(std::min<uint64_t>(uint64_t(g.count) + s.count, UINT32_MAX));
    if (s.time_known && g.time_known) {
      g.first_ns = std::min(g.first_ns, s.first_ns);
      g.last_ns = std::max(g.last_ns, s.last_ns);
    } else if (s.time_known) {
      g.first_ns = s.first_ns;
      g.last_ns = s.last_ns;
      g.time_known = true;
    }
    g.severity = std::max(g.severity, s.severity);
  }
  std::vector<common::Symptom> out;
  out.reserve(groups.size());
  for (auto& [k, s] : groups) out.push_back(std::move(s));
  return out;
}

// The relay's watermarks and counters in the meta table.
struct RelayMeta {
  sql::Db& db;
  int64_t get(const char* key, int64_t fallback) {
    Stmt m(db.get(), "SELECT value FROM meta WHERE key = ?");
    m.bind(1, key);
    return m.step() == sql::kRow ? m.i64(0) : fallback;
  }
  bool set(const char* key, int64_t value) {
    Stmt m(db.get(), "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2");
    m.bind(1, key).bind(2, value);
    return m.step() == sql::kDone;
  }
};

// What one collection packs: the batch, its result so far and its highest severity.
struct RelayPack {
  common::RelayBatchData b;
  RelayCollectResult r;
  common::Severity max_severity = common::Severity::kInfo;
};

// The queued verdict revisions, a revision that repeats the one before as a reference to it;
// returns the last queue entry taken (0: none).
int64_t packVerdicts(sql::Db& db, const RelayCollectOptions& o, RelayPack& pack) {
  auto& b = pack.b;
  auto& r = pack.r;
  auto& max_severity = pack.max_severity;
  int64_t last_pending = 0;
  Stmt s(db.get(),
         "SELECT p.id, v.revision, v.created_ns, v.status, v.reason, v.missing_nodes, v.diagnosis, v.symptoms, "
         "j.job_id, j.state, j.exit_code, j.start_ns, j.end_ns, j.nodelist, j.time_limit_sec "
         "FROM relay_pending p JOIN verdicts v ON v.job_id = p.job_id AND v.revision = p.revision "
         "JOIN jobs j ON j.job_id = p.job_id ORDER BY p.id LIMIT ?");
  s.bind(1, int64_t(o.max_items));
  // The job's revision before this one and what it said (the last seen in this batch, or read).
  std::map<std::string, std::pair<int64_t, std::string>> previous;
  Stmt before(db.get(),
              "SELECT revision, diagnosis FROM verdicts WHERE job_id = ? AND revision < ? "
              "ORDER BY revision DESC LIMIT 1");
  size_t verdict_bytes = 0;
  while (s.step() == sql::kRow) {
    const std::string job_id = s.text(8);
    const int64_t revision = s.i64(1);
    std::string key = verdictKey(s.text(6));
    uint32_t confirms = 0;
    auto prev = previous.find(job_id);
    if (prev == previous.end() || prev->second.first >= revision) {
      before.reset();
      before.bind(1, job_id).bind(2, revision);
      if (before.step() == sql::kRow)
        prev = previous.insert_or_assign(job_id, std::pair{before.i64(0), verdictKey(before.text(1))}).first;
      else
        prev = previous.end();
    }
    if (o.revision_refs && prev != previous.end() && !key.empty() && prev->second.second == key)
      confirms = static_cast<uint32_t>(prev->second.first);
    const size_t bytes = confirms ? 0 : s.text(6).size();
    // A batch stays well under the central's message limit: big diagnoses (a 1,000-node job)
    // go a few per batch.
    if (!b.verdicts.empty() && verdict_bytes + bytes > o.max_verdict_bytes) {
      r.more = true;
      break;
    }
    verdict_bytes += bytes;
    last_pending = s.i64(0);
    previous.insert_or_assign(job_id, std::pair{revision, key});
    common::RelayVerdictData v;
    v.confirms = confirms;
    if (confirms) ++r.confirmed;
    v.revision = static_cast<uint32_t>(s.i64(1));
    v.created_ns = s.i64(2);
    v.status = s.text(3);
    v.reason = s.text(4);
    json missing = json::parse(s.text(5), nullptr, false);
    if (missing.is_array())
      for (const auto& m : missing)
        if (m.is_string()) v.missing_nodes.push_back(m.get<std::string>());
    // A revision that repeats the one before goes as a reference to it, not as a diagnosis.
    if (!confirms) v.diagnosis_json = s.text(6);
    v.symptoms = static_cast<uint32_t>(s.i64(7));
    v.job_id = s.text(8);
    v.state = s.text(9);
    v.exit_code = s.text(10);
    v.start_ns = s.i64(11);
    v.end_ns = s.i64(12);
    v.nodelist = s.text(13);
    v.time_limit_sec = s.i64(14);
    b.verdicts.push_back(std::move(v));
    max_severity = common::Severity::kCritical;
  }
  // Queue entries of revisions pruned meanwhile (no join partner) are skipped, not repeated.
  if (b.verdicts.size() == o.max_items) r.more = true;
  if (!r.more) {
    Stmt all(db.get(), "SELECT COALESCE(MAX(id), 0) FROM relay_pending");
    if (all.step() == sql::kRow) last_pending = all.i64(0);
  }
  return last_pending;
}

// The node events after `mark`; returns the new mark.
int64_t packNodeEvents(sql::Db& db, const RelayCollectOptions& o, RelayPack& pack, int64_t event_mark) {
  Stmt s(db.get(),
         "SELECT id, node, time_ns, kind, detail, job_id FROM node_events WHERE id > ? ORDER BY id LIMIT ?");
  s.bind(1, event_mark).bind(2, int64_t(o.max_items));
  while (s.step() == sql::kRow) {
    event_mark = s.i64(0);
    pack.b.node_events.push_back({s.text(1), s.i64(2), s.text(3), s.text(4), s.text(5)});
    pack.max_severity = std::max(pack.max_severity, common::Severity::kWarning);
  }
  if (pack.b.node_events.size() == o.max_items) pack.r.more = true;
  return event_mark;
}

// Per-node summaries of the symptoms after the relay's mark (when asked), else the mark moved to
// the newest; false when the first mark cannot be stored.
bool packSymptoms(sql::Db& db, PayloadDictionaries& dicts, const RelayCollectOptions& o, RelayMeta& meta,
                  RelayPack& pack, int64_t* mark, std::string* error) {
  auto& b = pack.b;
  auto& r = pack.r;
  auto& max_severity = pack.max_severity;
  int64_t symptom_mark = meta.get("relay.symptom_id", -1);
  if (symptom_mark < 0) {
    // Summaries start with what arrives after the relay was first switched on.
    Stmt m(db.get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
    symptom_mark = m.step() == sql::kRow ? m.i64(0) : 0;
    if (!meta.set("relay.symptom_id", symptom_mark)) {
      *error = "store: " + db.errmsg();
      return false;
    }
  }
  if (o.symptoms) {
    Stmt s(db.get(), fmt::format("SELECT id, {} FROM symptoms WHERE id > ? ORDER BY id LIMIT ?", kSymptomRowColumns));
    s.bind(1, symptom_mark).bind(2, int64_t(o.max_items * 20));
    std::vector<common::Symptom> raw;
    while (s.step() == sql::kRow) {
      symptom_mark = s.i64(0);
      const std::string_view payload = s.view(12);
      if (!payload.empty() && (payload[0] == kCompactPayloadTag || payload[0] == kPackedPayloadTag)) {
        raw.push_back(symptomRowAt(s, 1, db, dicts));
        continue;
      }
      json j = json::parse(payload, nullptr, false);  // a row written before migration 9
      if (j.is_object()) raw.push_back(symptomFromJson(j));
    }
    if (raw.size() == o.max_items * 20) r.more = true;
    b.symptoms = summarise(std::move(raw));
    for (const auto& sy : b.symptoms) max_severity = std::max(max_severity, std::min(sy.severity, common::Severity::kError));
  } else {
    Stmt m(db.get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
    if (m.step() == sql::kRow) symptom_mark = m.i64(0);
  }
  *mark = symptom_mark;
  return true;
}

// The batch into the outbox under the next sequence number, then the outbox's bound: whole
// batches go, least severe first, oldest first within a severity. false: a write failed.
bool writeOutbox(sql::Db& db, const RelayCollectOptions& o, RelayMeta& meta, RelayPack& pack, int64_t now) {
  auto& b = pack.b;
  auto& r = pack.r;
  const auto max_severity = pack.max_severity;
  b.sequence = static_cast<uint64_t>(meta.get("relay.next_seq", 1));
  std::string payload = common::encodeRelayBatch(b);
  Stmt ins(db.get(), "INSERT INTO relay_outbox(seq, created_ns, max_severity, items, payload) VALUES(?,?,?,?,?)");
  ins.bind(1, b.sequence).bind(2, now).bind(3, int64_t(max_severity)).bind(4, int64_t(b.items()));
  ins.bindBlob(5, payload);
  if (ins.step() != sql::kDone || !meta.set("relay.next_seq", int64_t(b.sequence + 1))) return false;
  r.sequence = b.sequence;
  r.verdicts = b.verdicts.size();
  r.node_events = b.node_events.size();
  r.symptoms = b.symptoms.size();
  r.bytes = payload.size();
  // The bound: whole batches go, least severe first, oldest first within a severity.
  Stmt total(db.get(), "SELECT COALESCE(SUM(length(payload)), 0) FROM relay_outbox");
  int64_t bytes = total.step() == sql::kRow ? total.i64(0) : 0;
  if (bytes > int64_t(o.max_outbox_bytes)) {
    Stmt victims(db.get(), "SELECT seq, items, length(payload) FROM relay_outbox ORDER BY max_severity, seq");
    std::vector<std::pair<int64_t, int64_t>> drop;
    while (bytes > int64_t(o.max_outbox_bytes) && victims.step() == sql::kRow) {
      drop.push_back({victims.i64(0), victims.i64(1)});
      bytes -= victims.i64(2);
    }
    int64_t dropped_items = 0;
    for (auto [seq, items] : drop) {
      Stmt d(db.get(), "DELETE FROM relay_outbox WHERE seq = ?");
      d.bind(1, seq).step();
      dropped_items += items;
    }
    r.dropped_batches = drop.size();
    if (!meta.set("relay.dropped_batches", meta.get("relay.dropped_batches", 0) + int64_t(drop.size())) ||
        !meta.set("relay.dropped_items", meta.get("relay.dropped_items", 0) + dropped_items))
      return false;
  }
  return true;
}

// One relayed verdict revision under the central id `id`: the job row and its nodes, the
// revision (a reference to an earlier one takes that one's diagnosis; without any it is counted in
// *unresolved and not stored), the job's latest flag. false: a write failed.
bool storeRelayedVerdict(sql::Db& db, const std::string& site, const std::string& id,
                         const common::RelayVerdictData& v, const common::Diagnosis& diagnosis, int64_t now,
                         size_t* unresolved) {
  std::string terminal = isActiveJobState(v.state) ? "" : common::terminalStateOf(v.state);
  Stmt job(db.get(),
           "INSERT INTO jobs(job_id, state, terminal_state, exit_code, start_ns, end_ns, nodelist, time_limit_sec, "
           "source, updated_ns, end_recorded_ns, site) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,'relay',?9,?9,?10) "
           "ON CONFLICT(job_id) DO UPDATE SET state=?2, terminal_state=?3, exit_code=?4, start_ns=?5, end_ns=?6, "
           "nodelist=?7, time_limit_sec=?8, source='relay', updated_ns=?9, site=?10");
  job.bind(1, id).bind(2, v.state).bind(3, terminal).bind(4, v.exit_code).bind(5, v.start_ns).bind(6, v.end_ns);
  job.bind(7, v.nodelist).bind(8, v.time_limit_sec).bind(9, now).bind(10, site);
  if (job.step() != sql::kDone) return false;
  if (auto hosts = common::expandHostlist(v.nodelist, nullptr, 100000)) {
    Stmt del(db.get(), "DELETE FROM job_nodes WHERE job_id = ?");
    del.bind(1, id).step();
    Stmt ins(db.get(), "INSERT INTO job_nodes(node, job_id, position) VALUES(?,?,?) ON CONFLICT DO NOTHING");
    for (size_t k = 0; k < hosts->size(); ++k) {
      ins.reset();
      ins.bind(1, (*hosts)[k]).bind(2, id).bind(3, int64_t(k)).step();
    }
  }
  // A revision that repeats an earlier one takes that revision's diagnosis as stored here (or,
  // if the site's outbox dropped it, the nearest earlier one); without any it cannot be stored.
  std::string diagnosis_json = v.diagnosis_json;
  std::string sub_domain(common::subDomainName(diagnosis.sub_domain));
  if (v.confirms) {
    Stmt base(db.get(),
              "SELECT diagnosis, sub_domain FROM verdicts WHERE job_id = ? AND revision <= ? "
              "ORDER BY revision DESC LIMIT 1");
    base.bind(1, id).bind(2, int64_t(v.confirms));
    if (base.step() != sql::kRow) {
      ++*unresolved;
      return true;
    }
    diagnosis_json = base.text(0);
    sub_domain = base.text(1);
  }
  // The site's revision number is kept; a revision already here (a re-seeded queue) is ignored.
  Stmt ins(db.get(),
           "INSERT INTO verdicts(job_id, revision, created_ns, status, reason, sub_domain, max_symptom_id, "
           "symptoms, missing_nodes, diagnosis, latest) VALUES(?,?,?,?,?,?,0,?,?,?,0) ON CONFLICT DO NOTHING");
  ins.bind(1, id).bind(2, int64_t(v.revision)).bind(3, v.created_ns).bind(4, v.status).bind(5, v.reason);
  ins.bind(6, sub_domain).bind(7, int64_t(v.symptoms));
  ins.bind(8, json(v.missing_nodes).dump()).bind(9, diagnosis_json);
  if (ins.step() != sql::kDone) return false;
  Stmt latest(db.get(),
              "UPDATE verdicts SET latest = CASE WHEN revision = (SELECT MAX(revision) FROM verdicts WHERE job_id = ?1) "
              "THEN 1 ELSE 0 END "
              "WHERE job_id = ?1");
  latest.bind(1, id);
  if (latest.step() != sql::kDone) return false;
  return true;
}

// The site's per-node symptom summaries as symptoms of sender `sender`, and the nodes' counts;
// *last_id the last row's id. false: a write failed.
bool storeRelayedSymptoms(sql::Db& db, const common::RelayBatchData& b, const std::string& sender, int64_t now,
                          int64_t* last_id, const std::function<void(int64_t)>& written) {
  Stmt ins(db.get(),
           "INSERT INTO symptoms(agent_id, boot_id, sequence, node, rule_id, sub_domain, role, severity, device, "
           "first_ns, last_ns, time_known, count, received_ns, payload) VALUES(?,'',?,?,?,?,?,?,?,?,?,?,?,?,?) "
           "RETURNING id");
  std::map<std::string, int64_t> per_node;
  for (const auto& s : b.symptoms) {
    ins.reset();
    ins.bind(1, sender).bind(2, b.sequence).bind(3, s.node).bind(4, s.rule_id);
    ins.bind(5, common::subDomainName(s.sub_domain)).bind(6, common::roleName(s.role));
    ins.bind(7, common::severityName(s.severity)).bind(8, s.device).bind(9, s.first_ns).bind(10, s.last_ns);
    ins.bind(11, int64_t(s.time_known)).bind(12, int64_t(s.count)).bind(13, now);
    const std::string payload = encodeSymptomPayload(s, "");  // the row's boot_id is ''
    bindPayloadRef(ins, 14, payload, db.postgres());
    if (ins.step() != sql::kRow) return false;
    *last_id = ins.i64(0);
    written(*last_id);
    ins.reset();  // RETURNING: the statement is done (SQLite cannot commit under an open one)
    ++per_node[s.node];
  }
  for (const auto& [node, n] : per_node) {
    Stmt up(db.get(),
            "INSERT INTO nodes(hostname, agent_id, first_seen_ns, last_seen_ns, symptoms) VALUES(?1,?2,?3,?3,?4) "
            "ON CONFLICT(hostname) DO UPDATE SET last_seen_ns=?3, symptoms=nodes.symptoms+?4");
    up.bind(1, node).bind(2, sender).bind(3, now).bind(4, n);
    if (up.step() != sql::kDone) return false;
  }
  return true;
}

// The site's live nodes are live here as of the batch (a batch resent after an outage says
// nothing newer than when it was packed); the relay shows in `faultline agents` like an agent:
// last batch (its heartbeat: a site sends one at least every live_every_ns), versions, totals.
bool recordRelayLiveness(sql::Db& db, const common::RelayBatchData& b, const std::string& sender, int64_t now) {
  for (const auto& node : b.live_nodes) {
    Stmt up(db.get(),
            "INSERT INTO nodes(hostname, agent_id, first_seen_ns, last_seen_ns, last_heartbeat_ns) "
            "VALUES(?1,?2,?3,?3,?4) ON CONFLICT(hostname) DO UPDATE SET last_seen_ns=?3, last_heartbeat_ns="
            "CASE WHEN nodes.last_heartbeat_ns > ?4 THEN nodes.last_heartbeat_ns ELSE ?4 END");
    up.bind(1, node).bind(2, sender).bind(3, now).bind(4, std::min(b.created_ns, now));
    if (up.step() != sql::kDone) return false;
  }
  Stmt a(db.get(),
         "INSERT INTO agents(agent_id, hostname, agent_version, ruleset_version, first_seen_ns, last_seen_ns, "
         "last_batch_ns, last_heartbeat_ns, batches, symptoms) VALUES(?1,?1,?2,?3,?4,?4,?4,?4,1,?5) "
         "ON CONFLICT(agent_id) DO UPDATE SET agent_version=?2, ruleset_version=?3, last_seen_ns=?4, "
         "last_batch_ns=?4, last_heartbeat_ns=?4, batches=agents.batches+1, symptoms=agents.symptoms+?5");
  a.bind(1, sender).bind(2, b.aggregator_version).bind(3, b.ruleset_version).bind(4, now);
  a.bind(5, int64_t(b.symptoms.size()));
  if (a.step() != sql::kDone) return false;
  return true;
}

}  // namespace

bool RelayStore::setRelayCapture(bool on, std::string* error) {
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return false;
  }
  Stmt seeded(db_->get(), "SELECT value FROM meta WHERE key = 'relay.seeded'");
  bool was_seeded = seeded.step() == sql::kRow && seeded.i64(0) != 0;
  if (on) {
    if (!db_->exec(db_->postgres() ? kCaptureTriggerPg : kCaptureTrigger, error)) return false;
    if (!was_seeded) {
      // First time on: every revision already stored goes up too (the central ignores a
      // revision it already has).
      // Symptom summaries start with what arrives from now on (node events and verdicts go
      // with their history).
      if (!db_->exec("INSERT INTO relay_pending(job_id, revision) SELECT job_id, revision FROM verdicts "
                     "ORDER BY created_ns, job_id, revision",
                     error) ||
          !db_->exec("INSERT INTO meta(key, value) SELECT 'relay.symptom_id', COALESCE(MAX(id), 0) "
                     "FROM symptoms WHERE true ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                     error) ||
          !db_->exec("INSERT INTO meta(key, value) VALUES('relay.seeded', 1) "
                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                     error))
        return false;
    }
  } else {
    if (!db_->exec(db_->postgres() ? "DROP TRIGGER IF EXISTS relay_capture ON verdicts"
                                   : "DROP TRIGGER IF EXISTS relay_capture",
                   error) ||
        !db_->exec("DELETE FROM relay_pending", error) ||
        !db_->exec("INSERT INTO meta(key, value) VALUES('relay.seeded', 0) "
                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                   error))
      return false;
  }
  return tx.commit(error);
}

std::optional<RelayCollectResult> RelayStore::relayCollect(const RelayCollectOptions& o, std::string* error) {
  const int64_t now = clock_.nowNs();
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  RelayMeta meta{*db_};
  RelayPack pack;
  common::RelayBatchData& b = pack.b;
  b.site_id = o.site_id;
  b.created_ns = now;
  b.aggregator_version = FAULTLINE_VERSION;
  b.ruleset_version = o.ruleset_version;
  const int64_t last_pending = packVerdicts(*db_, o, pack);
  const int64_t event_mark = packNodeEvents(*db_, o, pack, meta.get("relay.event_id", 0));
  int64_t symptom_mark = 0;
  if (!packSymptoms(*db_, core_.dictionaries, o, meta, pack, &symptom_mark, error)) return std::nullopt;
  auto fail = [&]() -> std::optional<RelayCollectResult> {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  };
  if (last_pending > 0) {
    Stmt d(db_->get(), "DELETE FROM relay_pending WHERE id <= ?");
    d.bind(1, last_pending);
    if (d.step() != sql::kDone) return fail();
  }
  if (!meta.set("relay.event_id", event_mark) || !meta.set("relay.symptom_id", symptom_mark)) return fail();
  // The site's live nodes go with every batch, and alone every live_every_ns — but not into an
  // outbox that still holds batches (the link is down or slow: a pile of stale keepalives would
  // say nothing when it drains).
  bool keepalive = o.live_every_ns > 0 && now - meta.get("relay.live_sent_ns", 0) >= o.live_every_ns;
  if (keepalive && b.items() == 0) {
    Stmt queued(db_->get(), "SELECT COUNT(*) FROM relay_outbox");
    keepalive = queued.step() == sql::kRow && queued.i64(0) == 0;
  }
  if (b.items() == 0 && !keepalive) return tx.commit(error) ? std::optional(pack.r) : std::nullopt;
  Stmt live(db_->get(),
            "SELECT hostname FROM nodes WHERE last_heartbeat_ns >= ? AND agent_id NOT LIKE 'relay:%' "
            "ORDER BY hostname");
  live.bind(1, now - o.agent_timeout_ns);
  while (live.step() == sql::kRow) b.live_nodes.push_back(live.text(0));
  if (!meta.set("relay.live_sent_ns", now) || !writeOutbox(*db_, o, meta, pack, now)) return fail();
  if (!tx.commit(error)) return std::nullopt;
  return pack.r;
}

std::vector<RelayOutboxBatch> RelayStore::relayUnacked(size_t limit, bool by_severity, const std::vector<uint64_t>& exclude) {
  Lock lock(*this);
  Stmt s(db_->get(), by_severity ? "SELECT seq, max_severity, items, payload FROM relay_outbox "
                                   "ORDER BY max_severity DESC, seq ASC"
                                 : "SELECT seq, max_severity, items, payload FROM relay_outbox ORDER BY seq ASC");
  std::vector<RelayOutboxBatch> out;
  while (out.size() < limit && s.step() == sql::kRow) {
    auto seq = static_cast<uint64_t>(s.i64(0));
    if (std::find(exclude.begin(), exclude.end(), seq) != exclude.end()) continue;
    out.push_back({seq, static_cast<int>(s.i64(1)), static_cast<uint32_t>(s.i64(2)), s.text(3)});
  }
  return out;
}

bool RelayStore::relayAck(uint64_t sequence) {
  Lock lock(*this);
  Stmt d(db_->get(), "DELETE FROM relay_outbox WHERE seq = ?");
  d.bind(1, sequence);
  return d.step() == sql::kDone;
}

RelayOutboxStats RelayStore::relayOutboxStats() {
  Lock lock(*this);
  RelayOutboxStats st;
  Stmt s(db_->get(), "SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM relay_outbox");
  if (s.step() == sql::kRow) {
    st.batches = static_cast<uint64_t>(s.i64(0));
    st.bytes = static_cast<uint64_t>(s.i64(1));
  }
  Stmt m(db_->get(), "SELECT key, value FROM meta WHERE key LIKE 'relay.%'");
  while (m.step() == sql::kRow) {
    std::string k = m.text(0);
    auto v = static_cast<uint64_t>(m.i64(1));
    if (k == "relay.dropped_batches") st.dropped_batches = v;
    else if (k == "relay.dropped_items") st.dropped_items = v;
    else if (k == "relay.next_seq") st.next_sequence = v;
  }
  return st;
}

IngestResult RelayStore::ingestRelay(const common::RelayBatchData& b, std::string_view authenticated_site) {
  IngestResult r;
  auto reject = [&](std::string reason) {
    r.status = IngestResult::Status::kRejected;
    r.reason = std::move(reason);
    return r;
  };
  if (b.site_id.empty() || b.site_id != authenticated_site) return reject("site id mismatch");
  // Parse before taking the lock: a diagnosis that does not read is a bad batch.
  std::vector<common::Diagnosis> diagnoses;
  for (const auto& v : b.verdicts) {
    if (!validJobId(v.job_id)) return reject("relay: bad job id");
    if (v.confirms) {  // read from the confirmed revision below, under the lock
      diagnoses.emplace_back();
      continue;
    }
    std::string err;
    auto d = common::diagnosisFromJson(json::parse(v.diagnosis_json, nullptr, false), &err);
    if (!d) return reject("relay: bad diagnosis");  // a metric label: no job id, no detail
    diagnoses.push_back(std::move(*d));
  }
  const std::string sender = "relay:" + b.site_id;
  auto central = [&](const std::string& job_id) { return job_id.empty() ? job_id : b.site_id + ":" + job_id; };
  const int64_t now = clock_.nowNs();

  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began() || !holdSymptomWrites()) return reject("store: " + db_->errmsg());
  {
    Stmt key(db_->get(),
             "INSERT INTO batches(agent_id, boot_id, sequence, received_ns, symptoms) VALUES(?,'',?,?,?) "
             "ON CONFLICT DO NOTHING");
    key.bind(1, sender).bind(2, b.sequence).bind(3, now).bind(4, int64_t(b.items()));
    if (key.step() != sql::kDone) return reject("store: " + db_->errmsg());
    if (db_->changes() == 0) {
      r.status = IngestResult::Status::kDuplicate;
      return r;
    }
  }
  for (size_t i = 0; i < b.verdicts.size(); ++i)
    if (!storeRelayedVerdict(*db_, b.site_id, central(b.verdicts[i].job_id), b.verdicts[i], diagnoses[i], now,
                             &r.unresolved_confirms))
      return reject("store: " + db_->errmsg());
  for (const auto& e : b.node_events) insertNodeEvent(*db_, {e.node, e.time_ns, e.kind, e.detail, central(e.job_id)});
  // Symptom rows written here are not cached by this path.
  if (!b.symptoms.empty() && !storeRelayedSymptoms(*db_, b, sender, now, &r.last_symptom_id,
                                                   [this](int64_t id) { core_.cache.erase(id); }))
    return reject("store: " + db_->errmsg());
  if (!recordRelayLiveness(*db_, b, sender, now)) return reject("store: " + db_->errmsg());
  std::string err;
  if (!tx.commit(&err)) return reject("store: " + err);
  r.status = IngestResult::Status::kStored;
  r.symptoms = b.symptoms.size();
  return r;
}

}  // namespace faultline::aggregator
