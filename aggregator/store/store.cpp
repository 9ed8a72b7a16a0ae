#include "aggregator/store/store.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <set>
#include <thread>
#include <unordered_map>

#include "aggregator/store/migrations.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/db.h"
#include "common/hostlist.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

std::string_view ingestStatusName(IngestResult::Status s) {
  switch (s) {
    case IngestResult::Status::kStored: return "stored";
    case IngestResult::Status::kDuplicate: return "duplicate";
    case IngestResult::Status::kRejected: return "rejected";
  }
  return "?";
}

std::optional<common::SourceKind> parseSourceKind(std::string_view s) {
  for (auto k : {common::SourceKind::kKernel, common::SourceKind::kJournal, common::SourceKind::kFabricManager,
                 common::SourceKind::kApplication})
    if (common::sourceKindName(k) == s) return k;
  return std::nullopt;
}

bool isActiveJobState(std::string_view s) {
  for (std::string_view a : {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
                             "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED"})
    if (s.substr(0, a.size()) == a) return true;
  return false;
}

bool validJobId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+')) return false;
  return true;
}

namespace {

std::string joinJsonArray(const std::vector<std::string>& v) { return json(v).dump(); }

std::vector<std::string> parseJsonArray(const std::string& s) {
  std::vector<std::string> out;
  json j = json::parse(s, nullptr, false);
  if (j.is_array())
    for (const auto& e : j)
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

}  // namespace

json symptomToJson(const common::Symptom& s) {
  return json{{"rule_id", s.rule_id},
              {"symptom", s.symptom},
              {"sub_domain", common::subDomainName(s.sub_domain)},
              {"category", s.category},
              {"role", common::roleName(s.role)},
              {"severity", common::severityName(s.severity)},
              {"fallback_root", s.fallback_root},
              {"node", s.node},
              {"device", s.device},
              {"source", s.source},
              {"source_kind", common::sourceKindName(s.source_kind)},
              {"first_ns", s.first_ns},
              {"last_ns", s.last_ns},
              {"time_known", s.time_known},
              {"count", s.count},
              {"evidence", s.evidence},
              {"fields", s.fields},
              {"summary", s.summary},
              {"boot_id", s.boot_id}};
}

namespace {

// How many leading bytes of `v` a JSON string holds as they are: up to the first '"', '\\' or
// control character (and, with `ascii_only`, byte >= 0x80: UTF-8 the writer checks on its own).
// Evidence lines are long and mostly plain: many bytes at a time.
size_t plainJsonRun(std::string_view v, bool ascii_only) {
  size_t i = 0;
#if defined(__SSE2__)
  // Sixteen at a time where SSE2 is (every x86-64): the first special byte's position directly.
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1f);
  for (; i + 16 <= v.size(); i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v.data() + i));
    const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                         _mm_cmpeq_epi8(_mm_min_epu8(x, control), x));  // x <= 0x1f
    int mask = _mm_movemask_epi8(special);
    if (ascii_only) mask |= _mm_movemask_epi8(x);  // the high bit: a byte >= 0x80
    if (mask) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  auto zeroByte = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  for (; i + 8 <= v.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, v.data() + i, 8);
    // A byte below 0x20: (x - 0x20..) borrows into its high bit, unless the byte had it set.
    uint64_t special = ((x - kOnes * 0x20) & ~x & kHigh) | zeroByte(x ^ (kOnes * '"')) | zeroByte(x ^ (kOnes * '\\'));
    if (ascii_only) special |= x & kHigh;
    if (special) break;
  }
  while (i < v.size()) {
    auto b = static_cast<unsigned char>(v[i]);
    if (b < 0x20 || b == '"' || b == '\\' || (ascii_only && b >= 0x80)) break;
    ++i;
  }
  return i;
}

// Appends `v` as nlohmann::json::dump() writes a string (ensure_ascii off): ", \ and the control
// characters escaped (\b \f \n \r \t, others \u00xx), everything else as is. false when `v` is not
// valid UTF-8 (dump() throws then; the caller falls back to it).
bool appendJsonString(std::string& out, std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < v.size();) {
    // A run of bytes written as they are, in one append.
    size_t run = i + plainJsonRun(v.substr(i), true);
    if (run > i) {
      out.append(v.data() + i, run - i);
      i = run;
      if (i == v.size()) break;
    }
    auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // A multi-byte sequence, checked as RFC 3629 (no overlongs, surrogates or > U+10FFFF).
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || c > 0xf4 || i + n > v.size()) return false;
    auto b1 = static_cast<unsigned char>(v[i + 1]);
    unsigned lo = 0x80, hi = 0xbf;
    if (c == 0xe0) lo = 0xa0;
    else if (c == 0xed) hi = 0x9f;
    else if (c == 0xf0) lo = 0x90;
    else if (c == 0xf4) hi = 0x8f;
    if (b1 < lo || b1 > hi) return false;
    for (size_t k = 2; k < n; ++k)
      if ((static_cast<unsigned char>(v[i + k]) & 0xc0) != 0x80) return false;
    out.append(v.data() + i, n);
    i += n;
  }
  out.push_back('"');
  return true;
}

}  // namespace

std::string symptomJsonText(const common::Symptom& s) {
  // The keys in std::map order, as dump() writes them. Each key is appended with its quotes,
  // colon and the comma before it as one literal of known length (the key text was ~35 % of the
  // cost when it went through strlen and four appends).
  std::string out;
  size_t text = s.summary.size() + s.symptom.size() + s.node.size() + s.device.size() + s.source.size() +
                s.rule_id.size() + s.category.size() + s.boot_id.size();
  for (const auto& e : s.evidence) text += e.size() + 3;
  for (const auto& [k, v] : s.fields) text += k.size() + v.size() + 6;
  out.reserve(320 + text + text / 8);
  bool ok = true;
  auto key = [&](std::string_view k) { out.append(k.data(), k.size()); };
  auto str = [&](std::string_view k, std::string_view v) {
    key(k);
    ok = appendJsonString(out, v) && ok;
  };
  auto num = [&](std::string_view k, int64_t v) {
    key(k);
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<size_t>(r.ptr - buf));
  };
  auto boolean = [&](std::string_view k, bool v) {
    key(k);
    out += v ? std::string_view("true") : std::string_view("false");
  };
  using namespace std::string_view_literals;
  str("{\"boot_id\":"sv, s.boot_id);
  str(",\"category\":"sv, s.category);
  num(",\"count\":"sv, s.count);
  str(",\"device\":"sv, s.device);
  key(",\"evidence\":["sv);
  for (size_t i = 0; i < s.evidence.size(); ++i) {
    if (i) out.push_back(',');
    ok = appendJsonString(out, s.evidence[i]) && ok;
  }
  out.push_back(']');
  boolean(",\"fallback_root\":"sv, s.fallback_root);
  key(",\"fields\":{"sv);
  bool first = true;
  for (const auto& [k, v] : s.fields) {
    if (!first) out.push_back(',');
    first = false;
    ok = appendJsonString(out, k) && ok;
    out.push_back(':');
    ok = appendJsonString(out, v) && ok;
  }
  out.push_back('}');
  num(",\"first_ns\":"sv, s.first_ns);
  num(",\"last_ns\":"sv, s.last_ns);
  str(",\"node\":"sv, s.node);
  str(",\"role\":"sv, common::roleName(s.role));
  str(",\"rule_id\":"sv, s.rule_id);
  str(",\"severity\":"sv, common::severityName(s.severity));
  str(",\"source\":"sv, s.source);
  str(",\"source_kind\":"sv, common::sourceKindName(s.source_kind));
  str(",\"sub_domain\":"sv, common::subDomainName(s.sub_domain));
  str(",\"summary\":"sv, s.summary);
  str(",\"symptom\":"sv, s.symptom);
  boolean(",\"time_known\":"sv, s.time_known);
  out.push_back('}');
  // Not UTF-8 somewhere: whatever dump() does with it (the previous path's behaviour).
  return ok ? out : symptomToJson(s).dump();
}

namespace {

// Reads the payload text exactly as symptomJsonText (and dump() before it) writes it: the keys in
// that order, those types, no spaces, the escapes dump() uses. Anything else: nullopt (the caller
// parses it with nlohmann::json instead), so the result is always what symptomFromJson gives.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view t) : t_(t) {}

