#include "common/hostlist.h"

#include <fmt/format.h>

namespace faultline::common {

namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string_view> splitTop(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

bool parseUint(std::string_view s, unsigned long long* v) {
  if (s.empty() || s.size() > 18) return false;
  unsigned long long out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<unsigned>(c - '0');
  }
  *v = out;
  return true;
}

// Expands one bracket body "01-16,20" into strings.
bool expandRanges(std::string_view body, std::vector<std::string>* out, size_t max, std::string* err) {
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view item = body.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                              : comma - start);
    auto dash = item.find('-');
    unsigned long long lo, hi;
    if (dash == std::string_view::npos) {
      if (!parseUint(item, &lo)) {
        *err = fmt::format("bad range item '{}'", item);
        return false;
      }
      out->emplace_back(item);
    } else {
      auto a = item.substr(0, dash), b = item.substr(dash + 1);
      if (!parseUint(a, &lo) || !parseUint(b, &hi) || hi < lo) {
        *err = fmt::format("bad range '{}'", item);
        return false;
      }
      if (hi - lo + out->size() >= max) {
        *err = fmt::format("range '{}' expands to more than {} hosts", item, max);
        return false;
      }
      size_t width = a.size();
      for (unsigned long long v = lo; v <= hi; ++v) out->push_back(fmt::format("{:0{}}", v, width));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

bool expandOne(std::string_view expr, std::vector<std::string>* out, size_t max, std::string* err) {
  std::vector<std::string> partial{""};
  size_t pos = 0;
  while (pos < expr.size()) {
    size_t open = expr.find('[', pos);
    std::string_view literal = expr.substr(pos, open == std::string_view::npos ? std::string_view::npos
                                                                              : open - pos);
    if (literal.find(']') != std::string_view::npos) {
      *err = "unbalanced ']'";
      return false;
    }
    for (auto& p : partial) p += literal;
    if (open == std::string_view::npos) break;
    size_t close = expr.find(']', open);
    if (close == std::string_view::npos) {
      *err = "unbalanced '['";
      return false;
    }
    std::vector<std::string> values;
    if (!expandRanges(expr.substr(open + 1, close - open - 1), &values, max, err)) return false;
    if (values.size() * partial.size() > max) {
      *err = fmt::format("expression expands to more than {} hosts", max);
      return false;
    }
    std::vector<std::string> next;
    next.reserve(values.size() * partial.size());
    for (const auto& p : partial)
      for (const auto& v : values) next.push_back(p + v);
    partial = std::move(next);
    pos = close + 1;
  }
  for (auto& p : partial) {
    if (p.empty()) {
      *err = "empty host name";
      return false;
    }
    out->push_back(std::move(p));
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::string>> expandHostlist(std::string_view expr, std::string* error,
                                                       size_t max_hosts) {
  std::string err;
  std::vector<std::string> out;
  while (!expr.empty() && (expr.front() == ' ')) expr.remove_prefix(1);
  while (!expr.empty() && (expr.back() == ' ' || expr.back() == '\n')) expr.remove_suffix(1);
  if (expr.empty() || expr == "None assigned" || expr == "(null)") return out;
  for (auto part : splitTop(expr)) {
    if (!expandOne(part, &out, max_hosts, &err)) {
      if (error) *error = fmt::format("host list '{}': {}", expr, err);
      return std::nullopt;
    }
    if (out.size() > max_hosts) {
      if (error) *error = fmt::format("host list '{}' has more than {} hosts", expr, max_hosts);
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace faultline::common
