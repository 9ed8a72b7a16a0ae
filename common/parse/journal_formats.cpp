// journalctl -o json and -o export, and the field-map -> LogRecord conversion shared with the
// sd-journal readers (common/journal/).
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common {

std::optional<LogRecord> recordFromJournalFields(
    const std::map<std::string, std::string>& fields) {
  const auto message = fields.find("MESSAGE");
  if (message == fields.end()) return std::nullopt;
  LogRecord rec;
  std::string_view text = message->second;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  parse::repairText(text, /*allow_newline=*/true, &rec.text);

  auto field = [&](const char* key) -> const std::string* {
    const auto it = fields.find(key);
    return it == fields.end() ? nullptr : &it->second;
  };
  auto micros = [](const std::string* v, int64_t* out) {
    if (v == nullptr) return false;
    size_t pos = 0;
    uint64_t us = 0;
    if (!parse::readUint(*v, &pos, &us) || pos != v->size() || us > INT64_MAX / 1000) {
      return false;
    }
    *out = static_cast<int64_t>(us) * 1000;
    return true;
  };
  int64_t ns = 0;
  if (micros(field("__REALTIME_TIMESTAMP"), &ns)) {
    rec.time_ns = ns;
    rec.time_known = true;
  }
  if (micros(field("__MONOTONIC_TIMESTAMP"), &ns)) rec.monotonic_ns = ns;
  if (const auto* v = field("_BOOT_ID")) rec.boot_id = *v;
  if (const auto* v = field("_HOSTNAME")) rec.host = *v;
  const auto* transport = field("_TRANSPORT");
  if (transport != nullptr && *transport == "kernel") {
    rec.ident = "kernel";
  } else if (const auto* v = field("SYSLOG_IDENTIFIER"); v != nullptr && !v->empty()) {
    rec.ident = *v;
  } else if (const auto* c = field("_COMM"); c != nullptr && !c->empty()) {
    rec.ident = *c;
  } else if (const auto* u = field("_SYSTEMD_UNIT")) {
    rec.ident = *u;
  }
  if (const auto* v = field("PRIORITY"); v != nullptr && v->size() == 1 && (*v)[0] >= '0' &&
                                         (*v)[0] <= '7') {
    rec.priority = (*v)[0] - '0';
  }
  return rec;
}

namespace parse {
namespace {

// A MESSAGE that is binary beyond repair is skipped like a binary line.
bool messageIsBinary(const std::map<std::string, std::string>& fields) {
  const auto it = fields.find("MESSAGE");
  if (it == fields.end()) return false;
  std::string scratch;
  std::string_view out;
  return checkText(it->second, /*allow_newline=*/true, &scratch, &out) == TextVerdict::kBinary;
}

class JournalJsonParser final : public LineParser {
 public:
  JournalJsonParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kJournalJson, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!textLine(raw, &line)) return;
    if (trimRight(line).empty()) {
      skipLine(SkipKind::kOther, "");
      return;
    }
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) {
      skipLine(SkipKind::kMalformed, "not a JSON object");
      return;
    }
    fields_.clear();
    for (auto it = json.begin(); it != json.end(); ++it) {
      std::string value;
      if (toFieldValue(it.value(), &value)) fields_.emplace(it.key(), std::move(value));
    }
    if (messageIsBinary(fields_)) {
      skipLine(SkipKind::kBinary, "binary MESSAGE skipped");
      return;
    }
    auto rec = recordFromJournalFields(fields_);
    if (!rec) {
      skipLine(SkipKind::kMalformed, "journal entry without MESSAGE");
      return;
    }
    rec->line = line_no_;
    emit(std::move(*rec));
  }

  // journalctl -o json: strings; arrays of byte values for binary data; arrays of values for
  // fields present several times (the first is used); null for values above --field-size /
  // 4096 bytes without --all (kept as an empty value: the entry exists, its text was elided).
  static bool toFieldValue(const nlohmann::json& v, std::string* out) {
    if (v.is_string()) {
      *out = v.get<std::string>();
      return true;
    }
    if (v.is_null()) {
      out->clear();
      return true;
    }
    if (v.is_number_unsigned() || v.is_number_integer()) {
      *out = v.dump();
      return true;
    }
    if (v.is_array()) {
      if (v.empty()) {
        out->clear();
        return true;
      }
      if (v.front().is_number()) {
        out->clear();
        out->reserve(v.size());
        for (const auto& b : v) {
          if (!b.is_number_unsigned() || b.get<uint64_t>() > 255) return false;
          out->push_back(static_cast<char>(b.get<uint64_t>()));
        }
        return true;
      }
      return toFieldValue(v.front(), out);
    }
    if (v.is_boolean()) {
      *out = v.get<bool>() ? "true" : "false";
      return true;
    }
    return false;
  }

  std::map<std::string, std::string> fields_;
};