  std::optional<common::Symptom> read() {
    common::Symptom s;
    std::string sub_domain, role, severity, source_kind;
    bool ok = lit('{') && str("boot_id", &s.boot_id, true) && str("category", &s.category) &&
              u32("count", &s.count) && str("device", &s.device) && key("evidence") && lit('[');
    if (!ok) return std::nullopt;
    if (!lit(']')) {
      do {
        std::string e;
        if (!string(&e)) return std::nullopt;
        s.evidence.push_back(std::move(e));
      } while (lit(','));
      if (!lit(']')) return std::nullopt;
    }
    if (!boolean("fallback_root", &s.fallback_root) || !key("fields") || !lit('{')) return std::nullopt;
    if (!lit('}')) {
      do {
        std::string k, v;
        if (!string(&k) || !lit(':') || !string(&v)) return std::nullopt;
        s.fields[std::move(k)] = std::move(v);
      } while (lit(','));
      if (!lit('}')) return std::nullopt;
    }
    ok = i64("first_ns", &s.first_ns) && i64("last_ns", &s.last_ns) && str("node", &s.node) && str("role", &role) &&
         str("rule_id", &s.rule_id) && str("severity", &severity) && str("source", &s.source) &&
         str("source_kind", &source_kind) && str("sub_domain", &sub_domain) && str("summary", &s.summary) &&
         str("symptom", &s.symptom) && boolean("time_known", &s.time_known) && lit('}') && i_ == t_.size();
    if (!ok) return std::nullopt;
    s.sub_domain = common::parseSubDomain(sub_domain).value_or(common::SubDomain::kNone);
    s.role = common::parseRole(role).value_or(common::Role::kRoot);
    s.severity = common::parseSeverity(severity).value_or(common::Severity::kError);
    s.source_kind = parseSourceKind(source_kind).value_or(common::SourceKind::kApplication);
    return s;
  }

