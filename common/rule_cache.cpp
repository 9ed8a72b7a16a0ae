#include "common/rule_cache.h"

#include <fcntl.h>
#include <hs/hs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <type_traits>

#include <fmt/format.h>

#include "common/error_lexicon.h"
#include "common/parse/literal_scan.h"
#include "common/rule_engine.h"

namespace faultline::common {

namespace {

// Bump when the payload layout changes (a new field in Rule, Relation, SymptomMatcher, Symptom):
// an older file then reads as stale and is rebuilt.
constexpr uint32_t kFormat = 6;  // 2: one Vectorscan database (stream mode) instead of two; 3: without the one-byte triggers; 4: detection delays; 5: metric rules; 6: the error words' database
constexpr char kMagic[8] = {'F', 'L', 'R', 'U', 'L', 'E', 'S', '\n'};
constexpr size_t kHeader = 8 + 4 + 4 + 8 + 8 + 8;  // magic, format, reserved, key, payload length, checksum

// 64-bit hash, 8 bytes a step (FNV-1a per byte would cost ~2 ms over the 1.2 MB of shipped YAML).
uint64_t hashBytes(uint64_t h, std::string_view s) {
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  };
  h ^= s.size() * 0x9e3779b97f4a7c15ull;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x100000001b3ull;
  return mix(h);
}

// Writer and Reader offer the same calls, so one visit function per type (below) both writes and
// reads it: the field order cannot differ between the two.
class Writer {
 public:
  std::string out;
  void raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void f(uint32_t v) { raw(&v, 4); }
  void f(uint64_t v) { raw(&v, 8); }
  void f(double v) { raw(&v, 8); }
  void f(int v) { f(static_cast<uint32_t>(v)); }
  void f(int64_t v) { f(static_cast<uint64_t>(v)); }
  void f(bool v) { out.push_back(v ? 1 : 0); }
  void f(const std::string& s) {
    f(static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  void f(E v) {
    f(static_cast<uint32_t>(v));
  }
  template <class A, class B>
  void f(const std::pair<A, B>& p) {
    f(p.first);
    f(p.second);
  }
  template <class T>
  void f(const std::vector<T>& v) {
    f(static_cast<uint32_t>(v.size()));
    for (const auto& x : v) f(x);
  }
  void f(const std::map<std::string, std::string>& m) {
    f(static_cast<uint32_t>(m.size()));
    for (const auto& kv : m) f(kv);
  }
  template <class T, class Each>
  void list(const std::vector<T>& v, Each each) {
    f(static_cast<uint32_t>(v.size()));
    for (const auto& x : v) each(x);
  }
  template <class T, class Each>
  void opt(const std::optional<T>& o, Each each) {
    f(o.has_value());
    if (o) each(*o);
  }
};

// Every read checks the bytes left; the first failure sticks (ok() false) and the rest read zeros.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool atEnd() const { return in_.empty(); }
  void raw(void* dst, size_t n) {
    if (!ok_ || in_.size() < n) {
      ok_ = false;
      std::memset(dst, 0, n);
      return;
    }
    std::memcpy(dst, in_.data(), n);
    in_.remove_prefix(n);
  }
  void f(uint32_t& v) { raw(&v, 4); }
  void f(uint64_t& v) { raw(&v, 8); }
  void f(double& v) { raw(&v, 8); }
  void f(int& v) {
    uint32_t u;
    f(u);
    v = static_cast<int>(u);
  }
  void f(int64_t& v) {
    uint64_t u;
    f(u);
    v = static_cast<int64_t>(u);
  }
  void f(bool& v) {
    uint8_t b = 0;
    raw(&b, 1);
    if (b > 1) ok_ = false;
    v = b == 1;
  }
  void f(std::string& s) {
    std::string_view v = view(count());
    s.assign(v.data(), v.size());
  }
  template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  void f(E& v) {
    uint32_t u;
    f(u);
    if (u > enumMax(E{})) ok_ = false;
    v = static_cast<E>(ok_ ? u : 0);
  }
  template <class A, class B>
  void f(std::pair<A, B>& p) {
    f(p.first);
    f(p.second);
  }
  template <class T>
  void f(std::vector<T>& v) {
    list(v, [&](T& x) { f(x); });
  }
  void f(std::map<std::string, std::string>& m) {
    for (uint32_t n = count(); n > 0 && ok_; --n) {
      std::pair<std::string, std::string> kv;
      f(kv);
      m.insert(std::move(kv));
    }
  }
  template <class T, class Each>
  void list(std::vector<T>& v, Each each) {
    v.resize(count());
    for (auto& x : v) each(x);
  }
  template <class T, class Each>
  void opt(std::optional<T>& o, Each each) {
    bool has = false;
    f(has);
    if (has) each(o.emplace());
  }
  std::string_view view(uint64_t n) {
    if (!ok_ || n > in_.size()) {
      ok_ = false;
      return {};
    }
    auto v = in_.substr(0, n);
    in_.remove_prefix(n);
    return v;
  }

 private:
  // An element count or a length: more than the bytes left is garbage (and no huge allocation).
  uint32_t count() {
    uint32_t n = 0;
    f(n);
    if (n > in_.size()) ok_ = false;
    return ok_ ? n : 0;
  }
  static constexpr uint32_t enumMax(SubDomain) { return static_cast<uint32_t>(SubDomain::kUnattributed); }
  static constexpr uint32_t enumMax(Role) { return static_cast<uint32_t>(Role::kContext); }
  static constexpr uint32_t enumMax(Severity) { return static_cast<uint32_t>(Severity::kCritical); }
  static constexpr uint32_t enumMax(SourceKind) { return static_cast<uint32_t>(SourceKind::kMetric); }
  static constexpr uint32_t enumMax(MetricCondition) { return static_cast<uint32_t>(MetricCondition::kBitsSet); }
  static constexpr uint32_t enumMax(RelationEffect) { return static_cast<uint32_t>(RelationEffect::kLocates); }
  static constexpr uint32_t enumMax(RelationScope) { return static_cast<uint32_t>(RelationScope::kAnyNode); }
  std::string_view in_;
  bool ok_ = true;
};

// R is T (reading) or const T (writing). Every field but the compiled regex.
template <class IO, class R>
void visitRule(IO& io, R& r) {
  io.f(r.id), io.f(r.since), io.f(r.deprecated), io.f(r.pack), io.f(r.file), io.f(r.line);
  io.f(r.symptom), io.f(r.sub_domain), io.f(r.category), io.f(r.role), io.f(r.severity), io.f(r.priority);
  io.f(r.fallback_root), io.f(r.boot_settle_ns), io.f(r.detection_delay_ns), io.f(r.detection_delay_field),
  io.f(r.prefilters), io.f(r.pattern), io.f(r.sources);
  io.f(r.device_template), io.f(r.node_template), io.f(r.summary_template), io.f(r.meaning), io.f(r.action);
  io.f(r.fields), io.f(r.nvidia), io.f(r.match_examples), io.f(r.no_match_examples);
}

template <class IO, class M>
void visitMatcher(IO& io, M& m) {
  io.f(m.rules), io.f(m.not_rules), io.f(m.categories), io.f(m.sub_domains), io.f(m.not_sub_domains);
  io.f(m.roles), io.f(m.sources);
  io.opt(m.min_severity, [&](auto& s) { io.f(s); });
  io.f(m.fields), io.f(m.node_facts), io.f(m.fallback_only);
}

template <class IO, class S>
void visitSymptom(IO& io, S& s) {
  io.f(s.rule_id), io.f(s.symptom), io.f(s.sub_domain), io.f(s.category), io.f(s.role), io.f(s.severity);
  io.f(s.fallback_root), io.f(s.node), io.f(s.device), io.f(s.source), io.f(s.source_kind), io.f(s.first_ns);
  io.f(s.last_ns), io.f(s.time_known), io.f(s.count), io.f(s.evidence), io.f(s.fields), io.f(s.summary);
  io.f(s.boot_id);
}

template <class IO, class R>
void visitRelation(IO& io, R& r) {
  io.f(r.id), io.f(r.since), io.f(r.file), io.f(r.line), io.f(r.reason), io.f(r.effect);
  visitMatcher(io, r.symptom);
  io.opt(r.cause, [&](auto& m) { visitMatcher(io, m); });
  io.f(r.scope), io.f(r.cause_domain), io.f(r.before_ns), io.f(r.after_ns), io.f(r.same_fields);
  io.f(r.peer_field), io.f(r.plausible);
  io.opt(r.until, [&](auto& m) { visitMatcher(io, m); });
  io.list(r.examples, [&](auto& ex) {
    io.list(ex.symptoms, [&](auto& en) {
      io.f(en.name);
      visitSymptom(io, en.symptom);
    });
    io.f(ex.job_nodes), io.f(ex.job_start_offset_ns), io.f(ex.expect), io.f(ex.line);
  });
}

template <class IO, class R>
void visitMetricRule(IO& io, R& r) {
  io.f(r.id), io.f(r.since), io.f(r.pack), io.f(r.file), io.f(r.line), io.f(r.metric), io.f(r.expr), io.f(r.selector);
  io.f(r.node_labels), io.f(r.device_labels), io.f(r.condition), io.f(r.threshold), io.f(r.mask), io.f(r.for_ns), io.f(r.edge);
  io.f(r.as_rule), io.f(r.symptom), io.f(r.sub_domain), io.f(r.category), io.f(r.role), io.f(r.severity);
  io.f(r.summary_template), io.f(r.meaning), io.f(r.action);
  for (auto* list : {&r.match_examples, &r.no_match_examples})
    io.list(*list, [&](auto& ex) {
      io.f(ex.series), io.f(ex.samples), io.f(ex.expect_rule), io.f(ex.expect_node), io.f(ex.expect_device);
      io.f(ex.line);
    });
}

template <class IO, class S>
void visitRuleSet(IO& io, S& set) {
  io.f(set.version);
  io.list(set.rules, [&](auto& r) { visitRule(io, r); });
  io.list(set.relations, [&](auto& r) { visitRelation(io, r); });
  io.list(set.metric_rules, [&](auto& r) { visitMetricRule(io, r); });
}

std::string readFile(const std::string& path, bool* exists, std::string* error) {
  *exists = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR) {  // no file (or no directory): a miss
      *exists = true;
      *error = std::strerror(errno);
    }
    return {};
  }
  *exists = true;
  std::string out;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool writeFileAtomically(const std::string& path, std::string_view bytes, std::string* error) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = fmt::format("{}: {}", tmp, std::strerror(errno));
    return false;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = fmt::format("{}: {}", tmp, std::strerror(errno));
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = fmt::format("{}: {}", path, std::strerror(errno));
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

uint64_t ruleCacheKey(const RuleFilesRead& read) {
  uint64_t h = hashBytes(0x6661756c746c696eull, FAULTLINE_VERSION);
  h = hashBytes(h, std::to_string(kFormat));
  h = hashBytes(h, hs_version());
  h = hashBytes(h, read.base_version);
  for (const auto& f : read.files) {
    h = hashBytes(h, f.path);
    h = hashBytes(h, f.content);
  }
  return h;
}

std::string serializeRuleSet(const RuleSet& rules, uint64_t key) {
  Writer w;
  visitRuleSet(w, rules);
  // Each database: whether there is one, then its literals (expressions) and its blob.
  for (const auto* scanner : {rules.literal_scanner.get(), rules.error_words.get()}) {
    std::string blob = scanner ? scanner->serialize() : std::string();
    w.f(!blob.empty());
    if (blob.empty()) continue;
    w.f(scanner->literals());
    w.f(uint64_t{blob.size()});
    w.out += blob;
  }
  Writer h;
  h.raw(kMagic, sizeof kMagic);
  h.f(kFormat);
  h.f(uint32_t{0});
  h.f(key);
  h.f(uint64_t{w.out.size()});
  h.f(hashBytes(key, w.out));
  return h.out + w.out;
}

std::optional<RuleSet> deserializeRuleSet(std::string_view bytes, uint64_t key, std::string* error) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *error = bytes.size() < sizeof kMagic ? fmt::format("{} bytes, not a rule cache", bytes.size())
                                          : "not a rule cache (bad magic)";
    return std::nullopt;
  }
  Reader h(bytes.substr(sizeof kMagic, kHeader - sizeof kMagic));
  uint32_t format = 0, reserved = 0;
  uint64_t file_key = 0, length = 0, checksum = 0;
  h.f(format), h.f(reserved), h.f(file_key), h.f(length), h.f(checksum);
  if (format != kFormat || file_key != key) {
    *error = "stale";
    return std::nullopt;
  }
  std::string_view payload = bytes.substr(kHeader);
  if (payload.size() != length) {
    *error = fmt::format("truncated or overlong: {} payload bytes, the header says {}", payload.size(), length);
    return std::nullopt;
  }
  if (hashBytes(key, payload) != checksum) {
    *error = "checksum mismatch";
    return std::nullopt;
  }
  Reader rd(payload);
  RuleSet set;
  visitRuleSet(rd, set);
  bool has_scanner = false;
  rd.f(has_scanner);
  if (has_scanner) {
    std::vector<std::string> literals;
    uint64_t size = 0;
    rd.f(literals), rd.f(size);
    std::string_view blob = rd.view(size);
    if (rd.ok()) {
      if (literals != RuleEngine::literalsOf(set)) {
        *error = "its literal databases do not belong to its rules";
        return std::nullopt;
      }
      set.literal_scanner = LiteralScanner::fromSerialized(literals, blob, error);
      if (!set.literal_scanner) return std::nullopt;
    }
  }
  bool has_words = false;
  rd.f(has_words);
  if (has_words) {
    std::vector<std::string> expressions, want;
    uint64_t size = 0;
    rd.f(expressions), rd.f(size);
    std::string_view blob = rd.view(size);
    for (const auto& e : errorLexiconExpressions()) want.push_back(e.regex);
    if (rd.ok()) {
      if (expressions != want) {
        *error = "its error-word database is another lexicon's";
        return std::nullopt;
      }
      set.error_words = LiteralScanner::fromSerialized(expressions, blob, error);
      if (!set.error_words) return std::nullopt;
    }
  }
  if (!rd.ok() || !rd.atEnd()) {
    *error = "malformed payload";
    return std::nullopt;
  }
  return set;
}

