#include "common/rule_engine_capture.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace faultline::common {

namespace {

constexpr size_t kMaxInsts = 4096;
constexpr int kMaxRepeat = 1000;  // RE2's limit for {n,m}
// Longer matches are left to RE2 (the visited marks grow with splits x bytes).
constexpr size_t kMaxSpan = 64 << 10;

struct Node {
  enum Kind { kEmpty, kChar, kClass, kAssert, kConcat, kAlt, kRepeat, kGroup } kind = kEmpty;
  uint8_t byte = 0;      // kChar; kAssert: the assertion
  int cls = -1;          // kClass
  int cap = -1;          // kGroup: its number (-1 would be non-capturing; those are not nodes)
  int min = 0, max = 0;  // kRepeat; max -1: unbounded
  bool greedy = true;
  std::vector<std::unique_ptr<Node>> subs;
};

bool isWordByte(int c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

}  // namespace

// Recursive descent over the subset of RE2's syntax (its defaults: Perl classes, \b, non-greedy
// repeats, ^/$ at the text's ends, `.` not matching \n, negated classes matching \n), then a
// Thompson-style program whose SPLITs list the preferred branch first.
struct SpanCaptureCompiler {
  std::string_view p;
  size_t i = 0;
  int groups = 0;
  bool ok = true;
  bool fold = false;       // (?i): ASCII letters match either case
  bool multiline = false;  // (?m): ^ and $ at line ends too
  std::vector<SpanCapture::Class> classes;

  bool more() const { return i < p.size(); }
  void fail() { ok = false; }

  int addClass(const SpanCapture::Class& c) {
    classes.push_back(c);
    return static_cast<int>(classes.size()) - 1;
  }
  static void addRange(SpanCapture::Class* c, int lo, int hi) {
    for (int b = lo; b <= hi; ++b) c->bits[b >> 6] |= uint64_t{1} << (b & 63);
  }
  static void addPerl(SpanCapture::Class* c, char kind) {  // \d \s \w and their complements
    SpanCapture::Class k;
    switch (kind | 0x20) {
      case 'd':
        addRange(&k, '0', '9');
        break;
      case 's':  // RE2's \s: [\t\n\f\r ] (no \v)
        for (int b : {'\t', '\n', '\f', '\r', ' '}) addRange(&k, b, b);
        break;
      default:
        for (int b = 0; b < 256; ++b)
          if (isWordByte(b)) addRange(&k, b, b);
    }
    const bool negate = kind >= 'A' && kind <= 'Z';
    for (int w = 0; w < 4; ++w) c->bits[w] |= negate ? ~k.bits[w] : k.bits[w];
  }
  // A one-byte escape's value (\t, \n, punctuation ...), or nullopt.
  static std::optional<uint8_t> simpleEscape(char c) {
    switch (c) {
      case 't':
        return '\t';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case 'a':
        return '\a';
      default:
        break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && u > 0x20 && !isWordByte(u)) return u;  // escaped punctuation is itself
    return std::nullopt;
  }

  std::unique_ptr<Node> leaf(Node::Kind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    return n;
  }

  std::unique_ptr<Node> parseAlt() {
    auto first = parseConcat();
    if (!more() || p[i] != '|') return first;
    auto alt = leaf(Node::kAlt);
    alt->subs.push_back(std::move(first));
    while (ok && more() && p[i] == '|') {
      ++i;
      alt->subs.push_back(parseConcat());
    }
    return alt;
  }

  std::unique_ptr<Node> parseConcat() {
    auto cat = leaf(Node::kConcat);
    while (ok && more() && p[i] != '|' && p[i] != ')') {
      auto atom = parseAtom();
      if (!ok) break;
      bool repeated = false;
      while (ok && more()) {
        int mn = 0, mx = 0;
        const size_t at = i;
        const char c = p[i];
        if (c == '*')
          mn = 0, mx = -1, ++i;
        else if (c == '+')
          mn = 1, mx = -1, ++i;
        else if (c == '?')
          mn = 0, mx = 1, ++i;
        else if (c == '{' && parseCount(&mn, &mx)) {
        } else
          break;
        if (repeated) return fail(), nullptr;  // RE2 refuses a repeat of a repeat
        repeated = true;
        (void)at;
        auto rep = leaf(Node::kRepeat);
        rep->min = mn;
        rep->max = mx;
        if (more() && p[i] == '?') rep->greedy = false, ++i;
        rep->subs.push_back(std::move(atom));
        atom = std::move(rep);
      }
      cat->subs.push_back(std::move(atom));
    }
    return cat;
  }