 private:
  bool lit(char c) {  // the one-character case, most of them
    if (i_ >= t_.size() || t_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool lit(std::string_view l) {
    if (t_.size() - i_ < l.size() || std::memcmp(t_.data() + i_, l.data(), l.size()) != 0) return false;
    i_ += l.size();
    return true;
  }
  // ,"name": (the first key without the comma), compared in place: called ~25 times a symptom.
  bool key(std::string_view name, bool first = false) {
    const size_t lead = first ? 1 : 2, need = lead + name.size() + 2;
    if (t_.size() - i_ < need) return false;
    const char* p = t_.data() + i_;
    if ((!first && *p++ != ',') || *p++ != '"' || std::memcmp(p, name.data(), name.size()) != 0 ||
        p[name.size()] != '"' || p[name.size() + 1] != ':')
      return false;
    i_ += need;
    return true;
  }
  bool str(std::string_view name, std::string* out, bool first = false) { return key(name, first) && string(out); }
  bool string(std::string* out) {
    if (!lit('"')) return false;
    while (i_ < t_.size()) {
      size_t run = i_ + plainJsonRun(t_.substr(i_), false);
      out->append(t_.data() + i_, run - i_);
      i_ = run;
      if (i_ >= t_.size()) return false;
      char c = t_[i_++];
      if (c == '"') return true;
      if (c != '\\' || i_ >= t_.size()) return false;  // a raw control character: not ours
      switch (t_[i_++]) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          // dump() writes \u00xx for control characters only; anything else goes the long way.
          if (i_ + 4 > t_.size() || t_.substr(i_, 2) != "00") return false;
          int v = 0;
          for (char h : t_.substr(i_ + 2, 2)) {
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return false;
            v = v * 16 + d;
          }
          if (v >= 0x80) return false;
          out->push_back(static_cast<char>(v));
          i_ += 4;
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool digits(uint64_t* v) {
    size_t start = i_;
    *v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      if (*v > (UINT64_MAX - 9) / 10) return false;
      *v = *v * 10 + uint64_t(t_[i_++] - '0');
    }
    size_t n = i_ - start;
    return n > 0 && !(n > 1 && t_[start] == '0');
  }
  bool u32(std::string_view name, uint32_t* out) {
    uint64_t v = 0;
    if (!key(name) || !digits(&v) || v > UINT32_MAX) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  }
  bool i64(std::string_view name, int64_t* out) {
    if (!key(name)) return false;
    bool neg = lit('-');
    uint64_t v = 0;
    if (!digits(&v) || v > uint64_t(INT64_MAX)) return false;
    *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }
  bool boolean(std::string_view name, bool* out) {
    if (!key(name)) return false;
    if (lit("true")) *out = true;
    else if (lit("false")) *out = false;
    else return false;
    return true;
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

common::Symptom symptomFromPayload(std::string_view payload) {
  if (auto s = PayloadReader(payload).read()) return std::move(*s);
  return symptomFromJson(json::parse(payload, nullptr, false));
}

common::Symptom symptomFromJson(const json& j) {
  common::Symptom s;
  s.rule_id = j.value("rule_id", "");
  s.symptom = j.value("symptom", "");
  s.sub_domain = common::parseSubDomain(j.value("sub_domain", "none")).value_or(common::SubDomain::kNone);
  s.category = j.value("category", "");
  s.role = common::parseRole(j.value("role", "root")).value_or(common::Role::kRoot);
  s.severity = common::parseSeverity(j.value("severity", "error")).value_or(common::Severity::kError);
  s.fallback_root = j.value("fallback_root", false);
  s.node = j.value("node", "");
  s.device = j.value("device", "");
  s.source = j.value("source", "");
  s.source_kind = parseSourceKind(j.value("source_kind", "application")).value_or(common::SourceKind::kApplication);
  s.first_ns = j.value("first_ns", int64_t{0});
  s.last_ns = j.value("last_ns", int64_t{0});
  s.time_known = j.value("time_known", false);
  s.count = j.value("count", uint32_t{1});
  if (j.contains("evidence") && j["evidence"].is_array())
    for (const auto& e : j["evidence"])
      if (e.is_string()) s.evidence.push_back(e.get<std::string>());
  if (j.contains("fields") && j["fields"].is_object())
    for (const auto& [k, v] : j["fields"].items())
      if (v.is_string()) s.fields[k] = v.get<std::string>();
  s.summary = j.value("summary", "");
  s.boot_id = j.value("boot_id", "");
  return s;
}

Store::Store(std::unique_ptr<sql::Db> db, const Clock& clock) : db_(std::move(db)), clock_(clock) {}
Store::~Store() = default;

int Store::latestSchemaVersion() { return static_cast<int>(kStoreMigrationCount); }

std::unique_ptr<Store> Store::open(const std::string& path, const Clock& clock, StoreOptions options,
                                   std::string* error) {
  auto db = sql::Db::open(path, options.read_only, error);
  if (!db) return nullptr;
  db->setBusyTimeout(options.busy_timeout_ms);
  std::string why;
  std::unique_ptr<Store> store(new Store(std::move(db), clock));
  store->cache_ = SymptomCache(options.read_only ? 0 : options.symptom_cache_bytes);
  if (options.read_only) {
    if (store->schemaVersion() != latestSchemaVersion()) {
      *error = fmt::format("{}: schema version {} (this faultline reads {})", path, store->schemaVersion(),
                           latestSchemaVersion());
      return nullptr;
    }
    return store;
  }
  bool pg = store->db_->postgres();
  // PostgreSQL: commits are durable (synchronous_commit is the server's setting).
  if ((!pg && (!store->db_->exec("PRAGMA journal_mode=WAL", &why) ||
               !store->db_->exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                                 &why) ||
               !store->db_->exec("PRAGMA foreign_keys=ON", &why) ||
               // A fleet-wide cascade writes into every index at once and a 10,000-node verdict
               // reads ~200k payloads: 64 MiB of page cache (default 2 MiB). No mmap: a read
               // error there is a SIGBUS, not an error code.
               !store->db_->exec("PRAGMA cache_size=-65536", &why))) ||
      !store->migrate(&why)) {
    *error = sql::redactUrl(path) + ": " + why;
    return nullptr;
  }
  return store;
}

int Store::schemaVersion() {
  Lock lock(*this);  // also from the API's /healthz: never on a connection another thread is using
  if (db_->postgres()) {
    // A table the first migration creates; none yet = version 0.
    Stmt t(db_->get(), "SELECT to_regclass('faultline_schema') IS NOT NULL");
    if (t.step() != sql::kRow) return -1;
    if (t.i64(0) == 0) return 0;
    Stmt v(db_->get(), "SELECT COALESCE(MAX(version), 0) FROM faultline_schema");
    return v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : -1;
  }
  Stmt v(db_->get(), "PRAGMA user_version");
  return v.ok() && v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : -1;
}

// The stored schema version, or -1 + *error when it cannot be read or is newer than this build.
int Store::migrateFrom(std::string* error) {
  int version = schemaVersion();
  if (version < 0) *error = db_->errmsg();
  if (version > latestSchemaVersion()) {
    *error = fmt::format("schema version {} is newer than this aggregator ({})", version, latestSchemaVersion());
    return -1;
  }
  return version;
}

bool Store::migrate(std::string* error) {
  if (db_->postgres()) return migratePostgres(error);
  int version = migrateFrom(error);
  if (version < 0) return false;
  for (int i = version; i < latestSchemaVersion(); ++i) {
    sql::Transaction tx(*db_);
    if (!tx.began() || !db_->exec(kStoreMigrations[i], error) ||
        !db_->exec(fmt::format("PRAGMA user_version={}", i + 1), error) || !tx.commit(error)) {
      *error = fmt::format("migration {}: {}", i + 1, *error);
      return false;
    }
  }
  return true;
}

// The same migrations, in PostgreSQL's types (Db::ddl), each in a transaction under an advisory
// lock: replicas started together migrate once, the others wait and find it done.
bool Store::migratePostgres(std::string* error) {
  sql::Transaction tx(*db_);
  if (!tx.began() || !db_->exec("SELECT pg_advisory_xact_lock(7146601)", error) ||
      !db_->exec("CREATE TABLE IF NOT EXISTS faultline_schema(version INTEGER NOT NULL, applied_ns BIGINT NOT NULL)",
                 error))
    return false;
  int version = migrateFrom(error);
  if (version < 0) return false;
  for (int i = version; i < latestSchemaVersion(); ++i) {
    Stmt mark(db_->get(), "INSERT INTO faultline_schema(version, applied_ns) VALUES(?, ?)");
    mark.bind(1, int64_t(i + 1)).bind(2, clock_.nowNs());
    if (!db_->exec(db_->ddl(kStoreMigrations[i]), error) || mark.step() != sql::kDone) {
      if (error->empty()) *error = db_->errmsg();
      *error = fmt::format("migration {}: {}", i + 1, *error);
      return false;
    }
  }
  return tx.commit(error);
}

void Store::addNodeEventLocked(const NodeEvent& e) {
  // Kept: a fleet's agents all come up at once after an outage, each with an event.
  Stmt s(*db_, "INSERT INTO node_events(node, time_ns, kind, detail, job_id) VALUES(?,?,?,?,?)");
  s.bind(1, e.node).bind(2, e.time_ns).bind(3, e.kind).bind(4, e.detail).bind(5, e.job_id).step();
}

bool Store::addNodeEvent(const NodeEvent& e) {
  Lock lock(*this);
  addNodeEventLocked(e);
  return true;
}

// The checks of a batch that need no store: "" when it may be stored.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  const auto& h = batch.header;
  if (h.agent_id.empty() || h.hostname.empty()) return "missing agent id or hostname";
  if (h.agent_id != authenticated_agent) return "agent id mismatch";
  for (const auto& s : batch.symptoms)
    if (s.node != h.hostname) return "symptom for another node";
  return "";
}

IngestResult rejectedResult(std::string reason) {
  IngestResult r;
  r.status = IngestResult::Status::kRejected;
  r.reason = std::move(reason);
  return r;
}


// A stored batch's sender, for ingestBatch (the old one-batch path, kept as the load bench's peer;
// ingestBatches folds the same rows for a whole run): the agent's and node's rows (counts, last
// seen, boot), a node event for a new node or a reboot, the node's source coverage.
bool Store::recordSenderLocked(const common::SymptomBatchData& batch, int64_t now) {
  const auto& h = batch.header;
  auto prepare = [&](std::optional<Stmt>& st, std::string_view q) -> Stmt& {
    st.emplace(db_->get(), q);
    return *st;
  };
  {
    std::optional<Stmt> st;
    auto& a = prepare(st,
                      "INSERT INTO agents(agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, "
                      "last_seen_ns, last_batch_ns, batches, symptoms) VALUES(?1,?2,?3,?4,?5,?6,?6,?6,1,?7) "
                      "ON CONFLICT(agent_id) DO UPDATE SET boot_id=?3, agent_version=?4, ruleset_version=?5, "
                      "last_seen_ns=?6, last_batch_ns=?6, batches=agents.batches+1, symptoms=agents.symptoms+?7");
    a.bind(1, h.agent_id).bind(2, h.hostname).bind(3, h.boot_id).bind(4, h.agent_version);
    a.bind(5, h.ruleset_version).bind(6, now).bind(7, int64_t(batch.symptoms.size()));
    if (a.step() != sql::kDone) return false;
  }
  {
    bool known = false;
    std::string old_boot;
    {
      std::optional<Stmt> st;
      auto& prev = prepare(st, "SELECT boot_id FROM nodes WHERE hostname = ?");
      prev.bind(1, h.hostname);
      known = prev.step() == sql::kRow;
      if (known) old_boot = prev.text(0);
    }
    if (!known) addNodeEventLocked({h.hostname, now, "agent_seen", "agent " + h.agent_id, ""});
    else if (!h.boot_id.empty() && !old_boot.empty() && old_boot != h.boot_id)
      addNodeEventLocked({h.hostname, now, "boot", "boot " + old_boot + " -> " + h.boot_id, ""});
    std::optional<Stmt> st;
    auto& n = prepare(st,
                      "INSERT INTO nodes(hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, symptoms) "
                      "VALUES(?1,?2,?3,?4,?4,?5) ON CONFLICT(hostname) DO UPDATE SET agent_id=?2, "
                      "boot_id=CASE WHEN ?3 = '' THEN nodes.boot_id ELSE ?3 END, last_seen_ns=?4, symptoms=nodes.symptoms+?5");
    n.bind(1, h.hostname).bind(2, h.agent_id).bind(3, h.boot_id).bind(4, now).bind(5, int64_t(batch.symptoms.size()));
    if (n.step() != sql::kDone) return false;
  }
  for (const auto& c : batch.sources) {
    std::optional<Stmt> st;
    auto& src = prepare(st,
                        "INSERT INTO source_status(node, source, format, status, reason, records, skipped, updated_ns) "
                        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8) ON CONFLICT(node, source) DO UPDATE SET format=?3, "
                        "status=?4, reason=?5, records=?6, skipped=?7, updated_ns=?8");
    src.bind(1, h.hostname).bind(2, c.source).bind(3, c.format).bind(4, c.status).bind(5, c.reason);
    src.bind(6, c.records).bind(7, c.skipped).bind(8, now).step();
  }
  return true;
}

IngestResult Store::ingestBatch(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  IngestResult r;
  const auto& h = batch.header;
  auto reject = rejectedResult;
  if (auto why = batchCheck(batch, authenticated_agent); !why.empty()) return reject(std::move(why));
  const int64_t now = clock_.nowNs();

  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began() || !holdSymptomWrites()) return reject("store: " + db_->errmsg());
  {
    Stmt owner(db_->get(), "SELECT agent_id FROM agents WHERE hostname = ?");
    owner.bind(1, h.hostname);
    if (owner.step() == sql::kRow && owner.text(0) != h.agent_id) return reject("hostname bound to another agent");
  }
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
  for (const auto& s : batch.symptoms) {
    ins.reset();
    ins.bind(1, h.agent_id).bind(2, h.boot_id).bind(3, h.sequence).bind(4, s.node).bind(5, s.rule_id);
    ins.bind(6, common::subDomainName(s.sub_domain)).bind(7, common::roleName(s.role));
    ins.bind(8, common::severityName(s.severity)).bind(9, s.device).bind(10, s.first_ns).bind(11, s.last_ns);
    ins.bind(12, int64_t(s.time_known)).bind(13, int64_t(s.count)).bind(14, now);
    ins.bind(15, symptomToJson(s).dump());
    if (ins.step() != sql::kRow) return reject("store: " + db_->errmsg());
    r.last_symptom_id = ins.i64(0);
    cache_.erase(r.last_symptom_id);  // not cached by this path: no older entry may answer for the id
    ins.reset();  // RETURNING: the statement is done (SQLite cannot commit under an open one)
  }
  if (!recordSenderLocked(batch, now) || !insertUnmatchedTemplates(*db_, {&batch}, now))
    return reject("store: " + db_->errmsg());
  std::string err;
  if (!tx.commit(&err)) return reject("store: " + err);
  r.status = IngestResult::Status::kStored;
  r.symptoms = batch.symptoms.size();
  return r;
}

IngestResult Store::ingestBatchGrouped(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  return ingestBatches({{&batch, authenticated_agent}})[0];
}

bool Store::recordHeartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason) {
  if (hb.agent_id.empty() || hb.hostname.empty()) {
    *reason = "missing agent id or hostname";
    return false;
  }
  if (hb.agent_id != authenticated_agent) {
    *reason = "agent id mismatch";
    return false;
  }
  const int64_t now = clock_.nowNs();
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *reason = "store: " + db_->errmsg();
    return false;
  }
  {
    Stmt owner(db_->get(), "SELECT agent_id FROM agents WHERE hostname = ?");
    owner.bind(1, hb.hostname);
    if (owner.step() == sql::kRow && owner.text(0) != hb.agent_id) {
      *reason = "hostname bound to another agent";
      return false;
    }
  }
  Stmt a(db_->get(),
         "INSERT INTO agents(agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, last_seen_ns, "
         "last_heartbeat_ns, reported_ns, started_ns, spool_batches, spool_bytes, dropped_symptoms, next_sequence) "
         "VALUES(?1,?2,?3,?4,?5,?6,?6,?6,?7,?8,?9,?10,?11,?12) ON CONFLICT(agent_id) DO UPDATE SET boot_id=?3, "
         "agent_version=?4, ruleset_version=?5, last_seen_ns=?6, last_heartbeat_ns=?6, reported_ns=CASE WHEN agents.reported_ns > ?7 THEN agents.reported_ns ELSE ?7 END, "
         "started_ns=?8, spool_batches=?9, spool_bytes=?10, dropped_symptoms=?11, next_sequence=?12");
  a.bind(1, hb.agent_id).bind(2, hb.hostname).bind(3, hb.boot_id).bind(4, hb.agent_version);
  a.bind(5, hb.ruleset_version).bind(6, now).bind(7, hb.created_ns).bind(8, hb.started_ns);
  a.bind(9, hb.spool_batches).bind(10, hb.spool_bytes).bind(11, hb.dropped_symptoms).bind(12, hb.next_sequence);
  if (a.step() != sql::kDone) {
    *reason = "store: " + db_->errmsg();
    return false;
  }
  Stmt prev(db_->get(), "SELECT boot_id FROM nodes WHERE hostname = ?");
  prev.bind(1, hb.hostname);
  bool known = prev.step() == sql::kRow;
  std::string old_boot = known ? prev.text(0) : "";
  if (!known) addNodeEventLocked({hb.hostname, now, "agent_seen", "agent " + hb.agent_id, ""});
  else if (!hb.boot_id.empty() && !old_boot.empty() && old_boot != hb.boot_id)
    addNodeEventLocked({hb.hostname, now, "boot", "boot " + old_boot + " -> " + hb.boot_id, ""});
  // The node has reported everything up to created_ns only if nothing is left in its spool.
  Stmt n(db_->get(),
         "INSERT INTO nodes(hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, last_heartbeat_ns, reported_ns, "
         "spool_batches) VALUES(?1,?2,?3,?4,?4,?4,?5,?6) ON CONFLICT(hostname) DO UPDATE SET agent_id=?2, "
         "boot_id=CASE WHEN ?3 = '' THEN nodes.boot_id ELSE ?3 END, last_seen_ns=?4, last_heartbeat_ns=?4, "
         "reported_ns=CASE WHEN ?6 = 0 AND ?5 > nodes.reported_ns THEN ?5 ELSE nodes.reported_ns END, spool_batches=?6");
  n.bind(1, hb.hostname).bind(2, hb.agent_id).bind(3, hb.boot_id).bind(4, now).bind(5, hb.created_ns);
  n.bind(6, hb.spool_batches);
  if (n.step() != sql::kDone) {
    *reason = "store: " + db_->errmsg();
    return false;
  }
  for (const auto& src : hb.sources) {
    Stmt old(db_->get(), "SELECT status FROM source_status WHERE node = ? AND source = ?");
    old.bind(1, hb.hostname).bind(2, src.source);
    std::string old_status = old.step() == sql::kRow ? old.text(0) : "";
    if (old_status != src.status && !(old_status.empty() && src.status == "ok"))
      addNodeEventLocked({hb.hostname, now, "source",
                          src.source + ": " + src.status + (src.reason.empty() ? "" : " (" + src.reason + ")"), ""});
    Stmt s(db_->get(),
           "INSERT INTO source_status(node, source, format, status, reason, records, skipped, lost, updated_ns) "
           "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9) ON CONFLICT(node, source) DO UPDATE SET format=?3, status=?4, "
           "reason=?5, records=?6, skipped=?7, lost=?8, updated_ns=?9");
    s.bind(1, hb.hostname).bind(2, src.source).bind(3, src.format).bind(4, src.status).bind(5, src.reason);
    s.bind(6, src.records).bind(7, src.skipped).bind(8, src.lost).bind(9, now).step();
  }
  if (hb.inventory && !putInventoryLocked(hb.hostname, hb.agent_id, *hb.inventory, now)) {
    *reason = "store: " + db_->errmsg();
    return false;
  }
  std::string err;
  if (!tx.commit(&err)) {
    *reason = "store: " + err;
    return false;
  }
  return true;
}

