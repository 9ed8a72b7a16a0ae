#include "aggregator/jobs/fact_events.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "aggregator/jobs/job_events.h"
#include "common/job.h"
#include "common/parse/stream_parser.h"
#include "common/symptom_aggregator.h"

namespace faultline::aggregator {

using nlohmann::json;

namespace {

constexpr size_t kMaxWorkloadIdBytes = 512;
constexpr size_t kMaxNodes = 100000;
constexpr size_t kMaxLabelBytes = 1024;

// A key of `obj` that must have `type` when present (names the key in the refusal).
bool typed(const json& obj, const char* key, json::value_t want, const char* what,
           std::string* error) {
  if (!obj.contains(key)) return true;
  const json& v = obj[key];
  bool ok = v.type() == want || (want == json::value_t::number_unsigned && v.is_number_integer() &&
                                 v.get<int64_t>() >= 0);
  if (!ok) *error = fmt::format("workload.{} must be {}, not {}", key, what, v.type_name());
  return ok;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

std::string attributorIdOf(const std::string& workload_id) {
  std::string id = "fact-";
  for (unsigned char c : workload_id)
    id += std::isalnum(c) || c == '_' || c == '-' || c == '.' ? static_cast<char>(c) : '.';
  // Job ids are at most 64 bytes (validJobId): a longer one keeps its head and a hash of it all.
  if (id.size() > 64) id = id.substr(0, 47) + fmt::format("-{:016x}", fnv1a(workload_id));
  return id;
}

std::optional<Attributor> attributorFromJson(const json& body, int64_t now_ns, std::string* error) {
  if (!body.is_object() || !body.contains("workload") || !body["workload"].is_object()) {
    *error = "body must be an AttributorInfo object with a \"workload\" object";
    return std::nullopt;
  }
  if (body.contains("metadata") && !body["metadata"].is_object()) {
    *error = "metadata must be an object";
    return std::nullopt;
  }
  const json& w = body["workload"];
  using T = json::value_t;
  for (const char* key : {"id", "type", "job_start_time", "job_end_time", "status"})
    if (!typed(w, key, T::string, "a string", error)) return std::nullopt;
  for (const char* key : {"ranks_per_node", "nranks", "exit_code_signal"})
    if (!typed(w, key, T::number_unsigned, "a non-negative integer", error)) return std::nullopt;
  if (!typed(w, "nodes", T::array, "an array of host names", error)) return std::nullopt;
  Attributor a;
  a.workload_id = w.value("id", "");
  if (a.workload_id.empty() || a.workload_id.size() > kMaxWorkloadIdBytes) {
    *error = fmt::format("workload.id must be a string of 1 to {} bytes", kMaxWorkloadIdBytes);
    return std::nullopt;
  }
  if (!w.contains("nodes") || w["nodes"].empty() || w["nodes"].size() > kMaxNodes) {
    *error = fmt::format("workload.nodes must list 1 to {} host names", kMaxNodes);
    return std::nullopt;
  }
  a.attributor_id = attributorIdOf(a.workload_id);
  std::string status = w.value("status", "FAILED");
  std::transform(status.begin(), status.end(), status.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  // The job event body job_events.h validates: the same rules as POST /jobs/{id}/start|end.
  json ev{{"nodes", w["nodes"]}, {"state", status}};
  a.ended = !isActiveJobState(status);
  if (w.contains("ranks_per_node"))
    ev["ntasks_per_node"] = std::min<int64_t>(w["ranks_per_node"].get<int64_t>(), 1 << 20);
  if (w.contains("exit_code_signal"))
    ev["exit_code"] = std::to_string(std::min<int64_t>(w["exit_code_signal"].get<int64_t>(), 255));
  if (a.ended) {
    if (w.contains("job_end_time")) ev["time"] = w["job_end_time"];
    if (w.contains("job_start_time")) ev["start_time"] = w["job_start_time"];
  } else if (w.contains("job_start_time")) {
    ev["time"] = w["job_start_time"];
  }
  auto update = jobUpdateFromJson(
      ev, a.attributor_id, a.ended ? JobEventKind::kEnd : JobEventKind::kStart, now_ns, error);
  if (!update) {
    *error = "workload: " + *error;
    return std::nullopt;
  }
  a.update = std::move(*update);
  a.update.source = "fact";
  return a;
}

namespace {

// One Loki line as faultline reads it.
struct LokiLine {
  std::string text;
  int64_t ts = 0;
};

std::string label(const json& labels, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (labels.contains(k) && labels[k].is_string()) return labels[k].get<std::string>();
  return "";
}

std::optional<int64_t> lokiTimestamp(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t n = v.get<uint64_t>();
    return n <= uint64_t(INT64_MAX) ? std::optional<int64_t>(int64_t(n)) : std::nullopt;
  }
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 19 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  uint64_t n = std::stoull(s);
  return n <= uint64_t(INT64_MAX) ? std::optional<int64_t>(int64_t(n)) : std::nullopt;
}

// Every stream's lines, grouped by (host, kernel?): one job output each.
using Groups = std::map<std::pair<std::string, bool>, std::vector<LokiLine>>;

// NVRx sends each dmesg line as a JSON record: {"body", "severity", "attributes": {...}}. Such a
// line becomes its body, and the record's attributes name its host and app where they can.
void unwrapJsonRecord(std::string* text, std::string* host, std::string* app) {
  if (text->empty() || text->front() != '{') return;
  json rec = json::parse(*text, nullptr, false);
  if (!rec.is_object() || !rec.contains("body") || !rec["body"].is_string()) return;
  const json attrs = rec.contains("attributes") && rec["attributes"].is_object() ? rec["attributes"]
                                                                                 : json::object();
  if (std::string h = label(attrs, {"hostname", "host"}); !h.empty() && h.size() <= kMaxLabelBytes)
    *host = h;
  if (std::string a = label(attrs, {"appname", "app"}); !a.empty()) *app = a;
  *text = rec["body"].get<std::string>();
}

// One stream (streams[i]) of a Loki push body into `groups`.
bool readStream(const json& st, size_t i, const std::string& source, const ObservationLimits& limits,
                Groups* groups, uint64_t* lines, std::string* error) {
  auto where = [&](const std::string& what) { return fmt::format("streams[{}]{}", i, what); };
  if (!st.is_object() || !st.contains("values") || !st["values"].is_array()) {
    *error = where(": must be an object with a \"values\" array");
    return false;
  }
  const json labels = st.contains("stream") ? st["stream"] : json::object();
  if (!labels.is_object()) {
    *error = where(".stream: labels must be an object");
    return false;
  }
  for (const auto& [k, v] : labels.items())
    if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxLabelBytes) {
      *error = where(fmt::format(".stream.{}: a label must be a string of at most {} bytes",
                                 k.substr(0, 40), kMaxLabelBytes));
      return false;
    }
  const std::string stream_host = label(labels, {"hostname", "host", "node", "nodename"});
  const std::string stream_app = label(labels, {"appname", "app", "ident"});
  const json& values = st["values"];
  for (size_t j = 0; j < values.size(); ++j) {
    auto at = [&](const std::string& what) {
      return where(fmt::format(".values[{}]{}", j, what));
    };
    const json& v = values[j];
    if (!v.is_array() || v.size() < 2 || v.size() > 3 || !v[1].is_string()) {
      *error =
          at(": must be [ns_timestamp, line] (a third element, structured metadata, is allowed)");
      return false;
    }
    auto ts = lokiTimestamp(v[0]);
    if (!ts) {
      *error = at("[0]: not a timestamp in nanoseconds since the epoch (a string of digits)");
      return false;
    }
    if (++*lines > limits.max_values) {
      *error = fmt::format("more than {} lines", limits.max_values);
      return false;
    }
    std::string text = v[1].get<std::string>();
    std::string host = stream_host, app = stream_app;
    unwrapJsonRecord(&text, &host, &app);
    if (text.size() > limits.max_line_bytes) {
      *error = at(fmt::format("[1]: a line over {} bytes", limits.max_line_bytes));
      return false;
    }
    if (text.find('\0') != std::string::npos) {
      *error = at("[1]: a line with a NUL byte");
      return false;
    }
    if (source == "syslog" && host.empty()) {
      *error = at(
          ": a syslog line without a hostname (label or attributes.hostname): whose node is it?");
      return false;
    }
    const bool kernel =
        source == "syslog" && (app == "kernel" || app == "dmesg" || app == "kmsg");
    (*groups)[{host, kernel}].push_back({std::move(text), *ts});
  }
  return true;
}

bool readStreams(const json& streams, const std::string& source, const ObservationLimits& limits,
                 Groups* groups, uint64_t* lines, std::string* error) {
  if (streams.size() > limits.max_streams) {
    *error = fmt::format("{} streams (at most {})", streams.size(), limits.max_streams);
    return false;
  }
  for (size_t i = 0; i < streams.size(); ++i)
    if (!readStream(streams[i], i, source, limits, groups, lines, error)) return false;
  return true;
}

// A prometheus_metrics body: the scrape's series join the job's earlier ones (ctx.metrics), and
// every metric rule is evaluated over them for the job's window, as a PromQL answer would be. A
// series without a sample before the job's start takes its first sample as the baseline, so one
// scrape alone shows no change: a counter's value or the XID gauge's last Xid may be older than
// the job. Each hit is stored once (the first observation that shows it).
void readPostedMetrics(const std::string& text, int64_t scrape_ns, const ObservationContext& ctx,
                       const common::RuleSet& rules, int64_t now_ns, JobOutput* out) {
  auto parsed = common::parseMetricText(text, scrape_ns, ctx.metric_limits);
  PostedMetrics alone;
  PostedMetrics& held = ctx.metrics ? *ctx.metrics : alone;
  const size_t dropped = common::mergeMetricSeries(held.series, parsed.series, ctx.metric_limits);
  held.used_ns = now_ns;
  out->coverage.records = parsed.samples;
  out->coverage.skipped = parsed.malformed + parsed.over_limit + dropped;
  const int64_t start = ctx.job_start_ns ? ctx.job_start_ns : INT64_MIN / 2;
  const int64_t end = ctx.job_end_ns ? ctx.job_end_ns + ctx.margin_ns : INT64_MAX / 2;
  const std::string origin = "fact " + ctx.observation_id + " prometheus_metrics";
  std::set<std::string> job_series, no_node;
  std::vector<std::string> unsupported;
  size_t first_only = 0;
  for (const auto& rule : rules.metric_rules) {
    std::string why;
    const auto series = common::metricRuleSeries(rule, held.series, &why);
    if (!why.empty()) {
      unsupported.push_back(fmt::format("{}: {}", rule.id, why));
      continue;
    }
    for (const auto& s : series) {
      const std::string key = common::metricSeriesKey(s);
      std::string node = common::metricSeriesNode(rule, s, ctx.job_nodes);
      // A scrape of a one-node job's exporter names no node when Prometheus did not add one.
      if (node.empty() && ctx.job_nodes.size() == 1) {
        bool names_one = false;
        for (const auto& l : rule.node_labels) names_one = names_one || !s.label(l).empty();
        if (!names_one) node = ctx.job_nodes[0];
      }
      if (node.empty()) {
        no_node.insert(key);
        continue;
      }
      job_series.insert(key);
      if (s.samples.empty()) continue;
      int64_t from = start;
      const bool needs_before = rule.condition == common::MetricCondition::kChangesToNonZero || rule.edge;
      if (needs_before && s.samples.front().first >= start) {
        from = s.samples.front().first + 1;  // the first sample is the baseline
        if (s.samples.size() == 1) ++first_only;
      }
      const std::string reported = rule.id + "\n" + key;
      if (held.reported.count(reported)) continue;
      if (auto hit = common::evaluateMetricRule(rule, s, from, end)) {
        held.reported.insert(reported);
        out->symptoms.push_back(common::metricSymptom(rule, s, *hit, node, &rules, origin));
      }
    }
  }
  auto& cov = out->coverage;
  cov.status = job_series.empty() ? "empty" : "ok";
  cov.reason = job_series.empty()
                   ? "no series a metric rule reads names a node of the job"
                   : fmt::format("{} series of the job's nodes read by the metric rules; {} new symptom(s)",
                                 job_series.size(), out->symptoms.size());
  if (first_only)
    cov.reason += fmt::format("; {} series with one sample and none before the job: it is their baseline, a later "
                              "observation shows a change",
                              first_only);
  if (!no_node.empty()) cov.reason += fmt::format("; {} series name no node of the job", no_node.size());
  if (parsed.malformed) cov.reason += fmt::format("; {} malformed lines skipped ({})", parsed.malformed, parsed.first_problem);
  if (parsed.over_limit + dropped)
    cov.reason += fmt::format("; {} samples over the limits ({} series, {} KiB lines) not kept",
                              parsed.over_limit + dropped, ctx.metric_limits.max_series,
                              ctx.metric_limits.max_line_bytes >> 10);
  for (const auto& u : unsupported) cov.reason += "; not evaluated: " + u;
}

// The window a line's own Loki stamp must fall in to be its time: the job's (widened by the
// margin) and the observation's time_interval; *interval_end that interval's end. false and
// *error: a time_interval that does not read.
bool observationWindow(const json& c, const ObservationContext& ctx, int64_t* lo, int64_t* hi,
                       std::optional<int64_t>* interval_end, std::string* error) {
  *lo = ctx.job_start_ns ? ctx.job_start_ns - ctx.margin_ns : INT64_MAX;
  *hi = ctx.job_end_ns ? ctx.job_end_ns + ctx.margin_ns : INT64_MIN;
  if (!c.contains("time_interval")) return true;
  const json& ti = c["time_interval"];
  std::optional<int64_t> start, end;
  if (ti.is_object() && ti.contains("start") && ti["start"].is_string())
    start = common::parseTimestampNs(ti["start"].get<std::string>());
  if (ti.is_object() && ti.contains("end") && ti["end"].is_string())
    end = common::parseTimestampNs(ti["end"].get<std::string>());
  if (!start || !end || *start > *end) {
    *error = "context.time_interval must be {\"start\", \"end\"}: ISO 8601 times, start not after end";
    return false;
  }
  *lo = std::min(*lo, *start - ctx.margin_ns);
  *hi = std::max(*hi, *end + ctx.margin_ns);
  *interval_end = end;
  return true;
}

// A raw_loki_streams body (a JSON array of streams, or {"streams": [...]}, as a string or as
// JSON) grouped by (node, kernel or not); *lines counts them.
bool readLokiBody(const json& body, const std::string& source, const ObservationLimits& limits, Groups* groups,
                  uint64_t* lines, std::string* error) {
  json streams = body;
  if (streams.is_string()) {
    streams = json::parse(streams.get<std::string>(), nullptr, false);
    if (streams.is_discarded()) {
      *error = "body is a string but not JSON (raw_loki_streams: a JSON array of Loki streams)";
      return false;
    }
  }
  if (streams.is_object() && streams.contains("streams")) streams = streams["streams"];
  if (!streams.is_array()) {
    *error = "body must be a JSON array of Loki streams (or {\"streams\": [...]})";
    return false;
  }
  return readStreams(streams, source, limits, groups, lines, error);
}

// One (node, kind of log) group read as one file would be: its physical lines and the Loki stamp
// each may take, the format detected, the same parsers, rules and aggregation as `faultline job
// output`, into `out`. Returns the lines stamped outside [lo, hi].
uint64_t readLokiGroup(const std::string& host, bool kernel, const std::vector<LokiLine>& lines, int64_t lo,
                       int64_t hi, const std::string& source, const ObservationContext& ctx,
                       const common::RuleEngine& engine, const std::set<std::string>& nodes,
                       const std::shared_ptr<const common::HostSet>& known, JobOutput* out_ptr) {
  JobOutput& out = *out_ptr;
  // Physical lines (a body may hold several) and the Loki stamp of each.
  std::string text;
  std::vector<int64_t> stamps;
  uint64_t outside = 0;
  for (const auto& l : lines) {
    const bool in_window = l.ts >= lo && l.ts <= hi;
    for (size_t pos = 0;;) {
      size_t nl = l.text.find('\n', pos);
      text.append(l.text, pos, nl == std::string::npos ? std::string::npos : nl - pos)
          .push_back('\n');
      stamps.push_back(in_window ? l.ts : -1);
      outside += !in_window;
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  common::LogFormat format = common::detectFormat(std::string_view(text).substr(0, 64 << 10));
  common::SourceKind kind = common::sourceKindOf(format);
  // Kernel lines without a stamp of their own ("NVRM: Xid ...") are still kernel lines.
  if (kernel)
    kind = common::SourceKind::kKernel;
  else if (source == "syslog" && format == common::LogFormat::kApplication)
    kind = common::SourceKind::kJournal;
  out.coverage.format = std::string(common::formatName(format));
  common::ParseOptions popts;
  popts.default_year = ctx.job_start_ns ? common::yearOfNs(ctx.job_start_ns) : 1970;
  popts.known_hosts = known;
  popts.literals = engine.literalScanner();
  common::MatchContext mctx{host, out.source, kind, host.empty() ? ctx.node_of_rank : nullptr};
  common::SymptomAggregator agg;
  auto parser = common::makeStreamParser(format, popts, [&](common::LogRecord&& rec) {
    // A line without a wall-clock time of its own takes its Loki stamp, when the stamp falls in
    // the job's window or the observation's interval; outside both it is no time of this job.
    if (!rec.time_known && rec.line >= 1 && rec.line <= stamps.size() &&
        stamps[rec.line - 1] >= 0) {
      rec.time_ns = stamps[rec.line - 1];
      rec.time_known = true;
    }
    if (auto s = engine.extract(rec, mctx)) agg.add(std::move(*s));
  });
  parser->feed(text);
  parser->finish();
  const auto& rep = parser->report();
  out.coverage.records = rep.records;
  out.coverage.skipped = rep.skipped;
  if (rep.skipped) out.coverage.status = "partial";
  std::vector<std::string> notes;
  if (outside)
    notes.push_back(fmt::format(
        "{} of {} lines stamped outside the job's window and the observation's interval: "
        "read without a time",
        outside, stamps.size()));
  if (!host.empty() && !nodes.empty() && !nodes.count(host))
    notes.push_back("not a node of the attributor's workload");
  for (const auto& n : rep.notes) notes.push_back(n);
  out.coverage.reason = fmt::format("{}", fmt::join(notes, "; "));
  out.symptoms = agg.drainAll();
  for (auto& s : out.symptoms) s.source = out.source;
  return outside;
}

}  // namespace

std::optional<Observation> observationFromJson(const json& body, const ObservationContext& ctx,
                                               const common::RuleEngine& engine,
                                               const std::string& job_id, int64_t now_ns,
                                               std::string* error,
                                               const ObservationLimits& limits) {
  if (!body.is_object() || !body.contains("context") || !body["context"].is_object() ||
      !body.contains("body")) {
    *error = "body must be an observation object with \"context\" and \"body\"";
    return std::nullopt;
  }
  const json& c = body["context"];
  Observation o;
  o.source = c.contains("source") && c["source"].is_string() ? c["source"].get<std::string>() : "";
  o.format = c.contains("format") && c["format"].is_string() ? c["format"].get<std::string>() : "";
  if (o.source != "syslog" && o.source != "applog") {
    *error = "context.source must be \"syslog\" or \"applog\"";
    return std::nullopt;
  }
  if (o.format != "raw_loki_streams" && o.format != "prometheus_metrics") {
    *error = "context.format must be \"raw_loki_streams\" or \"prometheus_metrics\"";
    return std::nullopt;
  }
  int64_t lo = 0, hi = 0;
  std::optional<int64_t> interval_end;
  if (!observationWindow(c, ctx, &lo, &hi, &interval_end, error)) return std::nullopt;
  const std::string prefix = fmt::format("fact:{}:{}", ctx.observation_id, o.source);
  auto output = [&](const std::string& node, const std::string& format) {
    JobOutput out;
    out.job_id = job_id;
    out.source = node.empty() ? prefix : prefix + ":" + node;
    out.received_ns = now_ns;
    out.coverage.node = node;
    out.coverage.source = out.source;
    out.coverage.format = format;
    return out;
  };
  if (o.format == "prometheus_metrics") {
    if (!body["body"].is_string()) {
      *error = "body must be a string (a Prometheus text or OpenMetrics scrape)";
      return std::nullopt;
    }
    o.outputs.push_back(output("", "prometheus_metrics"));
    readPostedMetrics(body["body"].get_ref<const std::string&>(), interval_end.value_or(now_ns), ctx,
                      engine.rules(), now_ns, &o.outputs.back());
    o.lines = o.outputs.back().coverage.records;
    return o;
  }
  Groups groups;
  if (!readLokiBody(body["body"], o.source, limits, &groups, &o.lines, error)) return std::nullopt;
  if (groups.empty()) {
    auto out = output("", "raw_loki_streams");
    out.coverage.reason = "no lines";
    o.outputs.push_back(std::move(out));
    return o;
  }
  const std::set<std::string> nodes(ctx.job_nodes.begin(), ctx.job_nodes.end());
  auto known = std::make_shared<const common::HostSet>(ctx.job_nodes.begin(), ctx.job_nodes.end());
  for (const auto& [key, lines] : groups) {
    const auto& [host, kernel] = key;
    JobOutput out = output(host, "");
    o.out_of_window += readLokiGroup(host, kernel, lines, lo, hi, o.source, ctx, engine, nodes, known, &out);
    o.outputs.push_back(std::move(out));
  }
  return o;
}

}  // namespace faultline::aggregator
