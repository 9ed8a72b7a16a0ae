// Symptom <-> JSON and the compact payload (symptom_codec.h).
#include "aggregator/store/symptom_codec.h"

#include "aggregator/store/symptom_dictionary.h"

#include <charconv>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif


namespace faultline::aggregator {

using nlohmann::json;

std::optional<common::SourceKind> parseSourceKind(std::string_view s) {
  for (auto k : {common::SourceKind::kKernel, common::SourceKind::kJournal, common::SourceKind::kFabricManager,
                 common::SourceKind::kApplication})
    if (common::sourceKindName(k) == s) return k;
  return std::nullopt;
}

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
// The length of the multi-byte UTF-8 sequence at v[i] (a byte >= 0x80), checked as RFC 3629 (no
// overlongs, surrogates or > U+10FFFF); 0 when it is not one.
size_t utf8SequenceAt(std::string_view v, size_t i) {
  const auto c = static_cast<unsigned char>(v[i]);
  const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > v.size()) return 0;
  const auto b1 = static_cast<unsigned char>(v[i + 1]);
  unsigned lo = 0x80, hi = 0xbf;
  if (c == 0xe0) lo = 0xa0;
  else if (c == 0xed) hi = 0x9f;
  else if (c == 0xf0) lo = 0x90;
  else if (c == 0xf4) hi = 0x8f;
  if (b1 < lo || b1 > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((static_cast<unsigned char>(v[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

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
    const size_t n = utf8SequenceAt(v, i);
    if (n == 0) return false;
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
  const json j = json::parse(payload, nullptr, false);
  return symptomFromJson(j.is_object() ? j : json::object());  // damaged: the defaults, never a throw
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

// ---- the compact payload (store migration 9) ----

namespace {

// UTF-8 with no NUL (PostgreSQL's text cannot hold one): what the compact form may carry as is.
bool plainText(std::string_view v) {
  size_t i = 0;
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  auto asciiWord = [&](size_t at) {  // eight ASCII bytes without a NUL at `at`
    uint64_t x;
    std::memcpy(&x, v.data() + at, 8);
    return !(((x - kOnes) & ~x & kHigh) | (x & kHigh));
  };
  while (i < v.size()) {
    // Eight bytes at a time (log text is mostly ASCII), the tail as the last eight (some read twice).
    for (; i + 8 <= v.size(); i += 8)
      if (!asciiWord(i)) break;
    if (i >= v.size() || (i + 8 > v.size() && v.size() >= 8 && asciiWord(v.size() - 8))) break;
    const auto c = static_cast<unsigned char>(v[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8SequenceAt(v, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Every text of `s`, for one check.
template <class Fn>
bool allTexts(const common::Symptom& s, Fn fn) {
  for (std::string_view t : {std::string_view(s.rule_id), std::string_view(s.symptom), std::string_view(s.category),
                             std::string_view(s.node), std::string_view(s.device), std::string_view(s.source),
                             std::string_view(s.summary), std::string_view(s.boot_id)})
    if (!fn(t)) return false;
  for (const auto& e : s.evidence)
    if (!fn(e)) return false;
  for (const auto& [k, v] : s.fields)
    if (!fn(k) || !fn(v)) return false;
  return true;
}

// Lengths and counts as decimal digits and ':' (a netstring's prefix): the payload stays text.
// Written at `p` (room for kMaxCount bytes), returns the end.
constexpr size_t kMaxCount = 21;
char* putCount(char* p, size_t n) {
  if (n < 10) *p++ = static_cast<char>('0' + n);
  else p = std::to_chars(p, p + 20, n).ptr;
  *p++ = ':';
  return p;
}

char* putText(char* p, std::string_view v) {
  p = putCount(p, v.size());
  std::memcpy(p, v.data(), v.size());
  return p + v.size();
}

constexpr unsigned kFallbackRoot = 1, kOwnBootId = 2;  // the flags character's bits

class CompactReader {
 public:
  explicit CompactReader(std::string_view p) : p_(p) {}
  bool flag(unsigned* out) {
    if (i_ >= p_.size() || p_[i_] < '0' || p_[i_] > '9') return false;
    *out = static_cast<unsigned>(p_[i_++] - '0');
    return true;
  }
  bool count(size_t* out) {
    const char* b = p_.data() + i_;
    const char* e = p_.data() + p_.size();
    auto r = std::from_chars(b, e, *out);
    if (r.ec != std::errc() || r.ptr == b || r.ptr == e || *r.ptr != ':') return false;
    i_ = static_cast<size_t>(r.ptr - p_.data()) + 1;
    return *out <= p_.size() - i_;  // no count (of bytes or of items) can exceed what is left
  }
  bool text(std::string* out) {
    size_t n = 0;
    if (!count(&n)) return false;
    if (out) out->assign(p_.data() + i_, n);
    i_ += n;
    return true;
  }
  bool done() const { return i_ == p_.size(); }

 private:
  std::string_view p_;
  size_t i_ = 0;
};

// What the columns hold, as symptomFromJson reads the same values from a JSON payload.
common::Symptom fromColumns(const SymptomColumns& c) {
  common::Symptom s;
  s.rule_id = c.rule_id;
  s.sub_domain = common::parseSubDomain(c.sub_domain).value_or(common::SubDomain::kNone);
  s.role = common::parseRole(c.role).value_or(common::Role::kRoot);
  s.severity = common::parseSeverity(c.severity).value_or(common::Severity::kError);
  s.node = c.node;
  s.device = c.device;
  s.first_ns = c.first_ns;
  s.last_ns = c.last_ns;
  s.time_known = c.time_known;
  s.count = static_cast<uint32_t>(c.count);
  s.boot_id = c.boot_id;
  return s;
}

// The payload's part of the symptom into `s`; at most `max_evidence` evidence lines kept (the
// rest skipped). false: not a compact payload this build wrote.
bool readCompact(std::string_view body, size_t max_evidence, common::Symptom* s) {
  CompactReader r(body);
  unsigned flags = 0, kind = 0;
  size_t n = 0;
  if (!r.flag(&flags) || !r.flag(&kind) || flags > 3 || kind > static_cast<unsigned>(common::SourceKind::kApplication))
    return false;
  s->fallback_root = flags & kFallbackRoot;
  s->source_kind = static_cast<common::SourceKind>(kind);
  if (!r.text(&s->symptom) || !r.text(&s->category) || !r.text(&s->source) || !r.text(&s->summary) ||
      ((flags & kOwnBootId) && !r.text(&s->boot_id)) || !r.count(&n))
    return false;
  s->evidence.reserve(std::min(n, max_evidence));
  for (size_t k = 0; k < n; ++k) {
    std::string* line = nullptr;
    if (k < max_evidence) line = &s->evidence.emplace_back();
    if (!r.text(line)) return false;
  }
  if (!r.count(&n)) return false;
  for (size_t k = 0; k < n; ++k) {
    std::string key, value;
    if (!r.text(&key) || !r.text(&value)) return false;
    s->fields.emplace_hint(s->fields.end(), std::move(key), std::move(value));
  }
  return r.done();
}

}  // namespace

std::string encodeSymptomPayload(const common::Symptom& s, std::string_view row_boot_id) {
  // A NUL or non-UTF-8 text: the JSON form (it escapes NUL; dump() throws on the other, as the
  // store's writer did before: the caller refuses the batch).
  if (!allTexts(s, plainText)) return symptomJsonText(s);
  const bool own_boot = s.boot_id != row_boot_id;
  // The kinds symptomFromJson reads back (a metric symptom's kind was always stored as application).
  const auto kind = parseSourceKind(common::sourceKindName(s.source_kind)).value_or(common::SourceKind::kApplication);
  // At most this many bytes (each count at its widest), written in place, then cut to what was.
  size_t size = 3 + 7 * kMaxCount + s.symptom.size() + s.category.size() + s.source.size() + s.summary.size() +
                (own_boot ? s.boot_id.size() : 0);
  for (const auto& e : s.evidence) size += e.size() + kMaxCount;
  for (const auto& [k, v] : s.fields) size += k.size() + v.size() + 2 * kMaxCount;
  std::string out(size, '\0');
  char* p = out.data();
  *p++ = kCompactPayloadTag;
  *p++ = static_cast<char>('0' + (s.fallback_root ? kFallbackRoot : 0) + (own_boot ? kOwnBootId : 0));
  *p++ = static_cast<char>('0' + static_cast<int>(kind));
  p = putText(p, s.symptom);
  p = putText(p, s.category);
  p = putText(p, s.source);
  p = putText(p, s.summary);
  if (own_boot) p = putText(p, s.boot_id);
  p = putCount(p, s.evidence.size());
  for (const auto& e : s.evidence) p = putText(p, e);
  p = putCount(p, s.fields.size());
  for (const auto& [k, v] : s.fields) {
    p = putText(p, k);
    p = putText(p, v);
  }
  out.resize(static_cast<size_t>(p - out.data()));
  return out;
}

common::Symptom decodeSymptomRow(const SymptomColumns& c, std::string_view payload, size_t max_evidence,
                                 const PayloadDictionaries* dicts) {
  if (!payload.empty() && payload[0] == kPackedPayloadTag) {
    // Unpacked into this thread's buffer (no allocation per row once it is big enough).
    thread_local std::string body;
    const auto id = packedDictionaryId(payload);
    const PayloadDictionary* d = id && dicts ? dicts->find(*id) : nullptr;
    common::Symptom s = fromColumns(c);
    if (!d || !d->unpack(payload, &body) || !readCompact(body, max_evidence, &s)) return fromColumns(c);
    return s;
  }
  if (payload.empty() || payload[0] != kCompactPayloadTag) {
    // A row written before migration 9 (its JSON is the whole symptom); anything else that is not
    // a JSON object (damaged): the columns alone.
    if (auto s = PayloadReader(payload).read()) return std::move(*s);
    const json j = payload.empty() || payload[0] != '{' ? json() : json::parse(payload, nullptr, false);
    return j.is_object() ? symptomFromJson(j) : fromColumns(c);
  }
  common::Symptom s = fromColumns(c);
  // A compact payload this build cannot read (damaged): the columns alone, never a throw.
  if (!readCompact(payload.substr(1), max_evidence, &s)) return fromColumns(c);
  return s;
}

}  // namespace faultline::aggregator