// ---- jobs ----

namespace {

constexpr const char* kJobColumns =
    "job_id, state, terminal_state, exit_code, start_ns, end_ns, nodelist, time_limit_sec, ntasks_per_node, "
    "source, updated_ns, end_recorded_ns, site, name, user_name, partition_name";

JobRow jobFromRow(Stmt& s, sql::Db* db) {
  JobRow j;
  j.info.job_id = s.text(0);
  j.info.state = s.text(1);
  j.terminal_state = s.text(2);
  j.info.exit_code = s.text(3);
  j.info.start_ns = s.i64(4);
  j.info.end_ns = s.i64(5);
  j.nodelist = s.text(6);
  j.info.time_limit_sec = s.i64(7);
  j.info.ntasks_per_node = static_cast<int>(s.i64(8));
  j.source = s.text(9);
  j.updated_ns = s.i64(10);
  j.end_recorded_ns = s.i64(11);
  j.site = s.text(12);
  j.workload = {s.text(13), s.text(14), s.text(15)};
  Stmt n(db, "SELECT node FROM job_nodes WHERE job_id = ? ORDER BY position");
  n.bind(1, j.info.job_id);
  while (n.step() == sql::kRow) j.info.nodes.push_back(n.text(0));
  common::deriveRanks(j.info);
  return j;
}

}  // namespace

std::optional<JobRow> Store::jobLocked(const std::string& job_id) {
  Stmt s(db_->get(), fmt::format("SELECT {} FROM jobs WHERE job_id = ?", kJobColumns));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return jobFromRow(s, db_->get());
}

std::optional<JobRow> Store::job(const std::string& job_id) {
  Lock lock(*this);
  return jobLocked(job_id);
}

