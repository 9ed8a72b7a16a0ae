#include "aggregator/http/server.h"

#include <utility>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <type_traits>

namespace faultline::aggregator {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

namespace {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One open connection, counted while it lives (HttpLimits::max_connections).
struct Slot {
  explicit Slot(std::shared_ptr<std::atomic<size_t>> open) : open_(std::move(open)) { ++*open_; }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() { --*open_; }
  std::shared_ptr<std::atomic<size_t>> open_;
};

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Session(Stream stream, Api& api, const HttpLimits& limits, std::shared_ptr<std::atomic<size_t>> open,
          std::shared_ptr<ssl::context> tls)
      : stream_(std::move(stream)), api_(api), limits_(limits), slot_(std::move(open)), tls_(std::move(tls)) {}

  void start() {
    if constexpr (kTls) {
      // The handshake counts against the header's time: a client that stalls in it is a slow client.
      lowest().expires_after(limits_.header_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) return self->close();
        self->read();
      });
    } else {
      read();
    }
  }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  void close() {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().socket().close(ec);
  }

  void read() {
    parser_.emplace();
    // Beast checks a Content-Length against the limit as the header completes: the larger bound
    // first, then the header decides (onHeader).
    parser_->body_limit(std::max(limits_.output_body_bytes, limits_.body_bytes));
    parser_->header_limit(limits_.header_bytes);
    // One deadline for the whole header, however it trickles in.
    lowest().expires_after(limits_.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->onHeader(ec);
    });
  }

  // A job output (the symptoms of a whole job's log) may be larger than other requests, once
  // the header shows the write token; everyone else stays at HttpLimits::body_bytes.
  void onHeader(beast::error_code ec) {
    if (ec) return onRead(ec);
    const auto& req = parser_->get();
    if (static_cast<size_t>(std::distance(req.begin(), req.end())) > limits_.header_count)
      return onRead(http::error::header_limit);
    if (req.method() != http::verb::post || !req.target().ends_with("/output") ||
        !api_.writeAuthorized(std::string(req[http::field::authorization]))) {
      if (parser_->content_length().value_or(0) > limits_.body_bytes) return onRead(http::error::body_limit);
      parser_->body_limit(limits_.body_bytes);  // chunked bodies: checked as they arrive
    }
    lowest().expires_after(limits_.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->onRead(ec); });
  }

  void onRead(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::body_limit)
        respond(false, 413, R"({"error": "request body too large"})" "\n", "application/json");
      else if (ec == http::error::header_limit)
        respond(false, 431, R"({"error": "request header too large or too many header fields"})" "\n",
                "application/json");
      else
        close();
      return;
    }
    const auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.cookie = std::string(req[http::field::cookie]);
    beast::error_code peer_ec;
    const auto peer = lowest().socket().remote_endpoint(peer_ec);
    if (!peer_ec) r.peer = peer.address().to_string();
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
    lowest().expires_after(limits_.body_timeout);  // a client that does not read its answer
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->close();
                        self->read();
                      });
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Api& api_;
  HttpLimits limits_;
  Slot slot_;
  std::shared_ptr<ssl::context> tls_;  // outlives the stream that uses it
};

// Beyond max_connections: a short 503 and the socket closed, without reading the request.
void refuse(tcp::socket socket) {
  static const std::string kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: 34\r\n\r\n{\"error\": \"too many connections\"}\n";
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  net::async_write(*s, net::buffer(kBusy), [s](beast::error_code ec, size_t) {
    s->shutdown(tcp::socket::shutdown_both, ec);
    s->close(ec);
  });
}

}  // namespace

bool isLoopbackAddress(const std::string& address) {
  return address == "127.0.0.1" || address == "::1" || address == "localhost";
}

std::string exposureError(const std::string& address, bool tls, bool read_token, bool insecure_http) {
  if (isLoopbackAddress(address) || insecure_http) return "";
  if (!tls)
    return "refusing to serve plain HTTP on " + address +
           " (beyond loopback): give --tls-cert and --tls-key, or --insecure-http to accept the risk";
  if (!read_token)
    return "refusing to serve reads on " + address +
           " (beyond loopback) without --read-token-file: anyone who reaches the port would read every "
           "verdict and log line (or give --insecure-http)";
  return "";
}

HttpServer::HttpServer(net::io_context& io, Api& api, HttpServerOptions options)
    : io_(io), api_(api), options_(std::move(options)), acceptor_(io) {}
HttpServer::~HttpServer() { stop(); }

bool HttpServer::listen(const std::string& address, uint16_t port, std::string* error) {
  beast::error_code ec;
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    *error = "TLS needs both a certificate and a key file";
    return false;
  }
  if (!options_.tls_cert_file.empty()) {
    tls_ = std::make_shared<ssl::context>(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (ec) {
      *error = "TLS certificate " + options_.tls_cert_file + ": " + ec.message();
      return false;
    }
    tls_->use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      *error = "TLS key " + options_.tls_key_file + ": " + ec.message();
      return false;
    }
  }
  auto addr = net::ip::make_address(address == "localhost" ? "127.0.0.1" : address, ec);
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
    if (!ec) {
      if (*open_ >= options_.limits.max_connections) refuse(std::move(socket));
      else if (tls_)
        std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *tls_), api_, options_.limits, open_, tls_)
            ->start();
      else
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), api_, options_.limits,
                                                     open_, nullptr)
            ->start();
    }
    accept();
  });
}

}  // namespace faultline::aggregator
