// HTTP/1.1 server (Boost.Beast) in front of Api. Runs on the caller's io_context: the Api, and
// through it the store and verdict engine, are only ever called from that io_context's thread.
// Each connection: keep-alive, 30 s idle timeout, request bodies up to 1 MiB. Errors on one
// connection close it and never reach the accept loop.
#pragma once

#include <utility>  // Boost 1.74 Asio + GCC 12: std::exchange must be declared first

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>

#include "aggregator/http/api.h"

namespace faultline::aggregator {

class HttpServer {
 public:
  // `api` must outlive the server.
  HttpServer(boost::asio::io_context& io, Api& api);
  ~HttpServer();
  // Binds and starts accepting. `address` "127.0.0.1" by default; port 0 = ephemeral.
  bool listen(const std::string& address, uint16_t port, std::string* error);
  uint16_t port() const;
  void stop();

 private:
  void accept();

  boost::asio::io_context& io_;
  Api& api_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace faultline::aggregator
