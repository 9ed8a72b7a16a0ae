// A small blocking HTTP/1.1 client (Boost.Beast) for `faultline --server` and the tests.
// Each call opens one connection; never throws.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace faultline::aggregator {

struct HttpResult {
  int status = 0;
  std::string body;
};

// `base_url`: "http://host:port" (optionally with a path prefix). `target` starts with '/'.
std::optional<HttpResult> httpCall(const std::string& base_url, const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& bearer_token,
                                   std::chrono::milliseconds timeout, std::string* error);

}  // namespace faultline::aggregator
