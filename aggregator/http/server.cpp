#include "aggregator/http/server.h"

#include <utility>

#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>

namespace faultline::aggregator {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr uint64_t kBodyLimit = 1 << 20;
constexpr uint64_t kOutputBodyLimit = 64 << 20;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Api& api) : stream_(std::move(socket)), api_(api) {}
  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    // Beast checks a Content-Length against the limit as the header completes: the larger bound
    // first, then the header decides (onHeader).
    parser_->body_limit(kOutputBodyLimit);
    parser_->header_limit(16 << 10);
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->onHeader(ec); });
  }

  // A job output (the symptoms of a whole job's log) may be larger than other requests, once
  // the header shows the write token; everyone else stays at 1 MiB.
  void onHeader(beast::error_code ec) {
    if (ec) return onRead(ec);
    const auto& req = parser_->get();
    if (req.method() != http::verb::post || !req.target().ends_with("/output") ||
        !api_.writeAuthorized(std::string(req[http::field::authorization]))) {
      if (parser_->content_length().value_or(0) > kBodyLimit) return onRead(http::error::body_limit);
      parser_->body_limit(kBodyLimit);  // chunked bodies: checked as they arrive
    }
    stream_.expires_after(std::chrono::seconds(120));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->onRead(ec); });
  }

  void onRead(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::body_limit) respond(false, 413, R"({"error": "request body too large"})" "\n", "application/json");
      else stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
    const auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.cookie = std::string(req[http::field::cookie]);
    r.body = req.body();
    HttpResponse out;
    try {
      out = api_.handle(r);
    } catch (const std::exception& e) {
      // A bug: answer 500 and keep serving; nothing escapes the handler.
      out = {500, "application/json", std::string(R"({"error": "internal error"})") + "\n", {}};
    }
    if (r.method == "HEAD") out.body.clear();
    respond(req.keep_alive(), out.status, std::move(out.body), out.content_type, out.headers);
  }

  void respond(bool keep_alive, int status, std::string body, const std::string& type,
               const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::server, "faultline-aggregator/" FAULTLINE_VERSION);
    res->set(http::field::content_type, type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->keep_alive(keep_alive);
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) {
        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        return;
      }
      self->read();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Api& api_;
};

}  // namespace

HttpServer::HttpServer(net::io_context& io, Api& api) : io_(io), api_(api), acceptor_(io) {}
HttpServer::~HttpServer() { stop(); }

bool HttpServer::listen(const std::string& address, uint16_t port, std::string* error) {
  beast::error_code ec;
  auto addr = net::ip::make_address(address, ec);
  if (ec) {
    *error = "bad listen address '" + address + "'";
    return false;
  }
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    *error = "listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return false;
  }
  accept();
  return true;
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::stop() {
  beast::error_code ec;
  acceptor_.close(ec);
}

void HttpServer::accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) std::make_shared<Session>(std::move(socket), api_)->start();
    accept();
  });
}

}  // namespace faultline::aggregator
