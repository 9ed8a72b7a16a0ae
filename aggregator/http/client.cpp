#include "aggregator/http/client.h"

#include <utility>

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace faultline::aggregator {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

namespace {

// One request and its answer on a connected (and, for TLS, handshaken) stream.
template <class Stream>
std::optional<HttpResult> exchange(Stream& stream, const std::string& host, const std::string& method,
                                   const std::string& target, const std::string& body,
                                   const std::string& bearer_token, std::chrono::milliseconds timeout,
                                   const std::string& base_url, std::string* error, const HttpCallExtras& extras) {
  beast::error_code ec;
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "faultline/" FAULTLINE_VERSION);
  if (!extras.authorization.empty()) req.set(http::field::authorization, extras.authorization);
  else if (!bearer_token.empty()) req.set(http::field::authorization, "Bearer " + bearer_token);
  if (!body.empty()) req.set(http::field::content_type, extras.content_type);
  req.body() = body;
  req.prepare_payload();
  beast::get_lowest_layer(stream).expires_after(timeout);
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(512 << 20);
  if (!ec) http::read(stream, buffer, parser, ec);
  if (ec) {
    *error = base_url + ": " + ec.message();
    return std::nullopt;
  }
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ec);
  HttpResult out(static_cast<int>(parser.get().result_int()), parser.get().body());
  for (const auto& f : parser.get()) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

}  // namespace

std::optional<HttpResult> httpCall(const std::string& base_url, const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& bearer_token,
                                   std::chrono::milliseconds timeout, std::string* error, const std::string& ca_file,
                                   const HttpCallExtras& extras) {
  std::string url = base_url;
  const bool https = url.rfind("https://", 0) == 0;
  if (url.rfind("http://", 0) == 0) url = url.substr(7);
  else if (https) url = url.substr(8);
  else if (url.find("://") != std::string::npos) {
    *error = "only http:// and https:// URLs are supported: " + base_url;
    return std::nullopt;
  }
  std::string prefix;
  if (auto slash = url.find('/'); slash != std::string::npos) {
    prefix = url.substr(slash);
    url = url.substr(0, slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  }
  std::string host = url, port = https ? "443" : "80";
  if (auto colon = url.rfind(':'); colon != std::string::npos && url.find(']', colon) == std::string::npos) {
    host = url.substr(0, colon);
    port = url.substr(colon + 1);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
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
    if (!https) return exchange(stream, host, method, prefix + target, body, bearer_token, timeout, base_url, error, extras);

    ssl::context ctx(ssl::context::tls_client);
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                    ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    if (ca_file.empty()) ctx.set_default_verify_paths(ec);
    else ctx.load_verify_file(ca_file, ec);
    if (ec) {
      *error = "CA file " + (ca_file.empty() ? std::string("(system default)") : ca_file) + ": " + ec.message();
      return std::nullopt;
    }
    ctx.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> tls(std::move(stream), ctx);
    tls.set_verify_callback(ssl::host_name_verification(host));
    // SNI, for servers behind a name-based proxy (not for IP literals).
    boost::system::error_code addr_ec;
    net::ip::make_address(host, addr_ec);
    if (addr_ec) SSL_set_tlsext_host_name(tls.native_handle(), host.c_str());
    beast::get_lowest_layer(tls).expires_after(timeout);
    tls.handshake(ssl::stream_base::client, ec);
    if (ec) {
      std::string why = ec.message();
      if (long v = SSL_get_verify_result(tls.native_handle()); v != X509_V_OK)
        why += std::string(" (") + X509_verify_cert_error_string(v) + ")";
      *error = base_url + ": TLS handshake: " + why;
      return std::nullopt;
    }
    return exchange(tls, host, method, prefix + target, body, bearer_token, timeout, base_url, error, extras);
  } catch (const std::exception& e) {
    *error = base_url + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace faultline::aggregator
