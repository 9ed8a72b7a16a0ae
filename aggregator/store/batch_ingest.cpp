// SymptomStore::ingestBatches: the grouped writer's set-based half. A run of batches from one pass of
// the ingest loop is written with a handful of multi-row statements — one per table and chunk —
// instead of about a dozen statements per batch. On SQLite that saves the per-statement work; on
// PostgreSQL it saves a round trip per statement, which is what bounded a replica's ingest rate.
//
// The result is the same, row for row, as storing the batches one after another with
// ingestBatch (tests/aggregator/core/ingest_grouped_test.cpp compares them): the checks run in
// batch order against the stored state plus what the earlier batches of the run would have
// written, and the per-agent, per-node and per-source rows are folded in that order first.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "aggregator/store/db.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/symptom_store.h"
#include "aggregator/store/template_store.h"
#include "aggregator/store/store_internal.h"
#include "common/correlator.h"

namespace faultline::aggregator {

using sql::Stmt;

namespace {

// Rows per statement: a run is cut into chunks of these sizes (largest first), so a handful of
// statement texts are prepared once per connection and reused. 256 rows of the widest table
// (symptoms, 15 columns) are 3,840 parameters: under SQLite's 32,766 and PostgreSQL's 65,535.
constexpr size_t kChunkRows[] = {256, 64, 16, 4, 1};

size_t chunkFor(size_t remaining) {
  for (size_t c : kChunkRows)
    if (c <= remaining) return c;
  return 1;
}

// The grouped write's source status upsert, after its VALUES list.
const std::string kSourceStatusTail =
    " ON CONFLICT(node, source) DO UPDATE SET format=excluded.format, status=excluded.status, "
    "reason=excluded.reason, records=excluded.records, skipped=excluded.skipped, updated_ns=excluded.updated_ns, " +
    std::string(kCountedOnConflict);

// "(?,?),(?,?)" for rows × cols. Bare `?` (numbered in order): SQLite looks a `?N` up in a list
// when it compiles the statement, quadratic in a 3,840-parameter one.
std::string valuesList(size_t rows, int cols) {
  std::string row = "(?";
  for (int c = 1; c < cols; ++c) row += ",?";
  row += ')';
  std::string out;
  out.reserve(rows * (row.size() + 1));
  for (size_t r = 0; r < rows; ++r) {
    if (r) out += ',';
    out += row;
  }
  return out;
}

// Inserts `n` rows of `cols` columns: `head` + VALUES list + `tail`, chunked. bind(stmt, row,
// first_param) binds one row (every column); on_row(stmt) sees each row a RETURNING clause gives
// back. false on a store error (Db::errmsg() says which). Each chunk's statement is the
// connection's, found by the short head and tail (a 256-row text is up to ~25 KB: built once).
template <class Bind, class OnRow>
bool insertRows(sql::Db& db, size_t n, int cols, std::string_view head, std::string_view tail, Bind bind,
                OnRow on_row) {
  std::string key;
  for (size_t at = 0; at < n;) {
    const size_t rows = chunkFor(n - at);
    key.assign(head).append("\n").append(tail).append("\n").append(std::to_string(rows));
    Stmt st = Stmt::keptByKey(db, key, [&] { return fmt::format("{} VALUES {}{}", head, valuesList(rows, cols), tail); });
    for (size_t r = 0; r < rows; ++r) bind(st, at + r, static_cast<int>(r) * cols + 1);
    int rc;
    while ((rc = st.step()) == sql::kRow) on_row(st);
    if (rc != sql::kDone) return false;
    at += rows;
  }
  return true;
}

// Runs `head` + "(?1,...,?k)" for `keys` (distinct), chunked; a short chunk repeats its last key
// (an IN list does not mind) so the statement texts stay few. on_row(stmt) per row.
template <class OnRow>
bool selectIn(sql::Db& db, const std::vector<std::string>& keys, std::string_view head, OnRow on_row) {
  for (size_t at = 0; at < keys.size();) {
    size_t rows = kChunkRows[0];
    for (size_t c : kChunkRows)
      if (c >= keys.size() - at) rows = c;
    Stmt st = Stmt::keptByKey(db, fmt::format("{}\n{}", head, rows), [&] {
      std::string list = "?";
      for (size_t i = 1; i < rows; ++i) list += ",?";
      return fmt::format("{}({})", head, list);
    });
    for (size_t i = 0; i < rows; ++i) st.bind(static_cast<int>(i) + 1, keys[std::min(at + i, keys.size() - 1)]);
    int rc;
    while ((rc = st.step()) == sql::kRow) on_row(st);
    if (rc != sql::kDone) return false;
    at += rows;
  }
  return true;
}

std::vector<std::string> distinct(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

using BatchKey = std::tuple<std::string, std::string, uint64_t>;  // agent, boot, sequence

}  // namespace

SymptomStore::Payloads SymptomStore::payloadsFor(const common::SymptomBatchData& batch) const {
  Payloads p;
  p.texts.reserve(batch.symptoms.size());
  try {
    for (const auto& s : batch.symptoms) p.texts.push_back(packedPayload(s, batch.header.boot_id));
  } catch (const std::exception& e) {
    p.texts.clear();
    p.error = std::string("bad symptom text: ") + e.what();
  }
  return p;
}

namespace {

// One run of ingestBatches, in named steps; each step that touches the store returns false on a
// store error (Db::errmsg() says which), after which the run fails as a whole (failAll).
class BatchRun {
 public:
  using IngestInput = SymptomStore::IngestInput;
  using Payloads = SymptomStore::Payloads;

