// The dashboard's static files (web/), built into the binary by web/embed.cmake: the pages under
// /ui/ and the offline report (`faultline attribute --html`) read them from here.
#pragma once

#include <cstddef>
#include <string_view>

namespace faultline::aggregator {

struct WebAsset {
  std::string_view name;  // path under web/, e.g. "job_view.js"
  std::string_view body;
};

// Generated table (web_assets_data.cpp in the build tree).
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The asset called `name`, or nullptr.
const WebAsset* findWebAsset(std::string_view name);
// Content-Type by extension (text/html, text/css, text/javascript, image/svg+xml, ...).
std::string_view webContentType(std::string_view name);

}  // namespace faultline::aggregator
