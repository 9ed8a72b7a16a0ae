#include "aggregator/ingest/allow_list.h"

#include <zmq.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace faultline::aggregator {

namespace fs = std::filesystem;

bool isZ85Key(const std::string& z85) {
  if (z85.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, z85.c_str()) != nullptr;
}

AllowList loadAllowList(const std::string& dir, std::vector<std::string>* errors) {
  AllowList list;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".pub") files.push_back(it->path());
  if (ec) {
    errors->push_back(dir + ": " + ec.message());
    return list;
  }
  std::sort(files.begin(), files.end());  // deterministic winner reports for duplicates
  std::map<std::string, std::string> first_file;  // key -> file that filed it first
  std::vector<std::string> duplicated;
  for (const auto& path : files) {
    std::string host = path.stem().string();
    std::ifstream in(path);
    std::string key, extra;
    in >> key >> extra;  // one token, nothing after it (a trailing newline is fine)
    if (host.empty() || !in.eof() || !extra.empty() || !isZ85Key(key)) {
      errors->push_back(path.string() + ": not one Z85 public key (40 characters)");
      continue;
    }
    if (auto it = first_file.find(key); it != first_file.end()) {
      // One key for two hosts would let either speak for the other: trust neither.
      errors->push_back(path.string() + ": same key as " + it->second + "; both ignored");
      duplicated.push_back(key);
      continue;
    }
    first_file[key] = path.string();
    list.host_by_key[key] = host;
  }
  for (const auto& k : duplicated) list.host_by_key.erase(k);
  return list;
}

}  // namespace faultline::aggregator