  BatchRun(const SymptomStore& store, sql::Db& db, const std::vector<IngestInput>& in, int64_t now)
      : store_(store), db_(db), in_(in), now_(now), out_(in.size()) {}

  // The checks that need no store, and the payload texts (text that is not UTF-8 cannot be
  // written: the batch is refused, the others go on). false: nothing left to write.
  bool screen() {
    todo_.reserve(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) {
      const auto& b = *in_[i].batch;
      if (auto why = batchCheck(b, in_[i].agent); !why.empty()) {
        out_[i] = rejectedResult(std::move(why));
        continue;
      }
      Todo t{i, {}, in_[i].payloads};
      if (!t.made) t.own = store_.payloadsFor(b);
      const Payloads& p = t.payloads();
      if (!p.error.empty() || p.texts.size() != b.symptoms.size()) {
        out_[i] = rejectedResult(p.error.empty() ? "bad symptom text: payloads of another batch" : p.error);
        continue;
      }
      todo_.push_back(std::move(t));
    }
    return !todo_.empty();
  }

  // Who owns each hostname, which agents exist: the stored state, then each accepted batch in
  // turn (a new agent's row binds its hostname, as its first ingestBatch would have). Batches
  // that pass and are not a repeat within the run are keyed.
  bool checkOwners() {
    std::map<std::string, std::string> owner;  // hostname -> agent_id
    std::set<std::string> known_agents;
    std::vector<std::string> hosts, agents;
    for (const auto& t : todo_) hosts.push_back(in_[t.i].batch->header.hostname);
    if (!selectIn(db_, distinct(std::move(hosts)), "SELECT hostname, agent_id FROM agents WHERE hostname IN ",
                  [&](Stmt& s) {
                    owner[s.text(0)] = s.text(1);
                    known_agents.insert(s.text(1));
                  }))
      return false;
    // Whether the other senders' agent ids are stored (a sender already bound to its hostname is:
    // once an agent has reported, this asks nothing).
    for (const auto& t : todo_) {
      const auto& h = in_[t.i].batch->header;
      if (!known_agents.count(h.agent_id)) agents.push_back(h.agent_id);
    }
    if (!selectIn(db_, distinct(std::move(agents)), "SELECT agent_id FROM agents WHERE agent_id IN ",
                  [&](Stmt& s) { known_agents.insert(s.text(0)); }))
      return false;
    std::set<BatchKey> run_keys;
    for (const auto& t : todo_) {
      const auto& h = in_[t.i].batch->header;
      if (auto it = owner.find(h.hostname); it != owner.end() && it->second != h.agent_id) {
        out_[t.i] = rejectedResult("hostname bound to another agent");
        continue;
      }
      if (!run_keys.emplace(h.agent_id, h.boot_id, h.sequence).second) {
        out_[t.i].status = IngestResult::Status::kDuplicate;
        continue;
      }
      if (known_agents.insert(h.agent_id).second) owner.emplace(h.hostname, h.agent_id);
      keyed_.push_back(&t);
    }
    return true;
  }
  bool anyKeyed() const { return !keyed_.empty(); }

