// Symptoms: the one-batch ingest, window reads, the group commit (symptom_store.h).
#include "aggregator/store/symptom_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <unordered_map>

#include "aggregator/store/db.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/template_store.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

IngestResult SymptomStore::ingestBatch(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  IngestResult r;
  const auto& h = batch.header;
  auto reject = rejectedResult;
  if (auto why = batchCheck(batch, authenticated_agent); !why.empty()) return reject(std::move(why));
  const int64_t now = clock_.nowNs();

  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began() || !holdSymptomWrites()) return reject("store: " + db_->errmsg());
  if (hostnameBoundElsewhere(*db_, h.hostname, h.agent_id)) return reject("hostname bound to another agent");
  {
    Stmt key(db_->get(),
             "INSERT INTO batches(agent_id, boot_id, sequence, received_ns, symptoms) VALUES(?,?,?,?,?) "
             "ON CONFLICT DO NOTHING");
    key.bind(1, h.agent_id).bind(2, h.boot_id).bind(3, h.sequence).bind(4, now).bind(5, int64_t(batch.symptoms.size()));
    if (key.step() != sql::kDone) return reject("store: " + db_->errmsg());
    if (db_->changes() == 0) {
      r.status = IngestResult::Status::kDuplicate;
      return r;  // the transaction rolls back; nothing else to write
    }
  }
  Stmt ins(db_->get(),
           "INSERT INTO symptoms(agent_id, boot_id, sequence, node, rule_id, sub_domain, role, severity, device, "
           "first_ns, last_ns, time_known, count, received_ns, payload) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id");
  std::vector<std::string> payloads;
  payloads.reserve(batch.symptoms.size());
  for (const auto& s : batch.symptoms) {
    ins.reset();
    ins.bind(1, h.agent_id).bind(2, h.boot_id).bind(3, h.sequence).bind(4, s.node).bind(5, s.rule_id);
    ins.bind(6, common::subDomainName(s.sub_domain)).bind(7, common::roleName(s.role));
    ins.bind(8, common::severityName(s.severity)).bind(9, s.device).bind(10, s.first_ns).bind(11, s.last_ns);
    ins.bind(12, int64_t(s.time_known)).bind(13, int64_t(s.count)).bind(14, now);
    payloads.push_back(packedPayload(s, h.boot_id));
    bindPayloadRef(ins, 15, payloads.back(), db_->postgres());
    if (ins.step() != sql::kRow) return reject("store: " + db_->errmsg());
    r.last_symptom_id = ins.i64(0);
    core_.cache.erase(r.last_symptom_id);  // not cached by this path: no older entry may answer for the id
    ins.reset();  // RETURNING: the statement is done (SQLite cannot commit under an open one)
  }
  if (!recordSender(*db_, batch, now) || !insertUnmatchedTemplates(*db_, {&batch}, now))
    return reject("store: " + db_->errmsg());
  std::vector<const std::string*> written;
  for (const auto& p : payloads) written.push_back(&p);
  learnDictionary(written);
  std::string err;
  const bool committed = tx.commit(&err);
  if (!committed) settleDictionary(false);
  else if (!core_.in_group) settleDictionary(true);  // in a group: when endGroup commits
  if (!committed) return reject("store: " + err);
  r.status = IngestResult::Status::kStored;
  r.symptoms = batch.symptoms.size();
  return r;
}

IngestResult SymptomStore::ingestBatchGrouped(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  return ingestBatches({{&batch, authenticated_agent}})[0];
}

// ---- symptoms ----

namespace {
// fn(i) for i in [0, n), split over every core (this thread too) when n is worth it.
template <class Fn>
void parallelFor(size_t n, Fn fn) {
  const size_t workers = std::max(1u, std::thread::hardware_concurrency());
  if (n < 256 || workers == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const size_t per = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers && w * per < n; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w * per; i < std::min(n, (w + 1) * per); ++i) fn(i);
    });
  for (size_t i = 0; i < std::min(n, per); ++i) fn(i);
  for (auto& t : pool) t.join();
}

// A decoded symptom as the cache holds it (common::copyForCorrelation): the first evidence line.
common::Symptom forCorrelation(common::Symptom s) {
  if (s.evidence.size() > 1) s.evidence.resize(1);
  return s;
}

std::string_view payloadAt(const Stmt& s, int c) { return s.view(c + 11); }

