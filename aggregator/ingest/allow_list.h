// The agents' allow-list: a directory with one file per node, `HOST.pub`, holding that node's
// CurveZMQ public key in Z85 (40 characters, as `faultline keygen` / `faultline-agent keygen`
// write it). The file name binds the key to the hostname: a connection authenticated with the
// key may only speak for HOST.
//
// Site relays (aggregators forwarding an edge site upstream) are filed under `relays/SITE.pub`
// and named "relay:SITE": a hostname never contains ':', so a node's key can never speak for a
// site nor a site's key for a node.
//
// Pure: reading the directory is the only I/O. Never throws.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::aggregator {

inline constexpr std::string_view kRelayPrefix = "relay:";

struct AllowList {
  std::map<std::string, std::string> host_by_key;  // Z85 public key -> hostname
};

// Reads every `*.pub` file in `dir` and in `dir/relays` (other files are ignored). A file that is not one Z85 key, or
// a key filed under two hostnames, is left out and reported in *errors ("dir/x.pub: why");
// the rest still loads. A missing or unreadable directory is an error with an empty list.
AllowList loadAllowList(const std::string& dir, std::vector<std::string>* errors);

// True when `z85` is a 40-character Z85 string that decodes to a 32-byte key.
bool isZ85Key(const std::string& z85);

}  // namespace faultline::aggregator
