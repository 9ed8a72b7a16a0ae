#include "aggregator/http/client.h"

#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace faultline::aggregator {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::optional<HttpResult> httpCall(const std::string& base_url, const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& bearer_token,
                                   std::chrono::milliseconds timeout, std::string* error) {
  std::string url = base_url;
  if (url.rfind("http://", 0) == 0) url = url.substr(7);
  else if (url.find("://") != std::string::npos) {
    *error = "only http:// URLs are supported: " + base_url;
    return std::nullopt;
  }
  std::string prefix;
  if (auto slash = url.find('/'); slash != std::string::npos) {
    prefix = url.substr(slash);
    url = url.substr(0, slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  }
  std::string host = url, port = "80";
  if (auto colon = url.rfind(':'); colon != std::string::npos) {
    host = url.substr(0, colon);
    port = url.substr(colon + 1);
  }
  try {
    net::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    beast::error_code ec;
    auto results = resolver.resolve(host, port, ec);
    if (ec) {
      *error = base_url + ": " + ec.message();
      return std::nullopt;
    }
    stream.expires_after(timeout);
    stream.connect(results, ec);
    if (ec) {
      *error = base_url + ": " + ec.message();
      return std::nullopt;
    }
    http::request<http::string_body> req(http::string_to_verb(method), prefix + target, 11);
    req.set(http::field::host, host);
    req.set(http::field::user_agent, "faultline/" FAULTLINE_VERSION);
    if (!bearer_token.empty()) req.set(http::field::authorization, "Bearer " + bearer_token);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    stream.expires_after(timeout);
    http::write(stream, req, ec);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(512 << 20);
    if (!ec) http::read(stream, buffer, parser, ec);
    if (ec) {
      *error = base_url + ": " + ec.message();
      return std::nullopt;
    }
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    HttpResult out(static_cast<int>(parser.get().result_int()), parser.get().body());
    for (const auto& f : parser.get()) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    return out;
  } catch (const std::exception& e) {
    *error = base_url + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace faultline::aggregator