  // The (agent, boot, sequence) keys: the database says which are new (a key stored before, or
  // by another replica meanwhile, comes back as nothing: a duplicate).
  bool insertKeys() {
    std::set<BatchKey> inserted;
    if (!insertRows(
            db_, keyed_.size(), 5, "INSERT INTO batches(agent_id, boot_id, sequence, received_ns, symptoms)",
            " ON CONFLICT DO NOTHING RETURNING agent_id, boot_id, sequence",
            [&](Stmt& st, size_t r, int p) {
              const auto& b = *in_[keyed_[r]->i].batch;
              st.bindRef(p, b.header.agent_id).bindRef(p + 1, b.header.boot_id).bind(p + 2, b.header.sequence);
              st.bind(p + 3, now_).bind(p + 4, int64_t(b.symptoms.size()));
            },
            [&](Stmt& st) { inserted.emplace(st.text(0), st.text(1), static_cast<uint64_t>(st.i64(2))); }))
      return false;
    for (const Todo* t : keyed_) {
      const auto& h = in_[t->i].batch->header;
      if (inserted.count({h.agent_id, h.boot_id, h.sequence})) stored_.push_back(t);
      else out_[t->i].status = IngestResult::Status::kDuplicate;
    }
    return true;
  }
  bool anyStored() const { return !stored_.empty(); }

  // The symptoms, all stored batches' at once, under ids taken first; payloads made compact before
  // `packer` was there (the first rows after a store's dictionary is trained) packed with it.
  bool insertSymptoms(const PayloadDictionary* packer) {
    for (const Todo* t : stored_) {
      const auto* b = in_[t->i].batch;
      for (size_t k = 0; k < b->symptoms.size(); ++k) rows_.push_back({b, &b->symptoms[k], &t->payloads().texts[k]});
    }
    if (packer) {
      repacked_.reserve(rows_.size());  // no reallocation: rows point into it
      for (auto& r : rows_)
        if (!r.payload->empty() && (*r.payload)[0] == kCompactPayloadTag) {
          repacked_.push_back(packer->pack(*r.payload));
          r.payload = &repacked_.back();
        }
    }
    if (!takeIds()) return false;
    return insertRows(
        db_, rows_.size(), 16,
        "INSERT INTO symptoms(id, agent_id, boot_id, sequence, node, rule_id, sub_domain, role, severity, device, "
        "first_ns, last_ns, time_known, count, received_ns, payload)",
        "",
        [&](Stmt& st, size_t r, int p) {
          const auto& h = rows_[r].b->header;
          const auto& s = *rows_[r].s;
          st.bind(p, ids_[r]);
          st.bindRef(p + 1, h.agent_id).bindRef(p + 2, h.boot_id).bind(p + 3, h.sequence).bindRef(p + 4, s.node);
          st.bindRef(p + 5, s.rule_id).bindRef(p + 6, common::subDomainName(s.sub_domain));
          st.bindRef(p + 7, common::roleName(s.role)).bindRef(p + 8, common::severityName(s.severity));
          st.bindRef(p + 9, s.device).bind(p + 10, s.first_ns).bind(p + 11, s.last_ns);
          st.bind(p + 12, int64_t(s.time_known)).bind(p + 13, int64_t(s.count)).bind(p + 14, now_);
          bindPayloadRef(st, p + 15, *rows_[r].payload, db_.postgres());
        },
        [](Stmt&) {});
  }

  // The senders: per agent and per node the fold of its batches in order, per (node, source)
  // the last status; node events (a new node, a reboot) as each batch in turn would raise them.
  bool foldSenders() {
    std::map<std::string, std::optional<std::string>> node_boot;  // stored boot id; nullopt: no row
    std::vector<std::string> hosts;
    for (const Todo* t : stored_) hosts.push_back(in_[t->i].batch->header.hostname);
    hosts = distinct(std::move(hosts));
    for (const auto& host : hosts) node_boot[host] = std::nullopt;
    if (!selectIn(db_, hosts, "SELECT hostname, boot_id FROM nodes WHERE hostname IN ",
                  [&](Stmt& s) { node_boot[s.text(0)] = s.text(1); }))
      return false;
    for (const Todo* t : stored_) {
      const auto& b = *in_[t->i].batch;
      const auto& h = b.header;
      auto [a, fresh] = agent_rows_.try_emplace(h.agent_id);
      if (fresh) a->second.hostname = h.hostname;
      a->second.boot_id = h.boot_id;
      a->second.agent_version = h.agent_version;
      a->second.ruleset_version = h.ruleset_version;
      a->second.batches += 1;
      a->second.symptoms += int64_t(b.symptoms.size());

      auto& boot = node_boot[h.hostname];
      noteAgentOrBoot(db_, h.hostname, h.agent_id, h.boot_id, boot, now_);
      if (!boot || !h.boot_id.empty()) boot = h.boot_id;
      auto& n = node_rows_[h.hostname];
      n.agent_id = h.agent_id;
      n.boot_id = *boot;
      n.symptoms += int64_t(b.symptoms.size());
      for (const auto& c : b.sources) source_rows_[{h.hostname, c.source}] = &c;
    }
    return true;
  }

