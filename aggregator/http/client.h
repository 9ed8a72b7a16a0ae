// A small blocking HTTP/1.1 and HTTPS client (Boost.Beast, OpenSSL) for `faultline --server` and the tests.
// Each call opens one connection; never throws.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline::aggregator {

struct HttpResult {
  HttpResult() = default;
  HttpResult(int status_code, std::string response_body,
             std::vector<std::pair<std::string, std::string>> response_headers = {})
      : status(status_code), body(std::move(response_body)), headers(std::move(response_headers)) {}
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // as received (Content-Type, ...)
  // The first header called `name` (case-insensitive), or "".
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k.size() == name.size() &&
          std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
        return v;
    return "";
  }
};

// What a request carries besides its body: its content type, and an Authorization header value
// ("Basic ...") that replaces the bearer token's.
struct HttpCallExtras {
  std::string content_type = "application/json";
  std::string authorization;
};

// `base_url`: "http://host:port" or "https://host:port" (optionally with a path prefix). `target`
// starts with '/'. https: the server's certificate must chain to `ca_file` (PEM; "" = the system's
// trusted CAs) and name the URL's host; otherwise the call fails before anything is sent.
std::optional<HttpResult> httpCall(const std::string& base_url, const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& bearer_token,
                                   std::chrono::milliseconds timeout, std::string* error,
                                   const std::string& ca_file = "", const HttpCallExtras& extras = {});

}  // namespace faultline::aggregator