std::vector<std::string> Store::relayedJobIds(const std::string& local_id, size_t limit) {
  std::vector<std::string> out;
  if (!validJobId(local_id)) return out;  // no '%' or '_' beyond what an id may hold
  Lock lock(*this);
  // '_' is a LIKE wildcard and may be in an id: the suffix is compared exactly below.
  Stmt s(db_->get(), "SELECT job_id FROM jobs WHERE site <> '' AND job_id LIKE ? ORDER BY job_id LIMIT ?");
  s.bind(1, "%:" + local_id).bind(2, static_cast<int64_t>(limit) * 4);
  const std::string suffix = ":" + local_id;
  while (s.step() == sql::kRow && out.size() < limit) {
    std::string id = s.text(0);
    if (id.size() > suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(std::move(id));
  }
  return out;
}

std::optional<JobRow> Store::recordJob(const JobUpdate& u, std::string* error) {
  if (!validJobId(u.job_id)) {
    *error = "bad job id '" + u.job_id + "'";
    return std::nullopt;
  }
  std::vector<std::string> nodes = u.nodes;
  if (nodes.empty() && !u.nodelist.empty()) {
    std::string err;
    auto hosts = common::expandHostlist(u.nodelist, &err, 100000);
    if (!hosts) {
      *error = "bad node list '" + u.nodelist + "': " + err;
      return std::nullopt;
    }
    nodes = *hosts;
  }
  if (u.start_ns < 0 || u.end_ns < 0) {
    *error = "negative time";
    return std::nullopt;
  }
  const int64_t now = clock_.nowNs();
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  JobRow row;
  if (auto old = jobLocked(u.job_id)) row = std::move(*old);
  row.info.job_id = u.job_id;
  if (!u.state.empty()) {
    // A late "start" (RUNNING) never reopens a job that has ended.
    if (!(isActiveJobState(u.state) && row.ended())) {
      row.info.state = u.state;
      row.terminal_state = isActiveJobState(u.state) ? "" : common::terminalStateOf(u.state);
    }
  }
  if (!u.exit_code.empty()) row.info.exit_code = u.exit_code;
  if (u.start_ns) row.info.start_ns = u.start_ns;
  if (u.end_ns) row.info.end_ns = u.end_ns;
  if (row.ended() && !row.info.end_ns) row.info.end_ns = now;
  if (row.ended() && !row.end_recorded_ns) row.end_recorded_ns = now;
  if (row.info.start_ns && row.info.end_ns && row.info.end_ns < row.info.start_ns) {
    *error = "job ends before it starts";
    return std::nullopt;
  }
  if (u.time_limit_sec) row.info.time_limit_sec = u.time_limit_sec;
  if (u.ntasks_per_node) row.info.ntasks_per_node = u.ntasks_per_node;
  if (!nodes.empty()) {
    row.info.nodes = nodes;
    row.nodelist = u.nodelist.empty() ? fmt::format("{}", fmt::join(nodes, ",")) : u.nodelist;
  }
  for (auto [to, from] : {std::pair{&row.workload.name, &u.workload.name}, {&row.workload.user, &u.workload.user},
                          {&row.workload.partition, &u.workload.partition}})
    if (!from->empty()) *to = *from;
  row.source = u.source;
  row.updated_ns = now;
  Stmt s(db_->get(),
         "INSERT INTO jobs(job_id, state, terminal_state, exit_code, start_ns, end_ns, nodelist, time_limit_sec, "
         "ntasks_per_node, source, updated_ns, end_recorded_ns, name, user_name, partition_name) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) "
         "ON CONFLICT(job_id) DO UPDATE SET state=?2, terminal_state=?3, exit_code=?4, start_ns=?5, end_ns=?6, "
         "nodelist=?7, time_limit_sec=?8, ntasks_per_node=?9, source=?10, updated_ns=?11, end_recorded_ns=?12, "
         "name=?13, user_name=?14, partition_name=?15");
  s.bind(1, row.info.job_id).bind(2, row.info.state).bind(3, row.terminal_state).bind(4, row.info.exit_code);
  s.bind(5, row.info.start_ns).bind(6, row.info.end_ns).bind(7, row.nodelist).bind(8, row.info.time_limit_sec);
  s.bind(9, int64_t(row.info.ntasks_per_node)).bind(10, row.source).bind(11, now).bind(12, row.end_recorded_ns);
  s.bind(13, row.workload.name).bind(14, row.workload.user).bind(15, row.workload.partition);
  if (s.step() != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  if (!nodes.empty()) {
    Stmt del(db_->get(), "DELETE FROM job_nodes WHERE job_id = ?");
    del.bind(1, u.job_id).step();
    Stmt ins(db_->get(), "INSERT INTO job_nodes(node, job_id, position) VALUES(?,?,?) ON CONFLICT DO NOTHING");
    for (size_t i = 0; i < nodes.size(); ++i) {
      ins.reset();
      ins.bind(1, nodes[i]).bind(2, u.job_id).bind(3, int64_t(i)).step();
    }
  }
  std::string err;
  if (!tx.commit(&err)) {
    *error = "store: " + err;
    return std::nullopt;
  }
  auto merged = jobLocked(u.job_id);
  if (merged) merged->end_recorded_ns = row.end_recorded_ns;
  return merged;
}

std::vector<JobRow> Store::jobs(const JobFilter& f) {
  Lock lock(*this);
  // Optional filters as "(?n = '' OR ...)": the SQL text never depends on the data.
  Stmt s(db_->get(),
         fmt::format(
             "SELECT {} FROM jobs j WHERE (?1 = 0 OR (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) >= ?1) "
             "AND (?2 = '' OR (?2 = 'running' AND j.terminal_state = '') OR (?2 = 'failed' AND j.terminal_state "
             "NOT IN ('', 'success')) OR j.terminal_state = ?2 OR j.state = ?2) "
             "AND (?3 = '' OR EXISTS (SELECT 1 FROM verdicts v WHERE v.job_id = j.job_id AND v.latest = 1 AND "
             "v.sub_domain = ?3)) "
             "AND (?4 = '' OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.node = ?4 AND n.job_id = j.job_id)) "
             "ORDER BY CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END DESC, j.job_id LIMIT ?5",
             kJobColumns));
  s.bind(1, f.since_ns).bind(2, f.state).bind(3, f.sub_domain).bind(4, f.node).bind(5, int64_t(f.limit));
  std::vector<JobRow> out;
  while (s.step() == sql::kRow) out.push_back(jobFromRow(s, db_->get()));
  return out;
}

std::vector<JobRow> Store::jobsAwaitingVerdict(size_t limit) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM jobs j WHERE j.terminal_state NOT IN ('', 'success') AND j.site = '' AND NOT "
                                 "EXISTS (SELECT 1 FROM verdicts v WHERE v.job_id = j.job_id) "
                                 "ORDER BY j.end_ns, j.job_id LIMIT ?",
                                 kJobColumns));
  s.bind(1, int64_t(limit));
  std::vector<JobRow> out;
  while (s.step() == sql::kRow) out.push_back(jobFromRow(s, db_->get()));
  return out;
}

std::vector<std::string> Store::jobsAt(const std::string& node, int64_t from_ns, int64_t to_ns, int64_t pre_ns,
                                       int64_t post_ns, const std::string& site) {
  Lock lock(*this);
  // Kept: a tick asks once per node with new symptoms (9,800 times in a 10,000-node cascade's
  // tick), and preparing the join was nine tenths of each call.
  Stmt s(*db_,
         "SELECT j.job_id FROM job_nodes n JOIN jobs j ON j.job_id = n.job_id WHERE n.node = ?1 "
         "AND (j.start_ns = 0 OR j.start_ns - ?4 <= ?3) AND (j.end_ns = 0 OR j.end_ns + ?5 >= ?2) "
         "AND (j.start_ns > 0 OR j.end_ns > 0) AND j.site = ?6 ORDER BY j.start_ns, j.job_id");
  s.bind(1, node).bind(2, from_ns).bind(3, to_ns).bind(4, pre_ns).bind(5, post_ns).bind(6, site);
  std::vector<std::string> out;
  while (s.step() == sql::kRow) out.push_back(s.text(0));
  return out;
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
}  // namespace

std::string windowQuery(std::string_view columns, std::string_view node_set) {
  return fmt::format(
      "SELECT {} FROM symptoms WHERE node IN {} AND ((time_known = 1 AND last_ns >= ?2 AND first_ns <= ?3) OR "
      "(time_known = 0 AND received_ns >= ?2 AND received_ns <= ?4)) ORDER BY node",
      columns, node_set);
}