  // The folded rows, in key order (replicas writing the same rows take their locks in the same
  // order), and the batches' unmatched templates.
  bool writeSenders() {
    std::vector<const std::pair<const std::string, AgentFold>*> agent_list;
    for (const auto& e : agent_rows_) agent_list.push_back(&e);
    std::vector<const std::pair<const std::string, NodeFold>*> node_list;
    for (const auto& e : node_rows_) node_list.push_back(&e);
    std::vector<std::pair<const std::string*, const common::CoverageEntry*>> source_list;
    for (const auto& [key, c] : source_rows_) source_list.emplace_back(&key.first, c);
    std::vector<const common::SymptomBatchData*> stored_batches;
    for (const Todo* t : stored_) stored_batches.push_back(in_[t->i].batch);
    return insertRows(
               db_, agent_list.size(), 10,
               "INSERT INTO agents(agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, "
               "last_seen_ns, last_batch_ns, batches, symptoms)",
               " ON CONFLICT(agent_id) DO UPDATE SET boot_id=excluded.boot_id, agent_version=excluded.agent_version, "
               "ruleset_version=excluded.ruleset_version, last_seen_ns=excluded.last_seen_ns, "
               "last_batch_ns=excluded.last_batch_ns, batches=agents.batches+excluded.batches, "
               "symptoms=agents.symptoms+excluded.symptoms",
               [&](Stmt& st, size_t r, int p) {
                 const auto& [id, f] = *agent_list[r];
                 st.bindRef(p, id).bindRef(p + 1, f.hostname).bindRef(p + 2, f.boot_id).bindRef(p + 3, f.agent_version);
                 st.bindRef(p + 4, f.ruleset_version).bind(p + 5, now_).bind(p + 6, now_).bind(p + 7, now_);
                 st.bind(p + 8, f.batches).bind(p + 9, f.symptoms);
               },
               [](Stmt&) {}) &&
           insertRows(
               db_, node_list.size(), 6,
               "INSERT INTO nodes(hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, symptoms)",
               " ON CONFLICT(hostname) DO UPDATE SET agent_id=excluded.agent_id, boot_id=CASE WHEN excluded.boot_id = "
               "'' THEN nodes.boot_id ELSE excluded.boot_id END, last_seen_ns=excluded.last_seen_ns, "
               "symptoms=nodes.symptoms+excluded.symptoms",
               [&](Stmt& st, size_t r, int p) {
                 const auto& [host, f] = *node_list[r];
                 st.bindRef(p, host).bindRef(p + 1, f.agent_id).bindRef(p + 2, f.boot_id).bind(p + 3, now_);
                 st.bind(p + 4, now_).bind(p + 5, f.symptoms);
               },
               [](Stmt&) {}) &&
           insertRows(
               db_, source_list.size(), 9,
               "INSERT INTO source_status(node, source, format, status, reason, records, skipped, updated_ns, "
               "counted_ns)",
               kSourceStatusTail,
               [&](Stmt& st, size_t r, int p) {
                 const auto& [node, c] = source_list[r];
                 st.bindRef(p, *node).bindRef(p + 1, c->source).bindRef(p + 2, c->format).bindRef(p + 3, c->status);
                 st.bindRef(p + 4, c->reason).bind(p + 5, c->records).bind(p + 6, c->skipped).bind(p + 7, now_);
                 st.bind(p + 8, countedAt(c->records, c->status, now_));
               },
               [](Stmt&) {}) &&
           insertUnmatchedTemplates(db_, stored_batches, now_);
  }

  // The payloads written.
  std::vector<const std::string*> writtenPayloads() const {
    std::vector<const std::string*> out;
    out.reserve(rows_.size());
    for (const auto& r : rows_) out.push_back(r.payload);
    return out;
  }

  // The written symptoms, by id (the cache keeps common::copyForCorrelation of each).
  template <class Put>
  void forEachWritten(Put put) const {
    for (size_t r = 0; r < rows_.size(); ++r) put(ids_[r], *rows_[r].s);
  }