  // {n}, {n,}, {n,m} at i; false (i unchanged) if it is not one: then '{' is a literal.
  bool parseCount(int* mn, int* mx) {
    size_t j = i + 1;
    auto num = [&](int* v) {
      const size_t s = j;
      long x = 0;
      while (j < p.size() && p[j] >= '0' && p[j] <= '9' && j - s < 8) x = x * 10 + (p[j++] - '0');
      *v = static_cast<int>(x);
      return j > s;
    };
    if (!num(mn)) return false;
    if (j < p.size() && p[j] == '}') {
      *mx = *mn;
    } else if (j < p.size() && p[j] == ',') {
      ++j;
      if (j < p.size() && p[j] == '}')
        *mx = -1;
      else if (!num(mx))
        return false;
    } else {
      return false;
    }
    if (j >= p.size() || p[j] != '}') return false;
    if (*mn > kMaxRepeat || *mx > kMaxRepeat || (*mx >= 0 && *mx < *mn)) return fail(), false;
    i = j + 1;
    return true;
  }

  std::unique_ptr<Node> parseAtom() {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c >= 0x80) return fail(), nullptr;
    if (c == '(') {
      ++i;
      int cap = -1;
      if (p.substr(i, 2) == "?:") {
        i += 2;
      } else if (p.substr(i, 3) == "?P<") {
        const size_t gt = p.find('>', i + 3);
        if (gt == std::string_view::npos) return fail(), nullptr;
        i = gt + 1;
        cap = ++groups;
      } else if (more() && p[i] == '?') {
        // (?flags) for the rest of the group, (?flags:...) for its body: i and m only.
        size_t j = i + 1;
        bool f = fold, m = multiline;
        for (; j < p.size() && (p[j] == 'i' || p[j] == 'm'); ++j) (p[j] == 'i' ? f : m) = true;
        if (j == i + 1 || j >= p.size() || (p[j] != ')' && p[j] != ':')) return fail(), nullptr;
        i = j + 1;
        if (p[j] == ')') {
          fold = f, multiline = m;
          return leaf(Node::kEmpty);
        }
        const bool saved_fold = fold, saved_multiline = multiline;
        fold = f, multiline = m;
        auto body = parseAlt();
        fold = saved_fold, multiline = saved_multiline;
        if (!ok || !more() || p[i] != ')') return fail(), nullptr;
        ++i;
        return body;
      } else {
        cap = ++groups;
      }
      const bool saved_fold = fold, saved_multiline = multiline;
      auto body = parseAlt();
      fold = saved_fold, multiline = saved_multiline;
      if (!ok || !more() || p[i] != ')') return fail(), nullptr;
      ++i;
      if (cap < 0) return body;
      auto g = leaf(Node::kGroup);
      g->cap = cap;
      g->subs.push_back(std::move(body));
      return g;
    }
    if (c == '*' || c == '+' || c == '?') return fail(), nullptr;
    ++i;
    if (c == '[') return parseClass();
    if (c == '.') {
      SpanCapture::Class k;
      addRange(&k, 0, 255);
      k.bits['\n' >> 6] &= ~(uint64_t{1} << ('\n' & 63));
      auto n = leaf(Node::kClass);
      n->cls = addClass(k);
      return n;
    }
    if (c == '^' || c == '$') {
      auto n = leaf(Node::kAssert);
      n->byte = c == '^' ? (multiline ? SpanCapture::kBeginLine : SpanCapture::kBeginText)
                         : (multiline ? SpanCapture::kEndLine : SpanCapture::kEndText);
      return n;
    }
    if (c == '\\') {
      if (!more()) return fail(), nullptr;
      const char e = p[i++];
      if (e == 'b' || e == 'B' || e == 'A' || e == 'z') {
        auto n = leaf(Node::kAssert);
        n->byte = e == 'b'   ? SpanCapture::kWordBoundary
                  : e == 'B' ? SpanCapture::kNotWordBoundary
                  : e == 'A' ? SpanCapture::kBeginText
                             : SpanCapture::kEndText;
        return n;
      }
      if (e == 'd' || e == 'D' || e == 's' || e == 'S' || e == 'w' || e == 'W') {
        SpanCapture::Class k;
        addPerl(&k, e);
        auto n = leaf(Node::kClass);
        n->cls = addClass(k);
        return n;
      }
      const auto v = simpleEscape(e);
      if (!v) return fail(), nullptr;
      return literal(*v);
    }
    return literal(c);
  }

