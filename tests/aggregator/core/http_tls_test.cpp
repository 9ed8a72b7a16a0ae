// The HTTP API beyond loopback (issue 16, part 3): the server's limits (body size, header size and
// count, slow clients, open connections) against raw sockets on 127.0.0.1; HTTPS with a test CA
// made here by the openssl command line; the refusal to listen beyond loopback without TLS and a
// read token (the real binary); the CLI's https --server with and without --ca-file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/http/server.h"
#include "aggregator/jobs/sacct_poller.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using Steady = std::chrono::steady_clock;

namespace {

// A real server on 127.0.0.1 (ephemeral port) with the given options, its io_context on a thread.
struct LimitedServer {
  TempDir dir;
  ManualClock clock{kT0};
  std::unique_ptr<Store> store;
  Metrics metrics;
  std::unique_ptr<Api> api;
  boost::asio::io_context io;
  std::unique_ptr<HttpServer> server;
  std::thread thread;
  uint16_t port = 0;

  explicit LimitedServer(HttpServerOptions options, const std::string& read_token = "") {
    std::string error;
    store = Store::open(dir.file("h.db"), clock, {}, &error);
    REQUIRE(store);
    ApiOptions ao;
    ao.write_token = "s3cret";
    ao.agent_timeout_ns = 90 * kSec;
    ao.read_token = read_token;
    api = std::make_unique<Api>(*store, nullptr, metrics, clock, ao);
    server = std::make_unique<HttpServer>(io, *api, std::move(options));
    INFO(error);
    REQUIRE(server->listen("127.0.0.1", 0, &error));
    port = server->port();
    thread = std::thread([this] { io.run(); });
  }
  ~LimitedServer() {
    boost::asio::post(io, [this] { server->stop(); io.stop(); });
    thread.join();
  }
  std::string url(const char* scheme = "http") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port);
  }
};

