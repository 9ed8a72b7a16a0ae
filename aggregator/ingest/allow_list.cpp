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

namespace {

std::vector<fs::path> pubFiles(const fs::path& dir, std::error_code& ec) {
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".pub") files.push_back(it->path());
  std::sort(files.begin(), files.end());  // deterministic winner reports for duplicates
  return files;
}

}  // namespace

AllowList loadAllowList(const std::string& dir, std::vector<std::string>* errors) {
  AllowList list;
  std::error_code ec;
  std::vector<fs::path> files = pubFiles(dir, ec);
  if (ec) {
    errors->push_back(dir + ": " + ec.message());
    return list;
  }
  // Site relays (optional subdirectory): named "relay:SITE", which no hostname can be.
  std::vector<fs::path> relays;
  if (fs::path sub = fs::path(dir) / "relays"; fs::is_directory(sub, ec)) {
    relays = pubFiles(sub, ec);
    if (ec) errors->push_back(sub.string() + ": " + ec.message());
  }
  const size_t first_relay = files.size();
  files.insert(files.end(), relays.begin(), relays.end());
  std::map<std::string, std::string> first_file;  // key -> file that filed it first
  std::vector<std::string> duplicated;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& path = files[i];
    bool relay = i >= first_relay;
    std::string host = (relay ? std::string(kRelayPrefix) : "") + path.stem().string();
    std::ifstream in(path);
    std::string key, extra;
    in >> key >> extra;  // one token, nothing after it (a trailing newline is fine)
    if (path.stem().empty() || !in.eof() || !extra.empty() || !isZ85Key(key)) {
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