  std::unique_ptr<Node> literal(uint8_t c) {
    if (fold && isLetter(c)) {
      SpanCapture::Class k;
      addRange(&k, c, c);
      addRange(&k, c ^ 0x20, c ^ 0x20);
      auto n = leaf(Node::kClass);
      n->cls = addClass(k);
      return n;
    }
    auto n = leaf(Node::kChar);
    n->byte = c;
    return n;
  }
  static bool isLetter(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

  // After '['.
  std::unique_ptr<Node> parseClass() {
    SpanCapture::Class k;
    bool negate = false;
    if (more() && p[i] == '^') negate = true, ++i;
    bool first = true;
    // One class member's byte (a literal or one-byte escape), or nullopt (then ok may be false).
    auto member = [&]() -> std::optional<uint8_t> {
      const auto c = static_cast<unsigned char>(p[i]);
      if (c >= 0x80) return fail(), std::nullopt;
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':')
        return fail(), std::nullopt;  // [:alpha:]
      if (c != '\\') return ++i, c;
      if (i + 1 >= p.size()) return fail(), std::nullopt;
      const auto v = simpleEscape(p[i + 1]);
      if (!v) return fail(), std::nullopt;
      i += 2;
      return v;
    };
    while (ok) {
      if (!more()) return fail(), nullptr;
      if (p[i] == ']' && !first) {
        ++i;
        break;
      }
      first = false;
      if (p[i] == '\\' && i + 1 < p.size() &&
          std::string_view("dDsSwW").find(p[i + 1]) != std::string_view::npos) {
        addPerl(&k, p[i + 1]);
        i += 2;
        continue;
      }
      const auto lo = member();
      if (!lo) return fail(), nullptr;
      if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
        ++i;
        if (p[i] == '\\' && i + 1 < p.size() &&
            std::string_view("dDsSwW").find(p[i + 1]) != std::string_view::npos)
          return fail(), nullptr;
        const auto hi = member();
        if (!hi || *hi < *lo) return fail(), nullptr;
        addRange(&k, *lo, *hi);
      } else {
        addRange(&k, *lo, *lo);
      }
    }
    if (fold)  // each letter's other case (RE2 folds before it negates)
      for (int b = 0; b < 128; ++b)
        if (isLetter(b) && k.has(static_cast<uint8_t>(b))) addRange(&k, b ^ 0x20, b ^ 0x20);
    if (negate)
      for (auto& w : k.bits) w = ~w;  // RE2 lets a negated class match \n
    auto n = leaf(Node::kClass);
    n->cls = addClass(k);
    return n;
  }

  static bool nullable(const Node& n) {
    switch (n.kind) {
      case Node::kEmpty:
      case Node::kAssert:
        return true;
      case Node::kChar:
      case Node::kClass:
        return false;
      case Node::kConcat:
        for (const auto& s : n.subs)
          if (!nullable(*s)) return false;
        return true;
      case Node::kAlt:
        for (const auto& s : n.subs)
          if (nullable(*s)) return true;
        return false;
      case Node::kRepeat:
        return n.min == 0 || nullable(*n.subs[0]);
      case Node::kGroup:
        return nullable(*n.subs[0]);
    }
    return true;
  }

  std::vector<SpanCapture::Inst> prog;

  int splits = 0;
  int emit(SpanCapture::Op op, uint8_t arg = 0, int x = 0, int y = 0) {
    if (prog.size() >= kMaxInsts) {
      ok = false;
      return 0;
    }
    prog.push_back({op, arg, x, y, op == SpanCapture::kSplit ? splits++ : 0});
    return static_cast<int>(prog.size()) - 1;
  }
  int here() const { return static_cast<int>(prog.size()); }

  void compile(const Node& n) {
    if (!ok) return;
    switch (n.kind) {
      case Node::kEmpty:
        return;
      case Node::kChar:
        emit(SpanCapture::kChar, n.byte);
        return;
      case Node::kClass:
        emit(SpanCapture::kClass, 0, n.cls);
        return;
      case Node::kAssert:
        emit(SpanCapture::kAssert, n.byte);
        return;
      case Node::kConcat:
        for (const auto& s : n.subs) compile(*s);
        return;
      case Node::kGroup:
        emit(SpanCapture::kSave, static_cast<uint8_t>(2 * n.cap));
        compile(*n.subs[0]);
        emit(SpanCapture::kSave, static_cast<uint8_t>(2 * n.cap + 1));
        return;
      case Node::kAlt: {
        std::vector<int> jumps;
        for (size_t k = 0; k < n.subs.size(); ++k) {
          const bool last = k + 1 == n.subs.size();
          const int split = last ? -1 : emit(SpanCapture::kSplit);
          if (split >= 0) prog[split].x = here();
          compile(*n.subs[k]);
          if (!ok) return;
          if (!last) {
            jumps.push_back(emit(SpanCapture::kJump));
            prog[split].y = here();
          }
        }
        for (int j : jumps) prog[j].x = here();
        return;
      }
      case Node::kRepeat: {
        const Node& body = *n.subs[0];
        // RE2's loops over an empty-matching body have rules of their own: left to RE2 (an
        // optional one, x?, is a plain choice either way).
        if (nullable(body) && !(n.min == 0 && n.max == 1)) return void(ok = false);
        for (int k = 0; k < n.min; ++k) compile(body);
        if (n.max < 0 && (body.kind == Node::kClass || body.kind == Node::kChar)) {
          // A loop over one byte class: one instruction that takes the run at once.
          int cls = body.cls;
          if (body.kind == Node::kChar) {
            SpanCapture::Class k;
            addRange(&k, body.byte, body.byte);
            cls = addClass(k);
          }
          const int star = emit(SpanCapture::kStar, n.greedy ? 1 : 0, cls);
          if (star >= 0 && ok) prog[star].id = splits++;
          return;
        }
        if (n.max < 0) {  // loop: split (body, out), body, jump back
          const int split = emit(SpanCapture::kSplit);
          compile(body);
          emit(SpanCapture::kJump, 0, split);
          if (!ok) return;
          setSplit(split, split + 1, here(), n.greedy);
          return;
        }
        // max - min nested optionals, x(x(x)?)?: each skip leaves them all.
        std::vector<int> splits;
        for (int k = n.min; k < n.max && ok; ++k) {
          splits.push_back(emit(SpanCapture::kSplit));
          compile(body);
        }
        if (!ok) return;
        for (int s : splits) setSplit(s, s + 1, here(), n.greedy);
        return;
      }
    }
  }
  void setSplit(int at, int body, int out, bool greedy) {
    prog[at].x = greedy ? body : out;
    prog[at].y = greedy ? out : body;
  }
};