std::vector<common::Symptom> Store::symptomsForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                      int64_t to_ns, int64_t to_received_ns, int64_t* max_id) {
  Lock lock(*this);
  // In node order; id order within a node is restored below (ORDER BY node, id made SQLite sort
  // every node's rows, payloads and all, in a temporary b-tree: a fifth of the read).
  const std::string node_set = db_->jsonList(1);
  auto bindWindow = [&](Stmt& s) {
    s.bind(1, joinJsonArray(nodes)).bind(2, from_ns).bind(3, to_ns).bind(4, to_received_ns);
  };
  std::vector<common::Symptom> out;
  std::vector<int64_t> ids;
  std::vector<size_t> node_starts;  // where each node's rows begin in `out`
  std::string last_node;
  auto row = [&](int64_t id, std::string_view node) {
    ids.push_back(id);
    if (node_starts.empty() || node != last_node) {
      node_starts.push_back(ids.size() - 1);
      last_node = node;
    }
  };
  // Decoding the payloads is most of the cost (a 10,000-node job has ~200k): the cache holds
  // what this process stored lately, decoded. Which rows belong is still the query's answer:
  // their ids first, then the payloads of those the cache lacks.
  std::vector<size_t> missing;  // positions in `out` whose symptom the cache lacks
  std::vector<std::string> raw;
  if (cache_.size() > 0) {
    Stmt s(db_->get(), windowQuery("id, node", node_set));
    bindWindow(s);
    std::vector<const common::Symptom*> cached;
    while (s.step() == sql::kRow) {
      row(s.i64(0), s.view(1));
      cached.push_back(cache_.find(ids.back()));
      if (!cached.back()) missing.push_back(cached.size() - 1);
    }
    out.resize(cached.size());
    parallelFor(cached.size(), [&](size_t i) {
      if (cached[i]) out[i] = *cached[i];
    });
    if (!missing.empty()) {
      // Their payloads by id, a chunk of ids at a time.
      std::unordered_map<int64_t, size_t> at;
      for (size_t m : missing) at.emplace(ids[m], m);
      std::vector<size_t> slot;
      for (size_t i = 0; i < missing.size();) {
        const size_t n = std::min<size_t>(missing.size() - i, 8192);
        std::string list = "[";
        for (size_t k = 0; k < n; ++k) list += (k ? "," : "") + std::to_string(ids[missing[i + k]]);
        list += "]";
        Stmt p(db_->get(), fmt::format("SELECT id, payload FROM symptoms WHERE id IN {}", db_->jsonIntList(1)));
        p.bind(1, list);
        raw.clear();
        slot.clear();
        while (p.step() == sql::kRow) {
          auto it = at.find(p.i64(0));
          if (it == at.end()) continue;
          slot.push_back(it->second);
          at.erase(it);
          raw.emplace_back(p.view(1));
        }
        parallelFor(raw.size(), [&](size_t k) { out[slot[k]] = forCorrelation(symptomFromPayload(raw[k])); });
        i += n;
      }
      // A row deleted between the two reads (no snapshot spans them on PostgreSQL) is left out,
      // as if the first read had come after the delete.
      if (!at.empty()) {
        size_t kept = 0;
        std::vector<size_t> starts;
        for (size_t i = 0, g = 0; i < ids.size(); ++i) {
          while (g < node_starts.size() && node_starts[g] == i) {
            if (starts.empty() || starts.back() != kept) starts.push_back(kept);  // a node all gone: no range
            ++g;
          }
          if (at.count(ids[i])) continue;
          ids[kept] = ids[i];
          if (kept != i) out[kept] = std::move(out[i]);
          ++kept;
        }
        ids.resize(kept);
        out.resize(kept);
        node_starts = std::move(starts);
      }
    }
  } else {
    Stmt s(db_->get(), windowQuery("id, node, payload", node_set));
    bindWindow(s);
    // A chunk of payloads read, decoded on every core, the next read: the chunk bounds the copies.
    constexpr size_t kChunk = 8192;
    bool more = true;
    while (more) {
      raw.clear();
      while (raw.size() < kChunk && (more = s.step() == sql::kRow)) {
        row(s.i64(0), s.view(1));
        raw.emplace_back(s.view(2));
      }
      if (raw.empty()) break;
      const size_t base = out.size();
      out.resize(base + raw.size());
      parallelFor(raw.size(), [&](size_t k) { out[base + k] = forCorrelation(symptomFromPayload(raw[k])); });
    }
  }
  int64_t hi = 0;
  for (int64_t id : ids) hi = std::max(hi, id);
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
  if (max_id) *max_id = hi;
  return out;
}

// ---- job output ----

bool Store::putJobOutput(const JobOutput& o, std::string* error) {
  json cov = common::toJson(o.coverage);
  json symptoms = json::array();
  for (const auto& x : o.symptoms) symptoms.push_back(symptomToJson(x));
  Lock lock(*this);
  // A repeated upload replaces the row with a new one: its id only grows (the verdict engine's
  // watermark sees it).
  sql::Transaction tx(*db_);
  Stmt del(db_->get(), "DELETE FROM job_outputs WHERE job_id = ? AND source = ?");
  del.bind(1, o.job_id).bind(2, o.source);
  if (!tx.began() || del.step() != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return false;
  }
  Stmt s(db_->get(),
         "INSERT INTO job_outputs(job_id, source, received_ns, coverage, symptoms, unmatched) VALUES(?,?,?,?,?,?)");
  s.bind(1, o.job_id).bind(2, o.source).bind(3, o.received_ns ? o.received_ns : clock_.nowNs());
  s.bind(4, cov.dump(-1, ' ', false, json::error_handler_t::replace));
  s.bind(5, symptoms.dump(-1, ' ', false, json::error_handler_t::replace));
  s.bind(6, outputTemplatesToJson(o.unmatched).dump(-1, ' ', false, json::error_handler_t::replace));
  std::string err;
  if (s.step() != sql::kDone || !tx.commit(&err)) {
    *error = "store: " + (err.empty() ? db_->errmsg() : err);
    return false;
  }
  return true;
}

