// HTTP/1.1 server (Boost.Beast) in front of Api, plain or TLS (OpenSSL). Runs on the caller's
// io_context: the Api, and through it the store and verdict engine, are only ever called from that
// io_context's thread. Each connection: keep-alive; the limits below (HttpLimits) bound what one
// client may hold: body and header sizes, header count, the time to deliver a request's header
// (slowloris), and the number of open connections. Errors on one connection close it and never
// reach the accept loop.
#pragma once

#include <utility>  // Boost 1.74 Asio + GCC 12: std::exchange must be declared first

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "aggregator/http/api.h"

namespace boost::asio::ssl {
class context;
}

namespace faultline::aggregator {

struct HttpLimits {
  uint64_t body_bytes = 1 << 20;          // request bodies beyond this: 413
  uint64_t output_body_bytes = 64 << 20;  // POST /jobs/{id}/output with the write token
  uint32_t header_bytes = 16 << 10;       // request line + header fields beyond this: 431, closed
  size_t header_count = 100;              // header fields beyond this: 431, closed
  // From a connection's accept (or its previous response) to its request's last header byte;
  // a client that dribbles its header slower than this is closed (slowloris).
  std::chrono::milliseconds header_timeout{30000};
  std::chrono::milliseconds body_timeout{120000};  // header end to body end
  size_t max_connections = 512;                    // beyond: 503 and closed at once
};

struct HttpServerOptions {
  HttpLimits limits;
  // Both set: HTTPS only (PEM certificate chain and private key); both empty: plain HTTP.
  std::string tls_cert_file, tls_key_file;
};

// 127.0.0.1, ::1 and localhost.
bool isLoopbackAddress(const std::string& address);
// Why the API must not listen on `address` as configured ("" = fine): beyond loopback it needs TLS
// and a read token, unless `insecure_http` (an operator's explicit choice, e.g. behind a proxy).
std::string exposureError(const std::string& address, bool tls, bool read_token, bool insecure_http);

class HttpServer {
 public:
  // `api` must outlive the server.
  HttpServer(boost::asio::io_context& io, Api& api, HttpServerOptions options = {});
  ~HttpServer();
  // Loads the TLS certificate and key (if any), binds and starts accepting. `address`
  // "127.0.0.1" by default; port 0 = ephemeral.
  bool listen(const std::string& address, uint16_t port, std::string* error);
  uint16_t port() const;
  bool tls() const { return !options_.tls_cert_file.empty(); }
  // Connections open now (for tests and metrics).
  size_t connections() const { return *open_; }
  void stop();

 private:
  void accept();

  boost::asio::io_context& io_;
  Api& api_;
  HttpServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<std::atomic<size_t>> open_ = std::make_shared<std::atomic<size_t>>(0);
};

}  // namespace faultline::aggregator