// Export format: "KEY=value\n" lines; a binary-safe field is "KEY\n" + little-endian uint64
// length + bytes + "\n"; an empty line ends the entry.
class JournalExportParser final : public LineParser {
 public:
  JournalExportParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kJournalExport, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view raw) override {
    if (raw.empty()) {
      if (entry_lines_ == 0) {
        skipLine(SkipKind::kOther, "");  // stray blank line
      } else {
        ++entry_lines_;  // the separator belongs to its entry
        endEntry();
      }
      return;
    }
    std::string_view line;
    if (!textLine(raw, &line)) return;
    const size_t eq = line.find('=');
    const std::string_view key = line.substr(0, eq);
    if (!validKey(key)) {
      skipLine(SkipKind::kMalformed, "not an export field");
      return;
    }
    // Hand-edited or concatenated exports sometimes lose the blank separator: an entry's
    // opening fields seen again mean a new entry began.
    if (entry_lines_ > 0 && (key == "__CURSOR" || (key == "__REALTIME_TIMESTAMP" && fields_.count("__REALTIME_TIMESTAMP")))) {
      addNote(line_no_, "entry without a blank separator line");
      endEntry();
    }
    if (entry_lines_ == 0) entry_first_line_ = line_no_;
    ++entry_lines_;
    if (eq != std::string_view::npos) {
      fields_[std::string(key)] = std::string(line.substr(eq + 1));
      return;
    }
    pending_key_.assign(key);
    want_length_ = true;
    readRaw(8);
  }

  void onRaw(std::string_view bytes) override {
    if (want_length_) {
      want_length_ = false;
      uint64_t len = 0;
      for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
      if (len >= options_.max_line_bytes) {
        // Not a line, so not counted in oversized/skipped; the entry keeps its other fields.
        addNote(line_no_, "binary field " + pending_key_ + " over max_line_bytes dropped");
        readRaw(len == UINT64_MAX ? len : len + 1);
        return;
      }
      readRaw(len + 1);  // data and its terminating '\n'
      return;
    }
    if (bytes.empty() || bytes.back() != '\n') {
      addNote(line_no_, "binary field " + pending_key_ + " not terminated by newline");
    } else {
      bytes.remove_suffix(1);
    }
    fields_[pending_key_] = std::string(bytes);
  }

  void onRawTruncated() override {
    addNote(line_no_, "stream ends inside binary field " + pending_key_);
  }

  void onEnd() override {
    if (entry_lines_ > 0) endEntry();
  }

  static bool validKey(std::string_view key) {
    if (key.empty() || key.size() > 256) return false;
    for (char c : key) {
      if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
  }

  void endEntry() {
    const uint64_t lines = entry_lines_;
    entry_lines_ = 0;
    if (messageIsBinary(fields_)) {
      report_.skipped += lines;
      report_.binary += lines;
      addNote(entry_first_line_, "binary MESSAGE skipped");
    } else if (auto rec = recordFromJournalFields(fields_)) {
      rec->line = entry_first_line_;
      emit(std::move(*rec));
    } else {
      report_.skipped += lines;  // an entry without MESSAGE is valid export, just not a record
    }
    fields_.clear();
  }

  std::map<std::string, std::string> fields_;
  std::string pending_key_;
  bool want_length_ = false;
  uint64_t entry_first_line_ = 0;
  uint64_t entry_lines_ = 0;
};

}  // namespace

std::unique_ptr<StreamParser> makeJournalJsonParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<JournalJsonParser>(std::move(options), std::move(sink));
}

std::unique_ptr<StreamParser> makeJournalExportParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<JournalExportParser>(std::move(options), std::move(sink));
}

}  // namespace parse
}  // namespace faultline::common