std::vector<JobOutput> Store::jobOutputs(const std::string& job_id) {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT source, received_ns, coverage, symptoms, unmatched FROM job_outputs WHERE job_id = ? ORDER BY source");
  s.bind(1, job_id);
  std::vector<JobOutput> out;
  while (s.step() == sql::kRow) {
    JobOutput o;
    o.job_id = job_id;
    o.source = s.text(0);
    o.received_ns = s.i64(1);
    json c = json::parse(s.text(2), nullptr, false);
    if (c.is_object()) o.coverage = common::coverageFromJson(c);
    json list = json::parse(s.text(3), nullptr, false);
    if (list.is_array())
      for (const auto& j : list)
        if (j.is_object()) o.symptoms.push_back(symptomFromJson(j));
    std::string why;
    if (auto t = outputTemplatesFromJson(json::parse(s.view(4), nullptr, false), &why)) o.unmatched = std::move(*t);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<std::string> Store::jobsWithOutputSince(int64_t after_id, int64_t* newest_id) {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT job_id, MAX(id) FROM job_outputs WHERE id > ? GROUP BY job_id");
  s.bind(1, after_id);
  std::vector<std::string> out;
  *newest_id = after_id;
  while (s.step() == sql::kRow) {
    out.push_back(s.text(0));
    *newest_id = std::max(*newest_id, s.i64(1));
  }
  return out;
}

std::vector<StoredSymptom> Store::symptoms(const SymptomFilter& f) {
  Lock lock(*this);
  std::string rule = f.rule_id;
  bool prefix = !rule.empty() && rule.back() == '*';
  if (prefix) rule.pop_back();
  Stmt s(db_->get(),
         fmt::format("SELECT id, agent_id, received_ns, payload FROM symptoms WHERE "
                     "(?1 = '[]' OR node IN {}) "
                     "AND (?2 = '' OR (?3 = 0 AND rule_id = ?2) OR (?3 = 1 AND substr(rule_id, 1, length(?2)) = ?2)) "
                     "AND (?4 = 0 OR (CASE WHEN time_known = 1 THEN last_ns ELSE received_ns END) >= ?4) "
                     "AND (?5 = 0 OR (CASE WHEN time_known = 1 THEN first_ns ELSE received_ns END) <= ?5) "
                     "AND id > ?6 ORDER BY id DESC LIMIT ?7",
                     db_->jsonList(1)));
  s.bind(1, joinJsonArray(f.nodes)).bind(2, rule).bind(3, int64_t(prefix)).bind(4, f.since_ns);
  s.bind(5, f.until_ns).bind(6, f.after_id).bind(7, int64_t(f.limit));
  std::vector<StoredSymptom> out;
  while (s.step() == sql::kRow)
    out.push_back({s.i64(0), s.text(1), s.i64(2), symptomFromJson(json::parse(s.text(3), nullptr, false))});
  return out;
}

std::vector<Store::NewSymptomSpan> Store::symptomsSince(int64_t after_id, int64_t upto_id) {
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

bool Store::holdSymptomWrites(std::string* error) {
  return !db_->postgres() || db_->exec("SELECT pg_advisory_xact_lock_shared(7146603)", error);
}

int64_t Store::settledSymptomId() {
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

int64_t Store::maxSymptomId() {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT COALESCE(MAX(id), 0) FROM symptoms");
  return s.step() == sql::kRow ? s.i64(0) : 0;
}

// ---- verdicts ----

namespace {

constexpr const char* kVerdictColumns =
    "job_id, revision, created_ns, status, reason, max_symptom_id, symptoms, missing_nodes, diagnosis";

VerdictRow verdictFromRow(Stmt& s) {
  VerdictRow v;
  v.job_id = s.text(0);
  v.revision = static_cast<int>(s.i64(1));
  v.created_ns = s.i64(2);
  v.status = s.text(3);
  v.reason = s.text(4);
  v.max_symptom_id = s.i64(5);
  v.symptoms = static_cast<size_t>(s.i64(6));
  v.missing_nodes = parseJsonArray(s.text(7));
  std::string err;
  if (auto d = common::diagnosisFromJson(json::parse(s.text(8), nullptr, false), &err)) v.diagnosis = std::move(*d);
  return v;
}

}  // namespace

int Store::addVerdict(const VerdictRow& v, std::string* error) {
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return 0;
  }
  Stmt max(db_->get(), "SELECT COALESCE(MAX(revision), 0) FROM verdicts WHERE job_id = ?");
  max.bind(1, v.job_id);
  int revision = max.step() == sql::kRow ? static_cast<int>(max.i64(0)) + 1 : 1;
  Stmt old(db_->get(), "UPDATE verdicts SET latest = 0 WHERE job_id = ? AND latest = 1");
  old.bind(1, v.job_id).step();
  Stmt ins(db_->get(),
           "INSERT INTO verdicts(job_id, revision, created_ns, status, reason, sub_domain, max_symptom_id, symptoms, "
           "missing_nodes, diagnosis, latest) VALUES(?,?,?,?,?,?,?,?,?,?,1)");
  ins.bind(1, v.job_id).bind(2, int64_t(revision)).bind(3, v.created_ns).bind(4, v.status).bind(5, v.reason);
  ins.bind(6, common::subDomainName(v.diagnosis.sub_domain)).bind(7, v.max_symptom_id).bind(8, int64_t(v.symptoms));
  ins.bind(9, joinJsonArray(v.missing_nodes)).bind(10, common::toJson(v.diagnosis).dump());
  if (ins.step() != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return 0;
  }
  // Node history: which nodes this revision blames (only the first revision and changes matter
  // to an operator, but keeping each is cheap and shows how the verdict moved).
  for (const auto& r : v.diagnosis.responsible)
    addNodeEventLocked({r.node, v.created_ns, "blamed",
                        fmt::format("{} r{} {}{}", common::subDomainName(v.diagnosis.sub_domain), revision,
                                    v.diagnosis.cause ? v.diagnosis.cause->rule_id : "",
                                    r.device.empty() ? "" : " " + r.device),
                        v.job_id});
  if (!tx.commit(error)) return 0;
  return revision;
}

std::optional<VerdictRow> Store::latestVerdict(const std::string& job_id) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM verdicts WHERE job_id = ? AND latest = 1", kVerdictColumns));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return verdictFromRow(s);
}

std::vector<VerdictRow> Store::verdictHistory(const std::string& job_id) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM verdicts WHERE job_id = ? ORDER BY revision", kVerdictColumns));
  s.bind(1, job_id);
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

std::vector<VerdictRow> Store::openVerdicts() {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM verdicts v WHERE latest = 1 AND status = 'provisional' AND NOT "
                                 "EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = v.job_id AND j.site != '') "
                                 "ORDER BY job_id",
                                 kVerdictColumns));
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

namespace {
VerdictHead verdictHeadFromRow(Stmt& s) {
  return {s.text(0), static_cast<int>(s.i64(1)), s.i64(2), s.text(3), s.i64(4), static_cast<size_t>(s.i64(5)),
          s.isNull(6) ? std::string() : s.text(6)};
}
}  // namespace

std::optional<VerdictHead> Store::latestVerdictHead(const std::string& job_id) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT job_id, revision, created_ns, status, max_symptom_id, symptoms, {} FROM "
                                 "verdicts WHERE job_id = ? AND latest = 1",
                                 db_->jsonText("diagnosis", "terminal_state")));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return verdictHeadFromRow(s);
}

std::vector<VerdictHead> Store::openVerdictHeads() {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT job_id, revision, created_ns, status, max_symptom_id, symptoms, {} FROM "
                                 "verdicts v WHERE latest = 1 AND status = 'provisional' AND NOT EXISTS (SELECT 1 "
                                 "FROM jobs j WHERE j.job_id = v.job_id AND j.site != '') ORDER BY job_id",
                                 db_->jsonText("diagnosis", "terminal_state")));
  std::vector<VerdictHead> out;
  while (s.step() == sql::kRow) out.push_back(verdictHeadFromRow(s));
  return out;
}

std::vector<VerdictRow> Store::latestVerdicts(int64_t since_ns, int64_t until_ns) {
  Lock lock(*this);
  Stmt s(db_->get(),
         fmt::format("SELECT {} FROM verdicts v WHERE v.latest = 1 AND EXISTS (SELECT 1 FROM jobs j WHERE "
                     "j.job_id = v.job_id AND j.end_ns >= ?1 AND (?2 = 0 OR j.end_ns <= ?2)) ORDER BY v.job_id",
                     "v.job_id, v.revision, v.created_ns, v.status, v.reason, v.max_symptom_id, v.symptoms, "
                     "v.missing_nodes, v.diagnosis"));
  s.bind(1, since_ns).bind(2, until_ns);
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

// ---- agents and nodes ----

std::vector<SourceStatusInfo> Store::sourcesLocked(const std::string& node) {
  Stmt s(db_->get(),
         "SELECT source, format, status, reason, records, skipped, lost FROM source_status WHERE node = ? "
         "ORDER BY source");
  s.bind(1, node);
  std::vector<SourceStatusInfo> out;
  while (s.step() == sql::kRow)
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), uint64_t(s.i64(4)), uint64_t(s.i64(5)),
                   uint64_t(s.i64(6))});
  return out;
}

std::vector<AgentRow> Store::agents() {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, last_seen_ns, "
         "last_heartbeat_ns, last_batch_ns, reported_ns, started_ns, spool_batches, spool_bytes, dropped_symptoms, "
         "next_sequence, batches, symptoms FROM agents ORDER BY hostname");
  std::vector<AgentRow> out;
  while (s.step() == sql::kRow) {
    AgentRow a;
    a.agent_id = s.text(0);
    a.hostname = s.text(1);
    a.boot_id = s.text(2);
    a.agent_version = s.text(3);
    a.ruleset_version = s.text(4);
    a.first_seen_ns = s.i64(5);
    a.last_seen_ns = s.i64(6);
    a.last_heartbeat_ns = s.i64(7);
    a.last_batch_ns = s.i64(8);
    a.reported_ns = s.i64(9);
    a.started_ns = s.i64(10);
    a.spool_batches = s.i64(11);
    a.spool_bytes = s.i64(12);
    a.dropped_symptoms = s.i64(13);
    a.next_sequence = s.i64(14);
    a.batches = s.i64(15);
    a.symptoms = s.i64(16);
    out.push_back(std::move(a));
  }
  for (auto& a : out) a.sources = sourcesLocked(a.hostname);
  return out;
}

namespace {
constexpr const char* kNodeColumns =
    "hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, last_heartbeat_ns, reported_ns, spool_batches, symptoms";
NodeRow nodeFromRow(Stmt& s) {
  NodeRow n;
  n.hostname = s.text(0);
  n.agent_id = s.text(1);
  n.boot_id = s.text(2);
  n.first_seen_ns = s.i64(3);
  n.last_seen_ns = s.i64(4);
  n.last_heartbeat_ns = s.i64(5);
  n.reported_ns = s.i64(6);
  n.spool_batches = s.i64(7);
  n.symptoms = s.i64(8);
  return n;
}
}  // namespace

std::vector<NodeRow> Store::nodes() {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes ORDER BY hostname", kNodeColumns));
  std::vector<NodeRow> out;
  while (s.step() == sql::kRow) out.push_back(nodeFromRow(s));
  for (auto& n : out) n.sources = sourcesLocked(n.hostname);
  return out;
}

std::optional<NodeRow> Store::node(const std::string& hostname) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes WHERE hostname = ?", kNodeColumns));
  s.bind(1, hostname);
  if (s.step() != sql::kRow) return std::nullopt;
  NodeRow n = nodeFromRow(s);
  n.sources = sourcesLocked(hostname);
  return n;
}