// A window's rows as read: their ids, where each node's begin, the symptoms.
struct WindowRows {
  std::vector<common::Symptom> out;
  std::vector<int64_t> ids;
  std::vector<size_t> node_starts;  // where each node's rows begin in `out`
  std::string last_node;

  void row(int64_t id, std::string_view node) {
    ids.push_back(id);
    if (node_starts.empty() || node != last_node) {
      node_starts.push_back(ids.size() - 1);
      last_node = node;
    }
  }
  // Leaves out the rows of `gone` (ids deleted between two reads).
  void drop(const std::unordered_map<int64_t, size_t>& gone) {
    size_t kept = 0;
    std::vector<size_t> starts;
    for (size_t i = 0, g = 0; i < ids.size(); ++i) {
      while (g < node_starts.size() && node_starts[g] == i) {
        if (starts.empty() || starts.back() != kept) starts.push_back(kept);  // a node all gone: no range
        ++g;
      }
      if (gone.count(ids[i])) continue;
      ids[kept] = ids[i];
      if (kept != i) out[kept] = std::move(out[i]);
      ++kept;
    }
    ids.resize(kept);
    out.resize(kept);
    node_starts = std::move(starts);
  }
  // Each node's rows in id order (the query gives node order only).
  void sortByIdWithinNodes() {
    node_starts.push_back(out.size());
    std::vector<size_t> order;
    std::vector<common::Symptom> sorted;
    for (size_t g = 0; g + 1 < node_starts.size(); ++g) {
      const size_t b = node_starts[g], e = node_starts[g + 1];
      if (std::is_sorted(ids.begin() + static_cast<ptrdiff_t>(b), ids.begin() + static_cast<ptrdiff_t>(e))) continue;
      order.resize(e - b);
      for (size_t i = 0; i < order.size(); ++i) order[i] = b + i;
      std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ids[x] < ids[y]; });
      sorted.clear();
      for (size_t i : order) sorted.push_back(std::move(out[i]));
      std::move(sorted.begin(), sorted.end(), out.begin() + static_cast<ptrdiff_t>(b));
    }
    node_starts.pop_back();
  }
  int64_t maxId() const {
    int64_t hi = 0;
    for (int64_t id : ids) hi = std::max(hi, id);
    return hi;
  }
};

// Decodes rows into their slots of `out`: a compact payload at once (it is a few copies), a JSON
// one (a row written before migration 9) kept, and decoded on every core with the rest of its
// chunk at flush().
class RowDecoder {
 public:
  RowDecoder(std::vector<common::Symptom>& out, sql::Db& db, PayloadDictionaries& dicts)
      : out_(out), db_(db), dicts_(dicts) {}
  void add(size_t slot, const Stmt& s, int first_col) {
    const std::string_view p = payloadAt(s, first_col);
    if (!p.empty() && (p[0] == kCompactPayloadTag || p[0] == kPackedPayloadTag)) {
      out_[slot] = symptomRowAt(s, first_col, db_, dicts_, 1);
      return;
    }
    slots_.push_back(slot);
    json_.emplace_back(p);
  }
  size_t pending() const { return json_.size(); }
  void flush() {
    parallelFor(json_.size(), [&](size_t k) { out_[slots_[k]] = forCorrelation(symptomFromPayload(json_[k])); });
    json_.clear();
    slots_.clear();
  }

 private:
  std::vector<common::Symptom>& out_;
  sql::Db& db_;
  PayloadDictionaries& dicts_;
  std::vector<size_t> slots_;
  std::vector<std::string> json_;
};

// Rows read (and JSON payloads kept) per decode: the chunk bounds the copies.
constexpr size_t kWindowChunk = 8192;

// The window's rows with their payloads, every one decoded (no cache).
void readWholeWindow(sql::Db& db, PayloadDictionaries& dicts, Stmt& s, WindowRows& w) {
  RowDecoder decoder(w.out, db, dicts);
  while (s.step() == sql::kRow) {
    w.row(s.i64(0), s.view(1));
    w.out.emplace_back();
    decoder.add(w.out.size() - 1, s, 1);
    if (decoder.pending() == kWindowChunk) decoder.flush();
  }
  decoder.flush();
}

