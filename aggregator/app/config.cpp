#include "aggregator/app/config.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "aggregator/http/api.h"
#include "aggregator/store/store.h"

namespace faultline::aggregator {

namespace {

void addStoreOptions(CLI::App& app, AggregatorConfig& c) {
  app.add_option("--db,--store", c.db,
                 "store: a SQLite file (default $STATE_DIRECTORY/aggregator.db) or a postgresql:// URL shared by "
                 "several replicas (docs/operations.md)");
  app.add_option("--leader-poll", c.leader_poll_s, "seconds between leader-lock checks (PostgreSQL replicas)");
  app.add_option("--retention-days", c.retention_days, "keep symptoms, batches and node events this long");
  app.add_option("--job-retention-days", c.job_retention_days, "keep jobs and their verdicts this long");
  app.add_flag("--sync-full", c.sync_full, "fsync every commit (survives power loss, not only crashes)");
  app.add_option("--symptom-cache-mb", c.symptom_cache_mb,
                 "decoded symptoms kept for verdicts, in MiB (~1.3 KB each; 0 = decode every payload); default a "
                 "sixteenth of the memory (machine or cgroup), 64-1024")
      ->capture_default_str();
}

void addHttpOptions(CLI::App& app, AggregatorConfig& c) {
  app.add_option("--listen", c.listen, "HTTP listen address (default 127.0.0.1)");
  app.add_option("--port", c.port, "HTTP port (0 = ephemeral)");
  app.add_option("--port-file", c.port_file, "write the bound HTTP port here once listening");
  app.add_option("--token-file", c.token_file, "bearer token for POST /jobs/{id}/start|end (none: writes disabled)");
  app.add_option("--read-token-file", c.read_token_file,
                 "token every read needs (API and /ui/ dashboard; not /healthz): for --listen beyond loopback");
  app.add_option("--tls-cert", c.http.tls_cert_file, "PEM certificate chain: serve the API over HTTPS (with --tls-key)");
  app.add_option("--tls-key", c.http.tls_key_file, "PEM private key of --tls-cert");
  app.add_flag("--insecure-http", c.insecure_http,
               "allow --listen beyond loopback without TLS and without --read-token-file (e.g. behind a TLS proxy)");
  app.add_option("--http-max-body-bytes", c.http.limits.body_bytes, "largest request body (else 413)");
  app.add_option("--http-max-header-bytes", c.http.limits.header_bytes, "largest request header (else 431)");
  app.add_option("--http-max-headers", c.http.limits.header_count, "most header fields in a request (else 431)");
  app.add_option("--http-header-timeout", c.header_timeout_s, "seconds a client has to send a request's header (slowloris)");
  app.add_option("--http-max-connections", c.http.limits.max_connections, "most open connections (else 503)");
  app.add_option("--fact-open-from", c.fact_open_from,
                 "network (ADDRESS[/PREFIX], repeatable) whose FACT observation POSTs need no write token: NVRx's "
                 "FACT client sends none (docs/api.md)");
}

void addVerdictOptions(CLI::App& app, AggregatorConfig& c) {
  app.add_option("--rules", c.rule_dirs, "rule directory (repeatable; default: the shipped rules)");
  app.add_option("--settle", c.settle_s, "seconds after a job's end before the verdict is revised");
  app.add_option("--margin", c.margin_s,
                 "seconds around a job's window whose symptoms still belong to it (clock skew and teardown)")
      ->capture_default_str();
  app.add_option("--agent-timeout", c.agent_timeout_s, "seconds without a heartbeat before an agent counts as gone");
  app.add_option("--final-timeout", c.final_timeout_s, "seconds after a job's end to stop waiting for silent nodes");
  app.add_option("--tick", c.tick_s, "seconds between verdict checks");
  app.add_option("--prometheus", c.prometheus.url,
                 "PromQL endpoint (Prometheus, Mimir, VictoriaMetrics: http(s)://host:port) asked for a failed job's "
                 "metric evidence (rules/metrics) at its first verdict and at settle");
  app.add_option("--prometheus-token-file", c.prometheus_token_file, "bearer token for --prometheus");
  app.add_option("--prometheus-user", c.prometheus.basic_user, "basic-auth user for --prometheus");
  app.add_option("--prometheus-password-file", c.prometheus_password_file, "basic-auth password for --prometheus");
  app.add_option("--prometheus-ca", c.prometheus.ca_file, "CA file for an https --prometheus");
  app.add_option("--sacct-command", c.sacct_command, "command printing `sacct --json` output (polled)");
  app.add_option("--sacct-interval", c.sacct_interval_s, "seconds between sacct polls (0 = no poll)");
}

void addIngestOptions(CLI::App& app, AggregatorConfig& c) {
  app.add_option("--ingest-endpoint", c.ingest_endpoint, "agents' ZeroMQ endpoint to bind (default tcp://127.0.0.1:7400)");
  app.add_option("--ingest-endpoint-file", c.ingest_endpoint_file, "write the bound ingest endpoint here once bound");
  app.add_option("--curve-secret-key", c.curve_secret_file,
                 "file with the aggregator's Z85 CurveZMQ secret key (`faultline keygen`); enables ingest");
  app.add_option("--allow-dir", c.allow_dir, "agents' public keys, one HOST.pub per node (re-read on SIGHUP)");
  app.add_option("--max-message-bytes", c.max_message_bytes, "largest batch or heartbeat payload accepted");
  app.add_flag("--ingest-legacy", c.ingest_legacy,
               "the previous ingest pass (decode and store one message at a time, savepoint per batch); for comparisons");
  app.add_option("--ingest-pass", c.ingest_pass, "most messages decoded and written in one ingest group");
}

void addRelayOptions(CLI::App& app, AggregatorConfig& c) {
  app.add_option("--relay-upstream", c.relay_upstream,
                 "central aggregator's ingest endpoint: run as a site relay (needs --relay-site, "
                 "--relay-server-key and --curve-secret-key, whose public key the central lists "
                 "under its allow-dir relays/SITE.pub)");
  app.add_option("--relay-site", c.relay_site, "this site's name at the central aggregator");
  app.add_option("--relay-server-key", c.relay_server_key_file, "file with the central aggregator's Z85 public key");
  app.add_flag("--relay-symptoms", c.relay_symptoms, "also forward per-node symptom summaries");
  app.add_option("--relay-rate", c.relay_rate, "cap on the relay link, bytes per second (0 = none)");
  app.add_flag("--relay-zstd", c.relay_zstd, "zstd-compress relay batches when smaller");
  app.add_flag("--relay-full-revisions", c.relay_full_revisions,
               "send every verdict revision whole, also one that repeats the verdict before it (for a central "
               "aggregator older than revision references)");
  app.add_option("--relay-max-bytes", c.relay_max_bytes,
                 "bound on the unsent relay outbox (least severe, oldest batches dropped first)");
  app.add_option("--relay-interval", c.relay_interval_s, "seconds between relay collections");
  app.add_option("--relay-ack-timeout", c.relay_ack_timeout_s, "seconds before an unacknowledged relay batch is resent");
}

// A Z85 key (40 characters) from its file.
std::string readKey(const std::string& file, std::string* key) {
  std::ifstream in(file);
  if (!in || !(in >> *key) || key->size() != 40) return fmt::format("{}: cannot read a Z85 key", file);
  return "";
}

// The first line of a token or password file; "" file: nothing to read.
std::string readToken(const std::string& file, std::string* token) {
  if (file.empty()) return "";
  std::ifstream in(file);
  if (!in || !std::getline(in, *token) || token->empty()) return fmt::format("{}: cannot read a token", file);
  return "";
}

std::string relayError(const AggregatorConfig& c) {
  if (!c.relay_site.empty() &&
      (c.relay_site.size() > 64 ||
       c.relay_site.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
           std::string::npos))
    // It names relays/SITE.pub at the central and prefixes the site's job ids ("SITE:JOBID").
    return "--relay-site: 1-64 of letters, digits, '.', '_', '-'";
  if (!c.relay_upstream.empty() &&
      (c.relay_site.empty() || c.relay_server_key_file.empty() || c.curve_secret_file.empty()))
    return "--relay-upstream needs --relay-site, --relay-server-key and --curve-secret-key";
  if (!c.curve_secret_file.empty() && c.allow_dir.empty()) return "--curve-secret-key needs --allow-dir";
  return "";
}

}  // namespace

AggregatorConfig defaultAggregatorConfig() {
  AggregatorConfig c;
  const char* state = std::getenv("STATE_DIRECTORY");  // set by systemd's StateDirectory=
  c.db = std::string(state ? state : "/var/lib/faultline") + "/aggregator.db";
  c.symptom_cache_mb = defaultSymptomCacheBytes(availableMemoryBytes()) >> 20;
  return c;
}

void addAggregatorOptions(CLI::App& app, AggregatorConfig& config) {
  addStoreOptions(app, config);
  addHttpOptions(app, config);
  addVerdictOptions(app, config);
  addIngestOptions(app, config);
  addRelayOptions(app, config);
}

std::string resolveAggregatorConfig(AggregatorConfig& c) {
  if (auto why = relayError(c); !why.empty()) return why;
  if (!c.curve_secret_file.empty())
    if (auto why = readKey(c.curve_secret_file, &c.curve_secret); !why.empty()) return why;
  if (!c.relay_server_key_file.empty())
    if (auto why = readKey(c.relay_server_key_file, &c.relay_server_key); !why.empty()) return why;
  for (auto [file, into] : {std::pair{&c.token_file, &c.token}, std::pair{&c.read_token_file, &c.read_token},
                            std::pair{&c.prometheus_token_file, &c.prometheus.bearer_token},
                            std::pair{&c.prometheus_password_file, &c.prometheus.basic_password}})
    if (auto why = readToken(*file, into); !why.empty()) return why;
  if (auto why = factOpenFromError(c.fact_open_from); !why.empty()) return "--fact-open-from: " + why;
  if (auto why = exposureError(c.listen, !c.http.tls_cert_file.empty(), !c.read_token.empty(), c.insecure_http);
      !why.empty())
    return why + " (docs/api.md, \"Exposing the API\")";
  c.http.limits.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.header_timeout_s * 1000));
  return "";
}

}  // namespace faultline::aggregator
