// A symptom as the store keeps it and the API serves it. Two forms:
//   - JSON (symptomToJson, symptomJsonText): the API's and job outputs' form, and the payload of
//     symptom rows written before store migration 9;
//   - the compact payload (encodeSymptomPayload): what a symptom row's other columns do not hold,
//     in a small binary encoding; decodeSymptomRow puts it together with those columns.
// Pure functions: no store, no I/O. Bad input never throws: a payload that is neither form
// decodes to what symptomFromJson gives for it (the defaults, for garbage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/symptom.h"

namespace faultline::aggregator {

class PayloadDictionaries;

// Symptom <-> JSON as kept in the store and served by the API.
nlohmann::json symptomToJson(const common::Symptom& s);
// The same text as symptomToJson(s).dump(), written directly (no json tree).
std::string symptomJsonText(const common::Symptom& s);
// symptomFromJson(json::parse(payload)), reading the text symptomJsonText writes directly; any
// other text is parsed with nlohmann::json (not a JSON object: the defaults).
common::Symptom symptomFromPayload(std::string_view payload);
common::Symptom symptomFromJson(const nlohmann::json& j);
std::optional<common::SourceKind> parseSourceKind(std::string_view s);

// The columns of a symptom row beside its payload (migration 1's table), as the store writes them
// from the symptom (boot_id: the batch's, which the symptom's own may differ from).
struct SymptomColumns {
  std::string_view node, rule_id, sub_domain, role, severity, device, boot_id;
  int64_t first_ns = 0, last_ns = 0;
  bool time_known = false;
  int64_t count = 1;
};

// The compact payload of `s` stored in a row whose boot_id column is `row_boot_id`: a tag byte
// (kCompactPayloadTag, never '{') and, length-prefixed, only what no column holds (symptom,
// category, source, source kind, fallback_root, summary, evidence, fields; the boot id only when
// it differs from the row's).
inline constexpr char kCompactPayloadTag = '\x01';
std::string encodeSymptomPayload(const common::Symptom& s, std::string_view row_boot_id);
// The symptom of a row: its columns and payload, any form. A JSON payload is read whole (its
// own values win, as before migration 9); a compact one takes the rest from the columns; a packed
// one (symptom_dictionary.h, migration 10) is unpacked with its dictionary from `dicts` first
// (none there, or no `dicts`: damaged, the columns alone). At most `max_evidence` evidence lines
// are kept (the verdict's reads want the first only).
common::Symptom decodeSymptomRow(const SymptomColumns& c, std::string_view payload,
                                 size_t max_evidence = SIZE_MAX, const PayloadDictionaries* dicts = nullptr);

}  // namespace faultline::aggregator
