// A real HTTP API server for tests: a store in a temp dir, the shipped rules, a verdict engine and
// the Api on 127.0.0.1 with an ephemeral port, its io_context on a background thread.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/http/server.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/test_util.h"

namespace faultline::aggregator::testing {

// Write token "s3cret" unless `options` says otherwise; options.rules defaults to the shipped
// rules' engine (the FACT observation routes read with it).
struct ApiServer {
  TempDir dir;
  ManualClock clock;
  std::unique_ptr<Store> store;
  Metrics metrics;
  std::shared_ptr<const common::RuleSet> rules;
  std::unique_ptr<common::RuleEngine> rule_engine;
  std::unique_ptr<VerdictEngine> engine;
  std::unique_ptr<Api> api;
  boost::asio::io_context io;
  std::unique_ptr<HttpServer> server;
  std::thread thread;
  std::string url;

  explicit ApiServer(int64_t now_ns = kT0, ApiOptions options = defaultOptions()) : clock(now_ns) {
    std::string error;
    store = Store::open(dir.file("h.db"), clock, {}, &error);
    REQUIRE(store);
    auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
    REQUIRE(loaded.rules);
    rules = loaded.rules;
    rule_engine = std::make_unique<common::RuleEngine>(rules);
    engine = std::make_unique<VerdictEngine>(*store, clock, rules, VerdictOptions{}, &metrics);
    if (!options.rules) options.rules = rule_engine.get();
    api = std::make_unique<Api>(*store, engine.get(), metrics, clock, std::move(options));
    server = std::make_unique<HttpServer>(io, *api);
    REQUIRE(server->listen("127.0.0.1", 0, &error));
    url = "http://127.0.0.1:" + std::to_string(server->port());
    thread = std::thread([this] { io.run(); });
  }
  ~ApiServer() {
    boost::asio::post(io, [this] {
      server->stop();
      io.stop();
    });
    thread.join();
  }
  static ApiOptions defaultOptions() {
    ApiOptions o;
    o.write_token = "s3cret";
    return o;
  }
  HttpResult call(const std::string& method, const std::string& target,
                  const std::string& body = "", const std::string& token = "") {
    std::string error;
    auto r = httpCall(url, method, target, body, token, std::chrono::seconds(10), &error);
    INFO(error);
    REQUIRE(r);
    return *r;
  }
};

}  // namespace faultline::aggregator::testing
