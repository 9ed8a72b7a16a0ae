#include "aggregator/cli/html_report.h"

#include <fstream>

#include "aggregator/http/web_assets.h"

namespace faultline::cli {

namespace {

std::string_view asset(std::string_view name) {
  const auto* a = aggregator::findWebAsset(name);
  return a ? a->body : std::string_view();
}

// Text for an HTML attribute or element (the job id in the title).
std::string escapeHtml(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string jsonForScript(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else out += c;
  }
  return out;
}

std::string renderHtmlReport(const nlohmann::json& diagnosis) {
  std::string job = diagnosis.value("job_id", "");
  std::string out;
  out += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may load from anywhere: the file is read from disk, attached to tickets.
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
         "script-src 'unsafe-inline'; img-src data: blob:\">\n";
  out += "<title>faultline: job " + escapeHtml(job) + "</title>\n";
  out += "<link rel=\"icon\" href=\"data:,\">\n<style>\n";  // no favicon request either
  out += asset("app.css");
  out += "\n</style>\n</head>\n<body data-ready=\"0\" class=\"offline\">\n";
  out += "<header class=\"top\"><span class=\"brand\">faultline</span><span class=\"sub\">offline report</span></header>\n";
  out += "<main id=\"page\" data-page=\"job\"></main>\n";
  out += "<script type=\"application/json\" id=\"diagnosis\">" + jsonForScript(diagnosis) + "</script>\n";
  out += "<script>\n";
  out += asset("job_view.js");
  out += "\n</script>\n<script>\n";
  out += asset("report.js");
  out += "\n</script>\n</body>\n</html>\n";
  return out;
}

bool writeHtmlReport(const nlohmann::json& diagnosis, const std::string& path, std::string* error) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << renderHtmlReport(diagnosis);
  f.flush();
  if (!f) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace faultline::cli