std::unique_ptr<const SpanCapture> SpanCapture::compile(std::string_view pattern) {
  SpanCaptureCompiler c;
  c.p = pattern;
  auto root = c.parseAlt();
  if (!c.ok || c.i != pattern.size() || !root || c.groups > 120)
    return nullptr;  // 2 * groups + 1 fits a byte
  c.compile(*root);
  c.emit(kMatch);
  // A loop followed by a literal byte: its run can only stop where that byte is.
  for (size_t k = 0; k + 1 < c.prog.size(); ++k)
    if (c.prog[k].op == kStar && c.prog[k + 1].op == kChar) c.prog[k].y = c.prog[k + 1].arg + 1;
  if (!c.ok) return nullptr;
  auto sc = std::unique_ptr<SpanCapture>(new SpanCapture());
  sc->prog_ = std::move(c.prog);
  sc->classes_ = std::move(c.classes);
  sc->first_ = sc->firstBytes();
  sc->groups_ = c.groups;
  sc->splits_ = c.splits;
  return sc;
}

// Where a loop (kStar `in`) followed by a literal byte may stop: the last q in [lo, q] whose byte
// is that one (a greedy loop's next shorter run; every byte of [lo, q] is in its class), the first
// q from `from` on (a lazy loop's next longer run, within its class): -1 if none. Without such a
// byte, q or `from` as it is.
int SpanCapture::stopBefore(const Inst& in, const unsigned char* t, int lo, int q) {
  if (in.y == 0) return q;
  const auto c = static_cast<unsigned char>(in.y - 1);
  while (q >= lo && t[q] != c) --q;
  return q >= lo ? q : -1;
}