// The window's ids, their symptoms from the cache, and the rows the cache lacks read by id (a
// chunk of ids at a time); a row deleted between the two reads (no snapshot spans them on
// PostgreSQL) is left out, as if the first read had come after the delete.
void readCachedWindow(sql::Db& db, PayloadDictionaries& dicts, Stmt& s, const SymptomCache& cache, WindowRows& w) {
  std::vector<const common::Symptom*> cached;
  std::vector<size_t> missing;  // positions in `out` whose symptom the cache lacks
  while (s.step() == sql::kRow) {
    w.row(s.i64(0), s.view(1));
    cached.push_back(cache.find(w.ids.back()));
    if (!cached.back()) missing.push_back(cached.size() - 1);
  }
  w.out.resize(cached.size());
  parallelFor(cached.size(), [&](size_t i) {
    if (cached[i]) w.out[i] = *cached[i];
  });
  if (missing.empty()) return;
  std::unordered_map<int64_t, size_t> at;
  for (size_t m : missing) at.emplace(w.ids[m], m);
  RowDecoder decoder(w.out, db, dicts);
  for (size_t i = 0; i < missing.size();) {
    const size_t n = std::min<size_t>(missing.size() - i, kWindowChunk);
    std::string list = "[";
    for (size_t k = 0; k < n; ++k) list += (k ? "," : "") + std::to_string(w.ids[missing[i + k]]);
    list += "]";
    Stmt p(db.get(), fmt::format("SELECT id, {} FROM symptoms WHERE id IN {}", kSymptomRowColumns, db.jsonIntList(1)));
    p.bind(1, list);
    while (p.step() == sql::kRow) {
      auto it = at.find(p.i64(0));
      if (it == at.end()) continue;
      decoder.add(it->second, p, 1);
      at.erase(it);
    }
    decoder.flush();
    i += n;
  }
  if (!at.empty()) w.drop(at);
}

}  // namespace

const std::string_view kSymptomRowColumns =
    "node, rule_id, sub_domain, role, severity, device, boot_id, first_ns, last_ns, time_known, count, payload";

std::string windowQuery(std::string_view columns, std::string_view node_set) {
  return fmt::format(
      "SELECT {} FROM symptoms WHERE node IN {} AND ((time_known = 1 AND last_ns >= ?2 AND first_ns <= ?3) OR "
      "(time_known = 0 AND received_ns >= ?2 AND received_ns <= ?4)) ORDER BY node",
      columns, node_set);
}

std::vector<common::Symptom> SymptomStore::symptomsForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                             int64_t to_ns, int64_t to_received_ns, int64_t* max_id) {
  Lock lock(*this);
  // In node order; id order within a node is restored after (ORDER BY node, id made SQLite sort
  // every node's rows, payloads and all, in a temporary b-tree: a fifth of the read). Decoding the
  // payloads is most of the cost (a 10,000-node job has ~200k): the cache holds what this process
  // stored lately, decoded. Which rows belong is still the query's answer.
  const bool cached = core_.cache.size() > 0;
  Stmt s(db_->get(), windowQuery(cached ? std::string("id, node") : fmt::format("id, {}", kSymptomRowColumns),
                                 db_->jsonList(1)));
  s.bind(1, joinJsonArray(nodes)).bind(2, from_ns).bind(3, to_ns).bind(4, to_received_ns);
  WindowRows w;
  if (cached) readCachedWindow(*db_, core_.dictionaries, s, core_.cache, w);
  else readWholeWindow(*db_, core_.dictionaries, s, w);
  w.sortByIdWithinNodes();
  if (max_id) *max_id = w.maxId();
  return std::move(w.out);
}

std::vector<StoredSymptom> SymptomStore::symptoms(const SymptomFilter& f) {
  Lock lock(*this);
  std::string rule = f.rule_id;
  bool prefix = !rule.empty() && rule.back() == '*';
  if (prefix) rule.pop_back();
  Stmt s(db_->get(),
         fmt::format("SELECT id, agent_id, received_ns, {} FROM symptoms WHERE "
                     "(?1 = '[]' OR node IN {}) "
                     "AND (?2 = '' OR (?3 = 0 AND rule_id = ?2) OR (?3 = 1 AND substr(rule_id, 1, length(?2)) = ?2)) "
                     "AND (?4 = 0 OR (CASE WHEN time_known = 1 THEN last_ns ELSE received_ns END) >= ?4) "
                     "AND (?5 = 0 OR (CASE WHEN time_known = 1 THEN first_ns ELSE received_ns END) <= ?5) "
                     "AND id > ?6 ORDER BY id DESC LIMIT ?7",
                     kSymptomRowColumns, db_->jsonList(1)));
  s.bind(1, joinJsonArray(f.nodes)).bind(2, rule).bind(3, int64_t(prefix)).bind(4, f.since_ns);
  s.bind(5, f.until_ns).bind(6, f.after_id).bind(7, int64_t(f.limit));
  std::vector<StoredSymptom> out;
  while (s.step() == sql::kRow)
    out.push_back({s.i64(0), s.text(1), s.i64(2), symptomRowAt(s, 3, *db_, core_.dictionaries)});
  return out;
}