// A raw TCP client socket, closed when the object dies.
struct Conn {
  int fd = -1;
  explicit Conn(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~Conn() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  bool send(const std::string& s) { return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  // Waits up to `wait` for bytes. Appends them to *got; false once the peer closed (EOF or reset).
  bool receive(std::string* got, std::chrono::milliseconds wait) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    got->append(buf, static_cast<size_t>(n));
    return true;
  }
  // Everything until the server closes the connection; *closed says whether it did in `timeout`.
  std::string untilClosed(std::chrono::milliseconds timeout, bool* closed) {
    std::string got;
    auto deadline = Steady::now() + timeout;
    *closed = false;
    while (Steady::now() < deadline)
      if (!receive(&got, std::chrono::milliseconds(100))) {
        *closed = true;
        break;
      }
    return got;
  }
  // One whole response (header + Content-Length body) on a kept-alive connection; "" on timeout.
  std::string response(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string got;
    auto deadline = Steady::now() + timeout;
    while (Steady::now() < deadline) {
      if (!receive(&got, std::chrono::milliseconds(100))) return got;
      auto end = got.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      auto cl = got.find("Content-Length: ");
      if (cl == std::string::npos || cl > end) continue;
      size_t len = std::stoul(got.substr(cl + 16));
      if (got.size() >= end + 4 + len) return got;
    }
    return "";
  }
};

std::string healthz(bool keep_alive = true) {
  return std::string("GET /healthz HTTP/1.1\r\nHost: t\r\n") + (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}

CommandOutput sh(const std::string& cmd) { return runCommand(cmd + " 2>&1", 1 << 20); }

// A throwaway CA and a server certificate for 127.0.0.1 / localhost it signed (EC P-256: quick).
struct TestPki {
  TempDir dir;
  std::string ca, cert, key, other_ca;
  TestPki() {
    const std::string d = dir.path(), ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    std::ofstream(dir.file("ext")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n";
    std::ofstream(dir.file("ext-elsewhere")) << "subjectAltName=DNS:elsewhere.example\nbasicConstraints=CA:FALSE\n";
    for (const std::string& cmd : {
             "openssl req -x509" + ec + "-keyout " + d + "/ca.key -out " + d + "/ca.pem -days 2 -subj /CN=faultline-test-ca",
             "openssl req -x509" + ec + "-keyout " + d + "/other.key -out " + d + "/other.pem -days 2 -subj /CN=other-ca",
             "openssl req" + ec + "-keyout " + d + "/server.key -out " + d + "/server.csr -subj /CN=127.0.0.1",
             "openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -out " +
                 d + "/server.pem -days 2 -extfile " + d + "/ext",
             // Signed by the same CA, for another host only.
             "openssl req" + ec + "-keyout " + d + "/elsewhere.key -out " + d + "/elsewhere.csr -subj /CN=elsewhere.example",
             "openssl x509 -req -in " + d + "/elsewhere.csr -CA " + d + "/ca.pem -CAkey " + d +
                 "/ca.key -CAcreateserial -out " + d + "/elsewhere.pem -days 2 -extfile " + d + "/ext-elsewhere"}) {
      auto r = sh(cmd);
      INFO(cmd << "\n" << r.out);
      REQUIRE(r.status == 0);
    }
    ca = dir.file("ca.pem");
    cert = dir.file("server.pem");
    key = dir.file("server.key");
    other_ca = dir.file("other.pem");
  }
};

}  // namespace

TEST_CASE("http limits: a body beyond the limit gets 413, one at the limit is read", "[http][limits]") {
  HttpServerOptions o;
  o.limits.body_bytes = 1000;
  LimitedServer s(o);
  std::string error;
  auto big = httpCall(s.url(), "POST", "/jobs/7/start", std::string(1001, 'x'), "s3cret", std::chrono::seconds(10), &error);
  INFO(error);
  REQUIRE(big);
  CHECK(big->status == 413);
  CHECK_THAT(big->body, Catch::Contains("request body too large"));
  // At the limit the body is read and judged by the API (not JSON: 400), not by the size check.
  auto at = httpCall(s.url(), "POST", "/jobs/7/start", std::string(1000, 'x'), "s3cret", std::chrono::seconds(10), &error);
  REQUIRE(at);
  CHECK(at->status == 400);
  // A chunked body has no Content-Length: it is cut off as it arrives.
  Conn c(s.port);
  REQUIRE(c.send("POST /jobs/7/start HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer s3cret\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "7d0\r\n" + std::string(2000, 'x') + "\r\n0\r\n\r\n"));
  bool closed = false;
  auto got = c.untilClosed(std::chrono::seconds(10), &closed);
  CHECK(closed);
  CHECK(got.rfind("HTTP/1.1 413", 0) == 0);
}

TEST_CASE("http limits: too large a header or too many header fields get 431 and a close", "[http][limits]") {
  HttpServerOptions o;
  o.limits.header_bytes = 1024;
  o.limits.header_count = 10;
  LimitedServer s(o);
  {
    Conn c(s.port);
    REQUIRE(c.send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: " + std::string(2000, 'a') + "\r\n\r\n"));
    bool closed = false;
    auto got = c.untilClosed(std::chrono::seconds(10), &closed);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 431", 0) == 0);
  }
  std::string many = "GET /healthz HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 10; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";  // 11 fields
  {
    Conn c(s.port);
    REQUIRE(c.send(many + "\r\n"));
    bool closed = false;
    auto got = c.untilClosed(std::chrono::seconds(10), &closed);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 431", 0) == 0);
  }
  {
    // 10 fields, under 1 KiB: served.
    Conn c(s.port);
    std::string ok = "GET /healthz HTTP/1.1\r\nHost: t\r\n";
    for (int i = 0; i < 9; ++i) ok += "X-F" + std::to_string(i) + ": v\r\n";
    REQUIRE(c.send(ok + "\r\n"));
    CHECK(c.response().rfind("HTTP/1.1 200", 0) == 0);
  }
}

TEST_CASE("http limits: a client that dribbles its header slower than the timeout is closed", "[http][limits]") {
  HttpServerOptions o;
  o.limits.header_timeout = std::chrono::milliseconds(300);
  LimitedServer s(o);
  // A whole header at once: served, and the kept-alive connection is served again.
  {
    Conn c(s.port);
    REQUIRE(c.send(healthz()));
    CHECK(c.response().rfind("HTTP/1.1 200", 0) == 0);
    REQUIRE(c.send(healthz()));
    CHECK(c.response().rfind("HTTP/1.1 200", 0) == 0);
  }
  // Slowloris: one header byte per 50 ms (each pause is a wait for the server to close, not a
  // sleep), never finishing. The server closes it once 300 ms have passed, answering nothing.
  Conn c(s.port);
  const auto start = Steady::now();
  REQUIRE(c.send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: "));
  std::string got;
  bool closed = false;
  size_t sent = 0;
  while (Steady::now() - start < std::chrono::seconds(10)) {
    if (!c.receive(&got, std::chrono::milliseconds(50))) {
      closed = true;
      break;
    }
    if (!c.send("a")) {
      closed = true;
      break;
    }
    ++sent;
  }
  const auto elapsed = Steady::now() - start;
  CHECK(closed);
  CHECK(got.empty());
  CHECK(elapsed >= std::chrono::milliseconds(300));
  CHECK(sent >= 2);  // it did keep sending: the timeout is on the whole header, not per byte
  CHECK(waitFor([&] { return s.server->connections() == 0; }));
}

TEST_CASE("http limits: connections beyond the limit get 503 and a close, a freed slot is reused", "[http][limits]") {
  HttpServerOptions o;
  o.limits.max_connections = 2;
  LimitedServer s(o);
  auto a = std::make_unique<Conn>(s.port);
  Conn b(s.port);
  // Both accepted and held open (keep-alive).
  REQUIRE(a->send(healthz()));
  REQUIRE(a->response().rfind("HTTP/1.1 200", 0) == 0);
  REQUIRE(b.send(healthz()));
  REQUIRE(b.response().rfind("HTTP/1.1 200", 0) == 0);
  CHECK(s.server->connections() == 2);
  {
    Conn c(s.port);
    c.send(healthz());
    bool closed = false;
    auto got = c.untilClosed(std::chrono::seconds(10), &closed);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 503", 0) == 0);
    CHECK_THAT(got, Catch::Contains("too many connections"));
  }
  // One client leaves: the next connection is served.
  a.reset();
  CHECK(waitFor([&] { return s.server->connections() == 1; }));
  Conn d(s.port);
  REQUIRE(d.send(healthz()));
  CHECK(d.response().rfind("HTTP/1.1 200", 0) == 0);
  // b still works.
  REQUIRE(b.send(healthz(false)));
  CHECK(b.response().rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("https: /healthz over TLS verified against the test CA, plain HTTP and unknown CAs fail", "[http][tls]") {
  TestPki pki;
  HttpServerOptions o;
  o.tls_cert_file = pki.cert;
  o.tls_key_file = pki.key;
  LimitedServer s(o, "r3ad");
  CHECK(s.server->tls());
  std::string error;
  auto ok = httpCall(s.url("https"), "GET", "/healthz", "", "", std::chrono::seconds(10), &error, pki.ca);
  INFO(error);
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK_THAT(ok->body, Catch::Contains("\"ok\""));
  auto by_name = httpCall("https://localhost:" + std::to_string(s.port), "GET", "/healthz", "", "",
                          std::chrono::seconds(10), &error, pki.ca);
  REQUIRE(by_name);
  CHECK(by_name->status == 200);

  // Reads need the read token, over TLS as over plain HTTP (/healthz excepted).
  auto anonymous = httpCall(s.url("https"), "GET", "/nodes", "", "", std::chrono::seconds(10), &error, pki.ca);
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  auto reader = httpCall(s.url("https"), "GET", "/nodes", "", "r3ad", std::chrono::seconds(10), &error, pki.ca);
  REQUIRE(reader);
  CHECK(reader->status == 200);

  // Without the CA (the system's CAs) and with another CA: the handshake is refused.
  error.clear();
  CHECK_FALSE(httpCall(s.url("https"), "GET", "/healthz", "", "", std::chrono::seconds(10), &error));
  CHECK_THAT(error, Catch::Contains("certificate verify failed"));
  error.clear();
  CHECK_FALSE(httpCall(s.url("https"), "GET", "/healthz", "", "", std::chrono::seconds(10), &error, pki.other_ca));
  CHECK_THAT(error, Catch::Contains("certificate verify failed"));

  // Plain HTTP to the TLS port: no answer.
  error.clear();
  CHECK_FALSE(httpCall(s.url("http"), "GET", "/healthz", "", "", std::chrono::seconds(10), &error));
  CHECK_FALSE(error.empty());

  // A certificate from the right CA for another host: refused.
  {
    HttpServerOptions elsewhere;
    elsewhere.tls_cert_file = pki.dir.file("elsewhere.pem");
    elsewhere.tls_key_file = pki.dir.file("elsewhere.key");
    LimitedServer e(elsewhere);
    error.clear();
    CHECK_FALSE(httpCall(e.url("https"), "GET", "/healthz", "", "", std::chrono::seconds(10), &error, pki.ca));
    CHECK_THAT(error, Catch::Contains("certificate verify failed"));
  }

  // A server whose key does not match: listen() says so.
  boost::asio::io_context io;
  HttpServerOptions bad;
  bad.tls_cert_file = pki.cert;
  bad.tls_key_file = pki.dir.file("ca.key");
  HttpServer other(io, *s.api, bad);
  CHECK_FALSE(other.listen("127.0.0.1", 0, &error));
  CHECK_THAT(error, Catch::Contains("TLS key"));
}

TEST_CASE("exposure policy: beyond loopback needs TLS and a read token unless --insecure-http", "[http][tls]") {
  CHECK(exposureError("127.0.0.1", false, false, false).empty());
  CHECK(exposureError("::1", false, false, false).empty());
  CHECK(exposureError("localhost", false, false, false).empty());
  CHECK_THAT(exposureError("0.0.0.0", false, true, false), Catch::Contains("plain HTTP"));
  CHECK_THAT(exposureError("10.0.0.5", true, false, false), Catch::Contains("--read-token-file"));
  CHECK(exposureError("0.0.0.0", true, true, false).empty());
  CHECK(exposureError("0.0.0.0", false, false, true).empty());
}

TEST_CASE("binaries: the aggregator refuses --listen 0.0.0.0 without TLS, the CLI's https --server checks the CA",
          "[binary][tls]") {
  TestPki pki;
  TempDir dir;
  const std::string agg = std::string(FAULTLINE_AGGREGATOR_BIN) + " --rules " FAULTLINE_SOURCE_DIR "/rules --port 0 --port-file " +
                          dir.file("port");
  std::ofstream(dir.file("read-token")) << "r3ad\n";
  // `timeout` only bounds a regression (a server that starts); the refusal comes before any bind.
  auto plain = sh("timeout 30 " + agg + " --db " + dir.file("a.db") + " --listen 0.0.0.0");
  CHECK(plain.status == 2);
  CHECK_THAT(plain.out, Catch::Contains("refusing to serve plain HTTP on 0.0.0.0"));
  auto no_token = sh("timeout 30 " + agg + " --db " + dir.file("a.db") + " --listen 0.0.0.0 --tls-cert " + pki.cert +
                     " --tls-key " + pki.key);
  CHECK(no_token.status == 2);
  CHECK_THAT(no_token.out, Catch::Contains("without --read-token-file"));
  CHECK_FALSE(std::filesystem::exists(dir.file("a.db")));  // it stopped before opening anything
  CHECK_FALSE(std::filesystem::exists(dir.file("port")));

  // The real aggregator over HTTPS on loopback, and the CLI against it.
  Child server;
  const std::string db = dir.file("b.db"), port_file = dir.file("port"), log = dir.file("agg.log");
  server.pid = fork();
  REQUIRE(server.pid >= 0);
  if (server.pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    execl(FAULTLINE_AGGREGATOR_BIN, "faultline-aggregator", "--rules", FAULTLINE_SOURCE_DIR "/rules", "--port", "0",
          "--port-file", port_file.c_str(), "--db", db.c_str(), "--tls-cert", pki.cert.c_str(), "--tls-key",
          pki.key.c_str(), nullptr);
    _exit(127);
  }
  REQUIRE(pollUntil([&] { return !readFile(dir.file("port")).empty(); }, std::chrono::seconds(30)));
  const std::string url = "https://127.0.0.1:" + std::to_string(std::stoi(readFile(dir.file("port"))));
  const std::string cli = std::string(FAULTLINE_CLI_BIN) + " --server " + url;
  auto verified = sh(cli + " --ca-file " + pki.ca + " nodes --json");
  INFO(verified.out << readFile(log));
  CHECK(verified.status == 0);
  CHECK(verified.out.rfind("[", 0) == 0);
  auto unverified = sh(cli + " nodes --json");
  CHECK(unverified.status == 3);
  CHECK_THAT(unverified.out, Catch::Contains("certificate verify failed"));
  auto wrong = sh(cli + " --ca-file " + pki.other_ca + " nodes --json");
  CHECK(wrong.status == 3);
  CHECK_THAT(wrong.out, Catch::Contains("certificate verify failed"));
  CHECK_THAT(readFile(log), Catch::Contains("https://127.0.0.1:"));
}