int SpanCapture::stopAfter(const Inst& in, const unsigned char* t, int from, int end) const {
  if (in.y == 0) return from;
  const auto c = static_cast<unsigned char>(in.y - 1);
  const Class& cls = classes_[static_cast<size_t>(in.x)];
  int q = from;
  for (; q < end && t[q] != c; ++q)
    if (!cls.has(t[q])) return -1;
  return q < end ? q : -1;
}

// The bytes a match can begin with (over-approximated: assertions pass; every byte if the
// pattern can match without consuming one), from the instructions reachable without one.
SpanCapture::Class SpanCapture::firstBytes() const {
  Class first;
  std::vector<bool> seen(prog_.size());
  std::vector<int> todo{0};
  while (!todo.empty()) {
    const auto pc = static_cast<size_t>(todo.back());
    todo.pop_back();
    if (pc >= prog_.size() || seen[pc]) continue;
    seen[pc] = true;
    const Inst& in = prog_[pc];
    switch (in.op) {
      case kChar:
        first.bits[in.arg >> 6] |= uint64_t{1} << (in.arg & 63);
        break;
      case kClass:
      case kStar:
        for (int w = 0; w < 4; ++w) first.bits[w] |= classes_[static_cast<size_t>(in.x)].bits[w];
        if (in.op == kStar) todo.push_back(static_cast<int>(pc) + 1);  // none of the loop's bytes
        break;
      case kSplit:
        todo.push_back(in.x);
        todo.push_back(in.y);
        break;
      case kJump:
        todo.push_back(in.x);
        break;
      case kSave:
      case kAssert:
        todo.push_back(static_cast<int>(pc) + 1);
        break;
      case kMatch:
        for (auto& w : first.bits) w = ~uint64_t{0};
        return first;
    }
  }
  return first;
}

bool SpanCapture::capture(std::string_view text, size_t begin, size_t end, int* out) const {
  return run(text, begin, end, true, out);
}

bool SpanCapture::search(std::string_view text, int* out) const {
  return run(text, 0, text.size(), false, out);
}

