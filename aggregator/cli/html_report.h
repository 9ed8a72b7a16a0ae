// `faultline attribute BUNDLE --html FILE`: one self-contained HTML file with the dashboard's job
// view (web/job_view.js and web/app.css inlined, the diagnosis embedded as JSON), readable from
// file:// with no network. The same code renders the live job page under /ui/ (docs/dashboard.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace faultline::cli {

// The report page for one diagnosis document (docs/output-schema.md). The JSON is embedded in a
// <script type="application/json"> element with '<', '>', '&' and U+2028/U+2029 escaped as
// \uXXXX, so no text from a log can close the element or start markup.
std::string renderHtmlReport(const nlohmann::json& diagnosis);

// Writes renderHtmlReport(diagnosis) to `path`. false + *error when the file cannot be written.
bool writeHtmlReport(const nlohmann::json& diagnosis, const std::string& path, std::string* error);

// JSON text safe inside an HTML <script> element (see renderHtmlReport).
std::string jsonForScript(const nlohmann::json& value);

}  // namespace faultline::cli
