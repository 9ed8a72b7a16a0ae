#include "aggregator/http/web_assets.h"

namespace faultline::aggregator {

const WebAsset* findWebAsset(std::string_view name) {
  for (size_t i = 0; i < kWebAssetCount; ++i)
    if (kWebAssets[i].name == name) return &kWebAssets[i];
  return nullptr;
}

std::string_view webContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json")) return "application/json";
  return "application/octet-stream";
}

}  // namespace faultline::aggregator