bool SpanCapture::run(std::string_view text, size_t begin, size_t end, bool whole, int* out) const {
  if (begin > end || end > text.size() || end - begin > kMaxSpan) return false;
  const auto* t = reinterpret_cast<const unsigned char*>(text.data());
  size_t k = begin;
  for (uint64_t w; k + 8 <= end; k += 8)
    if (std::memcpy(&w, t + k, 8), w & 0x8080808080808080ull) return false;
  for (; k < end; ++k)
    if (t[k] >= 0x80) return false;
  const int slots = 2 * (groups_ + 1);
  for (int k = 0; k < slots; ++k) out[k] = -1;
  // Pending work, last in first out: resume at (pc, p); undo a capture (out[pc] = p); a greedy
  // loop's next shorter run (continue after the loop at q, then q - 1 down to p); a lazy loop's
  // next longer run (one more byte at p, if it is in the class).
  enum Kind : int { kResume, kUndo, kShorter, kLonger };
  struct Job {
    Kind kind;
    int pc;
    int p;
    int q;
  };
  const size_t width = end - begin + 1;
  size_t budget = 4096 + 64 * (end - begin) + 4 * prog_.size();
  thread_local std::vector<Job> stack;
  if (stack.size() < 256) stack.resize(256);
  Job* base = stack.data();
  Job* sp = base;
  Job* limit = base + stack.size() - 2;  // room for the two pushes a step makes at most
  const auto grow = [&] {
    const size_t used = static_cast<size_t>(sp - base);
    stack.resize(stack.size() * 2);
    base = stack.data();
    sp = base + used;
    limit = base + stack.size() - 2;
  };
  // (split or loop, position) pairs already explored: reached again, they fail again (whether a
  // state leads to the end depends on the state alone, and the first parse found returns), so
  // the work is bounded by splits x bytes, as RE2's BitState is by instructions x bytes.
  thread_local std::vector<uint64_t> visited;
  visited.assign((static_cast<size_t>(splits_) * width + 63) / 64, 0);
  const auto seen = [&](int id, int p) {  // marks it; true if it was marked
    const size_t bit = static_cast<size_t>(id) * width + static_cast<size_t>(p) - begin;
    uint64_t& w = visited[bit >> 6];
    const uint64_t m = uint64_t{1} << (bit & 63);
    const bool was = (w & m) != 0;
    w |= m;
    return was;
  };
  const int e = static_cast<int>(end);
  // Whole: the one parse from begin that ends at end. Else the first start from which a parse
  // ends anywhere (RE2's unanchored leftmost-first match: the leftmost start, its first parse);
  // a state that failed for one start fails for the next, so the marks stay.
  for (int start = static_cast<int>(begin);; ++start) {
    if (!whole)  // no match starts where its first byte cannot be (an empty one could: then all
                 // can)
      while (start < e && !first_.has(t[start])) ++start;
    *sp++ = {kResume, 0, start, 0};
    while (sp != base) {
      const Job j = *--sp;
      int pc = j.pc, p = j.p;
      switch (j.kind) {
        case kResume:
          break;
        case kUndo:
          out[j.pc] = j.p;
          continue;
        case kShorter: {  // the greedy loop at pc, ending at q this time
          const Inst& in = prog_[static_cast<size_t>(pc)];
          const int q = stopBefore(in, t, p, j.q);
          if (q < 0) continue;
          if (q > p) *sp++ = {kShorter, pc, p, q - 1};
          if (seen(in.id, q)) continue;
          pc = pc + 1, p = q;
          break;
        }
        case kLonger: {  // the lazy loop at pc, one byte more than p
          const Inst& in = prog_[static_cast<size_t>(pc)];
          if (p >= e || !classes_[static_cast<size_t>(in.x)].has(t[p])) continue;
          p = stopAfter(in, t, p + 1, e);
          if (p < 0) continue;
          *sp++ = {kLonger, pc, p, 0};
          if (seen(in.id, p)) continue;
          ++pc;
          break;
        }
      }
      for (;;) {
        if (budget-- == 0) return false;
        if (sp >= limit) grow();
        const Inst& in = prog_[static_cast<size_t>(pc)];
        bool go = true;
        switch (in.op) {
          case kChar:
            go = p < e && t[p] == in.arg;
            ++pc, ++p;
            break;
          case kClass:
            go = p < e && classes_[static_cast<size_t>(in.x)].has(t[p]);
            ++pc, ++p;
            break;
          case kStar: {
            if (in.arg) {  // greedy: the whole run first, then shorter ones
              const Class& c = classes_[static_cast<size_t>(in.x)];
              int q = p;
              while (q < e && c.has(t[q])) ++q;
              q = stopBefore(in, t, p,
                             in.y != 0 ? std::min(q, e - 1) : q);  // the byte must be in the span
              if (q < 0) {
                go = false;
                break;
              }
              if (q > p) *sp++ = {kShorter, pc, p, q - 1};
              if (seen(in.id, q)) {
                go = false;
                break;
              }
              p = q;
            } else {  // lazy: none first, then longer ones
              p = stopAfter(in, t, p, e);
              if (p < 0) {
                go = false;
                break;
              }
              *sp++ = {kLonger, pc, p, 0};
              if (seen(in.id, p)) {
                go = false;
                break;
              }
            }
            ++pc;
            break;
          }
          case kSplit:
            if (seen(in.id, p)) {
              go = false;
              break;
            }
            *sp++ = {kResume, in.y, p, 0};
            pc = in.x;
            break;
          case kJump:
            pc = in.x;
            break;
          case kSave:
            *sp++ = {kUndo, in.arg, out[in.arg], 0};
            out[in.arg] = p;
            ++pc;
            break;
          case kAssert: {
            const size_t at = static_cast<size_t>(p);
            switch (in.arg) {
              case kBeginText:
                go = at == 0;
                break;
              case kEndText:
                go = at == text.size();
                break;
              case kBeginLine:
                go = at == 0 || t[at - 1] == '\n';
                break;
              case kEndLine:
                go = at == text.size() || t[at] == '\n';
                break;
              default: {
                const bool before = at > 0 && isWordByte(t[at - 1]);
                const bool after = at < text.size() && isWordByte(t[at]);
                go = (before != after) == (in.arg == kWordBoundary);
              }
            }
            ++pc;
            break;
          }
          case kMatch:
            if (p == e || !whole) {
              out[0] = start;
              out[1] = p;
              return true;
            }
            go = false;
            break;
        }
        if (!go) break;
      }
    }
    if (whole || start >= e) return false;
  }
}

}  // namespace faultline::common