std::string defaultRuleCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/faultline";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/faultline";
  return {};
}

CachedRuleLoad loadRuleDirsCached(const std::vector<std::string>& dirs, const std::string& cache_dir,
                                  bool build_on_miss) {
  namespace fs = std::filesystem;
  CachedRuleLoad out;
  if (cache_dir.empty()) {
    out.result = loadRuleDirs(dirs);
    return out;
  }
  auto read = readRuleFiles(dirs);
  if (!read.errors.empty()) {  // as loadRuleDirs: no rules, every problem
    out.result = loadRuleSet(read.files, read.base_version);
    out.result.errors.insert(out.result.errors.begin(), read.errors.begin(), read.errors.end());
    out.result.rules.reset();
    return out;
  }
  const uint64_t key = ruleCacheKey(read);
  uint64_t dirs_hash = hashBytes(0, "dirs");
  for (const auto& d : dirs) {
    std::error_code ec;
    auto abs = fs::absolute(d, ec).lexically_normal();
    dirs_hash = hashBytes(dirs_hash, ec ? d : abs.string());
  }
  out.path = fmt::format("{}/rules-{:016x}.cache", cache_dir, dirs_hash);

  bool exists = false;
  std::string error;
  std::string bytes = readFile(out.path, &exists, &error);
  out.cache = exists ? CachedRuleLoad::Cache::kUnreadable : CachedRuleLoad::Cache::kMiss;
  if (exists && error.empty()) {
    if (auto set = deserializeRuleSet(bytes, key, &error)) {
      out.cache = CachedRuleLoad::Cache::kHit;
      out.result.rules = std::make_shared<const RuleSet>(std::move(*set));
      return out;
    }
    if (error == "stale") out.cache = CachedRuleLoad::Cache::kStale;
  }
  if (!build_on_miss) return out;
  if (out.cache == CachedRuleLoad::Cache::kUnreadable)
    out.note = fmt::format("rule cache {} unreadable ({}); loaded the YAML rules", out.path, error);
  bytes.clear();
  bytes.shrink_to_fit();

  out.result = loadRuleSet(read.files, read.base_version);
  if (!out.result.rules) return out;
  auto set = std::make_shared<RuleSet>(*out.result.rules);
  std::string scanner_error;
  set->literal_scanner = LiteralScanner::build(RuleEngine::literalsOf(*set), &scanner_error);
  set->error_words = errorWordScanner();
  out.result.rules = set;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  std::string write_error;
  if (!writeFileAtomically(out.path, serializeRuleSet(*set, key), &write_error)) {
    if (!out.note.empty()) out.note += "; ";
    out.note += "rule cache not written: " + write_error;
  }
  return out;
}

}  // namespace faultline::common