std::vector<SymptomStore::NewSymptomSpan> SymptomStore::symptomsSince(int64_t after_id, int64_t upto_id) {
  Lock lock(*this);
  // The rows in id order (the primary key's range) and the spans made here: GROUP BY node made
  // SQLite sort every new row first: over a quarter of a cascade tick's instructions.
  Stmt s(*db_,
         "SELECT node, time_known, first_ns, last_ns, received_ns, id FROM symptoms WHERE id > ? AND id <= ? "
         "ORDER BY id");
  s.bind(1, after_id).bind(2, upto_id);
  std::vector<NewSymptomSpan> out;
  std::unordered_map<std::string, size_t> at;
  while (s.step() == sql::kRow) {
    const bool timed = s.i64(1) == 1;
    const int64_t first = timed ? s.i64(2) : s.i64(4), last = timed ? s.i64(3) : s.i64(4), id = s.i64(5);
    auto [it, fresh] = at.try_emplace(std::string(s.view(0)), out.size());
    if (fresh) {
      out.push_back({it->first, first, last, id, !timed});
      continue;
    }
    NewSymptomSpan& span = out[it->second];
    span.first_ns = std::min(span.first_ns, first);
    span.last_ns = std::max(span.last_ns, last);
    span.max_id = std::max(span.max_id, id);
    span.untimed = span.untimed || !timed;
  }
  std::sort(out.begin(), out.end(), [](const NewSymptomSpan& a, const NewSymptomSpan& b) { return a.node < b.node; });
  return out;
}

int64_t SymptomStore::settledSymptomId() {
  // SQLite: one writer at a time (its write lock), ids taken inside it: committed in id order.
  if (!db_->postgres()) return maxSymptomId();
  Lock lock(*this);
  // Every transaction that writes symptoms holds lock 7146603 shared (holdSymptomWrites). Taking
  // it exclusively waits for those in flight (new ones queue behind us): once held, every id
  // taken so far is committed or rolled back, and MAX(id) is settled.
  sql::Transaction tx(*db_);
  if (!tx.began() || !db_->exec("SELECT pg_advisory_xact_lock(7146603)")) return -1;
  Stmt s(db_->get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
  int64_t id = s.step() == sql::kRow ? s.i64(0) : -1;
  s.reset();
  return tx.commit() ? id : -1;
}

int64_t SymptomStore::maxSymptomId() {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
  return s.step() == sql::kRow ? s.i64(0) : 0;
}

bool SymptomStore::beginGroup(std::string* error) {
  // Fairness: std::mutex hands the lock to no one in particular; a thread that was waiting
  // while the last group ran gets it before the next group starts.
  for (int i = 0; i < 10'000 && othersWaiting(); ++i) std::this_thread::yield();
  core_.mu.lock();
  if (core_.in_group || !db_->exec(db_->beginSql(), error) || !holdSymptomWrites(error)) {
    if (!core_.in_group && db_->inTransaction()) db_->exec("ROLLBACK");
    if (core_.in_group && error) *error = "store: group already open";
    core_.mu.unlock();
    return false;
  }
  core_.in_group = true;
  return true;
}

bool SymptomStore::endGroup(std::string* error) {
  if (!core_.in_group) return false;  // not held by a group: nothing to unlock
  bool ok = !core_.group_failed && db_->exec("COMMIT", error);
  if (core_.group_failed && error) *error = "store: a write of the group failed";
  if (!ok) db_->exec("ROLLBACK");
  settleDictionary(ok);
  if (ok)
    for (auto& [id, sym] : core_.cache_pending) core_.cache.put(id, std::move(sym));
  core_.cache_pending.clear();
  core_.in_group = false;
  core_.group_failed = false;
  core_.mu.unlock();
  return ok;
}

}  // namespace faultline::aggregator