  // The stored batches' results (a run may hold no symptom at all: batches of unmatched
  // templates only), then the whole run's.
  std::vector<IngestResult> results() {
    const int64_t last_id = ids_.empty() ? 0 : ids_.back();
    for (const Todo* t : stored_) {
      out_[t->i].status = IngestResult::Status::kStored;
      out_[t->i].symptoms = in_[t->i].batch->symptoms.size();
      out_[t->i].last_symptom_id = last_id;
    }
    return std::move(out_);
  }
  std::vector<IngestResult> failAll(const std::string& reason) {
    for (const auto& t : todo_) out_[t.i] = rejectedResult("store: " + reason);
    return std::move(out_);
  }
  std::vector<IngestResult> checkedOnly() { return std::move(out_); }

 private:
  struct Todo {
    size_t i;
    Payloads own;                    // made here when the caller did not
    const Payloads* made = nullptr;  // the caller's
    const Payloads& payloads() const { return made ? *made : own; }
  };
  struct Row {
    const common::SymptomBatchData* b;
    const common::Symptom* s;
    const std::string* payload;
  };
  struct AgentFold {
    std::string hostname, boot_id, agent_version, ruleset_version;
    int64_t batches = 0, symptoms = 0;
  };
  struct NodeFold {
    std::string agent_id, boot_id;
    int64_t symptoms = 0;
  };

  // The rows' ids, taken before they are written so that each symptom's is known (RETURNING's
  // row order is not promised) for the decoded-symptom cache: on SQLite after the table's
  // highest (what the rows would have got; nothing else writes inside this transaction), on
  // PostgreSQL from the identity's sequence (shared with other replicas), in ascending order.
  bool takeIds() {
    ids_.reserve(rows_.size());
    if (db_.postgres()) {
      Stmt next(db_.get(), "SELECT nextval(pg_get_serial_sequence('symptoms', 'id')) FROM generate_series(1, ?1)");
      next.bind(1, int64_t(rows_.size()));
      while (next.step() == sql::kRow) ids_.push_back(next.i64(0));
      std::sort(ids_.begin(), ids_.end());
    } else {
      Stmt top(db_.get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
      if (top.step() == sql::kRow)
        for (size_t r = 0; r < rows_.size(); ++r) ids_.push_back(top.i64(0) + 1 + static_cast<int64_t>(r));
    }
    return ids_.size() == rows_.size();
  }

  const SymptomStore& store_;
  sql::Db& db_;
  const std::vector<IngestInput>& in_;
  const int64_t now_;
  std::vector<IngestResult> out_;
  std::vector<Todo> todo_;            // passed the checks that need no store
  std::vector<const Todo*> keyed_;    // passed the owner check, not a repeat within the run
  std::vector<const Todo*> stored_;   // its key was new: stored
  std::vector<Row> rows_;
  std::vector<std::string> repacked_;
  std::vector<int64_t> ids_;
  std::map<std::string, AgentFold> agent_rows_;
  std::map<std::string, NodeFold> node_rows_;
  std::map<std::pair<std::string, std::string>, const common::CoverageEntry*> source_rows_;
};

}  // namespace

std::vector<IngestResult> SymptomStore::ingestBatches(const std::vector<IngestInput>& in) {
  BatchRun run(*this, *db_, in, clock_.nowNs());
  if (!run.screen()) return run.checkedOnly();

  Lock lock(*this);
  std::optional<sql::Transaction> tx;
  auto fail = [&](const std::string& reason) {
    if (core_.in_group) core_.group_failed = true;
    return run.failAll(reason);
  };
  if (!core_.in_group) {
    tx.emplace(*db_);
    if (!tx->began() || !holdSymptomWrites()) return fail(db_->errmsg());
  } else if (core_.group_failed) {
    return fail("group failed");
  }
  if (!run.checkOwners() || (run.anyKeyed() && !run.insertKeys())) return fail(db_->errmsg());
  if (!run.anyStored()) {
    if (tx) tx->commit();
    return run.results();
  }
  const auto packer = packingDictionary();
  if (!run.insertSymptoms(packer.get()) || !run.foldSenders() || !run.writeSenders()) return fail(db_->errmsg());
  learnDictionary(run.writtenPayloads());
  // Cached once committed (endGroup's commit inside a group): a rolled-back id may come again.
  const bool cache = core_.cache.maxBytes() > 0;
  if (tx) {
    std::string err;
    const bool committed = tx->commit(&err);
    settleDictionary(committed);
    if (!committed) return fail(err);
    if (cache)
      run.forEachWritten([&](int64_t id, const common::Symptom& s) { core_.cache.put(id, common::copyForCorrelation(s)); });
  } else if (cache) {
    run.forEachWritten([&](int64_t id, const common::Symptom& s) {
      core_.cache_pending.emplace_back(id, common::copyForCorrelation(s));
    });
  }
  return run.results();
}

}  // namespace faultline::aggregator