std::map<std::string, NodeRow> Store::nodes(const std::vector<std::string>& hostnames) {
  Lock lock(*this);
  const std::string names = joinJsonArray(hostnames);
  std::map<std::string, NodeRow> out;
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes WHERE hostname IN {}", kNodeColumns, db_->jsonList(1)));
  s.bind(1, names);
  while (s.step() == sql::kRow) {
    NodeRow n = nodeFromRow(s);
    out.emplace(n.hostname, std::move(n));
  }
  Stmt src(db_->get(), fmt::format("SELECT node, source, format, status, reason, records, skipped, lost FROM "
                                   "source_status WHERE node IN {} ORDER BY node, source",
                                   db_->jsonList(1)));
  src.bind(1, names);
  while (src.step() == sql::kRow) {
    auto it = out.find(src.text(0));
    if (it == out.end()) continue;
    it->second.sources.push_back({src.text(1), src.text(2), src.text(3), src.text(4), uint64_t(src.i64(5)),
                                  uint64_t(src.i64(6)), uint64_t(src.i64(7))});
  }
  return out;
}

std::map<std::string, int64_t> Store::reportedUpTo(const std::vector<std::string>& hostnames) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT hostname, reported_ns FROM nodes WHERE hostname IN {}", db_->jsonList(1)));
  s.bind(1, joinJsonArray(hostnames));
  std::map<std::string, int64_t> out;
  while (s.step() == sql::kRow) out.emplace(s.text(0), s.i64(1));
  return out;
}

std::vector<NodeEvent> Store::nodeHistory(const std::string& hostname, int64_t since_ns, size_t limit) {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT node, time_ns, kind, detail, job_id FROM node_events WHERE node = ? AND time_ns >= ? "
         "ORDER BY time_ns DESC, id DESC LIMIT ?");
  s.bind(1, hostname).bind(2, since_ns).bind(3, int64_t(limit));
  std::vector<NodeEvent> out;
  while (s.step() == sql::kRow) out.push_back({s.text(0), s.i64(1), s.text(2), s.text(3), s.text(4)});
  return out;
}

int64_t Store::metaInt(const std::string& key, int64_t fallback) {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT value FROM meta WHERE key = ?");
  s.bind(1, key);
  return s.step() == sql::kRow ? s.i64(0) : fallback;
}

bool Store::setMetaInt(const std::string& key, int64_t value) {
  Lock lock(*this);
  Stmt s(db_->get(), "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2");
  s.bind(1, key).bind(2, value);
  return s.step() == sql::kDone;
}

size_t Store::pruneStep(int64_t cutoff_ns, int64_t job_cutoff_ns, size_t max_rows) {
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) return 0;
  size_t deleted = 0;
  // One table's step: its oldest eligible rows from the cursor on, in time order, and the cursor
  // moves to the newest time stamp deleted (rows sharing it may be left for the next step).
  // A symptom's id is also dropped from the cache: SQLite may give it to a new row.
  auto walk = [&](const char* q, int64_t cutoff, int64_t* from, bool symptoms = false) {
    if (deleted >= max_rows) return;
    Stmt s(db_->get(), q);
    s.bind(1, cutoff).bind(2, int64_t(max_rows - deleted)).bind(3, *from);
    int64_t newest = *from;
    int rc;
    while ((rc = s.step()) == sql::kRow) {
      ++deleted;
      newest = std::max(newest, s.i64(0));
      if (symptoms) cache_.erase(s.i64(1));
    }
    if (rc == sql::kDone) *from = newest;
  };
  walk("DELETE FROM symptoms WHERE id IN (SELECT id FROM symptoms WHERE received_ns >= ?3 AND received_ns < ?1 AND "
       "(time_known = 0 OR last_ns < ?1) ORDER BY received_ns LIMIT ?2) RETURNING received_ns, id",
       cutoff_ns, &prune_cursor_.symptoms, true);
  walk("DELETE FROM batches WHERE (agent_id, boot_id, sequence) IN (SELECT agent_id, boot_id, sequence FROM batches "
       "WHERE received_ns >= ?3 AND received_ns < ?1 ORDER BY received_ns LIMIT ?2) RETURNING received_ns",
       cutoff_ns, &prune_cursor_.batches);
  walk("DELETE FROM node_events WHERE id IN (SELECT id FROM node_events WHERE time_ns >= ?3 AND time_ns < ?1 "
       "ORDER BY time_ns LIMIT ?2) RETURNING time_ns",
       cutoff_ns, &prune_cursor_.node_events);
  walk("DELETE FROM unmatched_templates WHERE id IN (SELECT id FROM unmatched_templates WHERE received_ns >= ?3 AND "
       "received_ns < ?1 ORDER BY received_ns LIMIT ?2) RETURNING received_ns",
       cutoff_ns, &prune_cursor_.unmatched);
  auto run = [&](const char* q, int64_t cutoff) {
    if (deleted >= max_rows) return;
    Stmt s(db_->get(), q);
    s.bind(1, cutoff).bind(2, int64_t(max_rows - deleted));
    if (s.step() == sql::kDone) deleted += static_cast<size_t>(db_->changes());
  };
  if (deleted < max_rows) {
    Stmt old(db_->get(), "SELECT job_id FROM jobs WHERE end_ns > 0 AND end_ns < ? LIMIT ?");
    old.bind(1, job_cutoff_ns).bind(2, int64_t(std::max<size_t>(1, (max_rows - deleted) / 8)));
    std::vector<std::string> ids;
    while (old.step() == sql::kRow) ids.push_back(old.text(0));
    for (const auto& id : ids)
      for (const char* q : {"DELETE FROM verdicts WHERE job_id = ?", "DELETE FROM job_nodes WHERE job_id = ?",
                            "DELETE FROM job_outputs WHERE job_id = ?", "DELETE FROM jobs WHERE job_id = ?"}) {
        Stmt d(db_->get(), q);
        d.bind(1, id).step();
        deleted += static_cast<size_t>(db_->changes());
      }
  }
  // Outputs uploaded for a job the aggregator never learnt of.
  run("DELETE FROM job_outputs WHERE id IN (SELECT id FROM job_outputs WHERE received_ns < ?1 AND "
      "job_id NOT IN (SELECT job_id FROM jobs) LIMIT ?2)",
      job_cutoff_ns);
  if (!tx.commit()) {
    prune_cursor_ = {};  // rolled back: the next step looks again from the start
    return 0;
  }
  if (deleted < max_rows) prune_cursor_ = {};  // the pass is over
  return deleted;
}

bool Store::beginGroup(std::string* error) {
  // Fairness: std::mutex hands the lock to no one in particular; a thread that was waiting
  // while the last group ran gets it before the next group starts.
  for (int i = 0; i < 10'000 && othersWaiting(); ++i) std::this_thread::yield();
  mu_.lock();
  if (in_group_ || !db_->exec(db_->beginSql(), error) || !holdSymptomWrites(error)) {
    if (!in_group_ && db_->inTransaction()) db_->exec("ROLLBACK");
    if (in_group_ && error) *error = "store: group already open";
    mu_.unlock();
    return false;
  }
  in_group_ = true;
  return true;
}

bool Store::endGroup(std::string* error) {
  if (!in_group_) return false;  // not held by a group: nothing to unlock
  bool ok = !group_failed_ && db_->exec("COMMIT", error);
  if (group_failed_ && error) *error = "store: a write of the group failed";
  if (!ok) db_->exec("ROLLBACK");
  if (ok)
    for (auto& [id, sym] : cache_pending_) cache_.put(id, std::move(sym));
  cache_pending_.clear();
  in_group_ = false;
  group_failed_ = false;
  mu_.unlock();
  return ok;
}

StoreCounts Store::counts() {
  Lock lock(*this);
  StoreCounts c;
  auto one = [&](const char* q) {
    Stmt s(db_->get(), q);
    return s.step() == sql::kRow ? static_cast<uint64_t>(s.i64(0)) : 0;
  };
  c.agents = one("SELECT COUNT(*) FROM agents");
  c.nodes = one("SELECT COUNT(*) FROM nodes");
  c.symptoms = one("SELECT COUNT(*) FROM symptoms");
  c.batches = one("SELECT COUNT(*) FROM batches");
  c.jobs = one("SELECT COUNT(*) FROM jobs");
  c.verdicts = one("SELECT COUNT(*) FROM verdicts");
  return c;
}

}  // namespace faultline::aggregator
