// Format detection: every non-empty, non-indented line among the first ones votes for the
// format whose prefix it carries (application when none fits); the plurality wins, ties go to
// application. A rank log with a few kernel lines pasted in stays an application log, and a
// file concatenated from several sources gets its majority format. A console log's own lines
// (a wall-clock stamp with no kernel stamp after it: firmware, the BMC, the console logger) vote
// with its kernel lines when the head has any, else as the application lines they look like.
#include <array>
#include <cctype>

#include "common/parse/cri.h"
#include "common/parse/ipmi_sel.h"
#include "common/parse/line_grammar.h"
#include "common/parse/stream_parser.h"
#include "common/parse/text_util.h"

namespace faultline::common {
namespace {

constexpr size_t kMaxVotingLines = 256;
constexpr size_t kHeadLimit = 64 << 10;

bool isExportKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The format this line votes for; kUnknown for no vote.
LogFormat classifyBareLine(std::string_view line);

// A line behind grep's file-name prefix votes for the format of what follows it.
LogFormat classifyLine(std::string_view line) {
  const LogFormat f = classifyBareLine(line);
  if (f != LogFormat::kApplication) return f;
  if (const size_t n = parse::grepFilePrefix(line)) {
    const LogFormat behind = classifyBareLine(line.substr(n));
    if (behind != LogFormat::kApplication && behind != LogFormat::kUnknown && behind != LogFormat::kJournalJson &&
        behind != LogFormat::kJournalExport && behind != LogFormat::kIpmiSel && behind != LogFormat::kCriLog)
      return behind;
  }
  return f;
}

LogFormat classifyBareLine(std::string_view line) {
  using namespace parse;
  IpmiSelLine sel;  // "   1 | 06/01/2024 | ...": right-aligned ids start with spaces
  if (parseIpmiSelLine(line, &sel) || isIpmiSelHeader(line)) return LogFormat::kIpmiSel;
  if (isSpace(line.front())) return LogFormat::kUnknown;  // continuation / traceback frame
  std::string scratch;
  std::string_view text;
  if (checkText(line, false, &scratch, &text) == TextVerdict::kBinary) return LogFormat::kUnknown;
  if (line.front() == '{') {
    const std::string_view t = trimRight(line);
    if (t.back() == '}' && (t.find("\"MESSAGE\"") != std::string_view::npos ||
                            t.find("\"__REALTIME_TIMESTAMP\"") != std::string_view::npos)) {
      return LogFormat::kJournalJson;
    }
    return LogFormat::kApplication;
  }
  std::string_view rest = line;
  WallStamp wall;
  const bool console = rest.front() == '[' && parseBracketWallStamp(rest, &wall);
  if (console) rest = trimLeft(rest.substr(wall.length));
  DecodePrefix decode;
  if (parseDecodePrefix(rest, &decode)) rest.remove_prefix(decode.length);
  if (rest.size() > 3 && rest[0] == '<' && isDigit(rest[1])) {
    const size_t close = rest.find('>');
    if (close != std::string_view::npos && close < 5) rest.remove_prefix(close + 1);
  }
  if (rest.empty()) return LogFormat::kApplication;
  int64_t ns = 0;
  size_t len = 0;
  if (console) {
    return parsePrintkUptime(rest, &ns, &len) && ns < kEpochStampNs ? LogFormat::kConsole
                                                                         : LogFormat::kApplication;
  }
  if (rest.front() == '[') {
    // Seconds since boot; a value past 10^9 s (31 years of uptime) is an epoch stamp of a
    // program's own log (UCX "[1678901234.123456] [host:pid:tid] ..."), not the kernel's.
    if (parseBracketMonotonic(rest, &ns, &len)) return ns < kEpochStampNs ? LogFormat::kDmesgRaw : LogFormat::kApplication;
    if (parseDmesgCtime(rest, &ns, &len) || parseDmesgHumanStamp(rest, 1970, &ns, &len) ||
        parseDmesgDelta(rest, &ns, &len))
      return LogFormat::kDmesgCtime;
    if (parseFabricManagerStamp(rest, &ns, &len)) return LogFormat::kFabricManager;
    return LogFormat::kApplication;
  }
  if (isDigit(rest.front())) {
    KmsgHeader kmsg;
    if (parseKmsgHeader(rest, &kmsg)) return LogFormat::kKmsg;
    if (parseDmesgIsoStamp(rest, &ns, &len)) return LogFormat::kDmesgIso;
    CriLine cri;  // "2024-06-01T10:00:00.123456789Z stdout F text": a container runtime's file
    if (rest.data() == line.data() && parseCriLine(rest, &cri)) return LogFormat::kCriLog;
    SyslogLine sl;
    // A host name starts with a letter or digit: `kubectl logs --timestamps` puts an RFC 3339
    // stamp before the container's own text ("...Z [default0]:[rank0]: ..."), not a host.
    if (parseIsoSyslog(rest, &sl) && !sl.ident.empty() && !sl.host.empty() &&
        std::isalnum(static_cast<unsigned char>(sl.host.front())))
      return LogFormat::kJournalShortIso;
    return LogFormat::kApplication;
  }
  if (rest.front() == '-' && isJournalMarker(rest)) return LogFormat::kJournalShortIso;
  if (rest.front() >= 'A' && rest.front() <= 'Z') {
    SyslogLine sl;
    if (parseTraditionalSyslog(rest, 1970, &sl) && !sl.ident.empty()) return LogFormat::kSyslog;
    const size_t eq = rest.find('=');
    if (eq != std::string_view::npos && isExportKey(rest.substr(0, eq))) {
      return LogFormat::kJournalExport;
    }
    if (isExportKey(trimRight(rest))) return LogFormat::kUnknown;  // export binary field name
  }
  if (rest.front() == '_') {
    const size_t eq = rest.find('=');
    if (isExportKey(rest.substr(0, eq))) {
      return eq == std::string_view::npos ? LogFormat::kUnknown : LogFormat::kJournalExport;
    }
  }
  return LogFormat::kApplication;
}

// A line with a console logger's wall-clock stamp and no kernel stamp after it.
bool isConsoleNoise(std::string_view line) {
  parse::WallStamp wall;
  return line.front() == '[' && parse::parseBracketWallStamp(line, &wall);
}

}  // namespace

LogFormat classifyLogLine(std::string_view line) { return classifyLine(line); }

LogFormat detectFormat(std::string_view head) {
  if (head.size() > kHeadLimit) head = head.substr(0, kHeadLimit);
  // A line cut by the head limit could vote wrongly; keep it only when it is all we have.
  if (head.size() == kHeadLimit) {
    const size_t last_nl = head.rfind('\n');
    if (last_nl != std::string_view::npos) head = head.substr(0, last_nl + 1);
  }
  constexpr size_t kFormats = static_cast<size_t>(LogFormat::kApplication) + 1;
  std::array<size_t, kFormats> votes{};
  bool export_anchor = false;
  size_t console_noise = 0;
  size_t voted = 0;
  size_t pos = 0;
  while (pos < head.size() && voted < kMaxVotingLines) {
    size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (parse::trimRight(line).empty()) continue;
    const LogFormat f = classifyLine(line);
    if (f == LogFormat::kUnknown) continue;
    if (f == LogFormat::kApplication && isConsoleNoise(line)) {
      ++console_noise;
      ++voted;
      continue;
    }
    if (f == LogFormat::kJournalExport &&
        (parse::startsWith(line, "MESSAGE=") || parse::startsWith(line, "__REALTIME_TIMESTAMP=") ||
         parse::startsWith(line, "__CURSOR="))) {
      export_anchor = true;
    }
    ++votes[static_cast<size_t>(f)];
    ++voted;
  }
  if (!export_anchor) {
    votes[static_cast<size_t>(LogFormat::kApplication)] +=
        votes[static_cast<size_t>(LogFormat::kJournalExport)];
    votes[static_cast<size_t>(LogFormat::kJournalExport)] = 0;
  }
  votes[static_cast<size_t>(votes[static_cast<size_t>(LogFormat::kConsole)] > 0 ? LogFormat::kConsole
                                                                                  : LogFormat::kApplication)] +=
      console_noise;
  LogFormat best = LogFormat::kApplication;
  size_t best_votes = votes[static_cast<size_t>(LogFormat::kApplication)];
  for (size_t i = 0; i < kFormats; ++i) {
    if (votes[i] > best_votes) {
      best = static_cast<LogFormat>(i);
      best_votes = votes[i];
    }
  }
  return best;
}

}  // namespace faultline::common
