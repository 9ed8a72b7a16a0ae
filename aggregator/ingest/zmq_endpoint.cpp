#include "aggregator/ingest/zmq_endpoint.h"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "common/protocol.h"

namespace faultline::aggregator {

namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr char kMonitorEndpoint[] = "inproc://faultline-ingest-monitor";
constexpr int64_t kMinuteNs = 60'000'000'000;

std::string printable(std::string_view id) {
  std::string out;
  for (char c : id.substr(0, 64)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

// The remote address of an open socket ("10.1.2.3", "::1"), "" when it is gone.
std::string peerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "";
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr = ss.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  return ::inet_ntop(ss.ss_family, addr, text, sizeof text) ? text : "";
}

// An Ingestor reject that is an identity refused (listed as a refusal, not only logged).
bool identityRefused(const std::string& reason) {
  return reason == "hostname mismatch" || reason == "relay: site mismatch";
}

bool powerOfTen(uint64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

HeartbeatInfo toInfo(const common::HeartbeatData& hb) {
  HeartbeatInfo info;
  info.agent_id = hb.agent_id;
  info.hostname = hb.hostname;
  info.boot_id = hb.boot_id;
  info.agent_version = hb.agent_version;
  info.ruleset_version = hb.ruleset_version;
  info.created_ns = hb.created_ns;
  info.started_ns = hb.started_ns;
  for (const auto& s : hb.sources) {
    SourceStatusInfo si;
    si.source = s.name;
    si.format = s.format;
    si.status = s.status;
    si.reason = s.reason;
    si.records = s.records;
    si.skipped = s.skipped;
    si.lost = s.lost;
    info.sources.push_back(std::move(si));
  }
  info.spool_batches = hb.spool_batches;
  info.spool_bytes = hb.spool_bytes;
  info.dropped_symptoms = hb.dropped_symptoms;
  info.next_sequence = hb.next_sequence;
  info.inventory = hb.inventory;
  return info;
}

}  // namespace

ZmqEndpoint::ZmqEndpoint(Ingestor& ingestor, Metrics& metrics, const Clock& clock, ZmqEndpointOptions options)
    : ingestor_(ingestor), metrics_(metrics), clock_(clock), options_(std::move(options)) {
  if (!options_.log) options_.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  metrics_.describe("faultline_heartbeats_total", "heartbeats stored");
  metrics_.describe("faultline_acks_total", "acks sent (stored or duplicate batches)");
  metrics_.describe("faultline_ingest_group_errors_total",
                    "group commits of an ingest pass that failed (begin: batches committed one by one; commit: not acked)");
  metrics_.describe("faultline_allowlist_reloads_total", "allow-list loads, by result");
  metrics_.describe("faultline_ingest_log_suppressed_total", "reject log lines left out by the rate limit");
  metrics_.describe("faultline_ingest_received_bytes_total",
                    "message bytes received on the ingest socket (type + payload frames, as sent), by type");
  metrics_.describe("faultline_relay_batches_total", "site relay batches received, by result");
  metrics_.describe("faultline_relay_verdicts_total", "verdict revisions received from site relays");
  metrics_.describe("faultline_relay_unresolved_revisions_total",
                    "relayed revisions that repeat a revision this aggregator never received (not stored)");
  metrics_.describe("faultline_relay_symptoms_total", "symptom summaries received from site relays");
  metrics_.describe("faultline_refusals_total",
                    "identities refused at the ingest endpoint (unknown key, wrong server key, not CURVE, protocol "
                    "error, hostname or site mismatch), by reason");
}

ZmqEndpoint::~ZmqEndpoint() {
  stopStore();  // run() has done it, unless it never ran or left by an exception
  stop_ = true;
  if (monitor_thread_.joinable()) monitor_thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  // Sockets before the context: context_t's destructor waits for open sockets.
  if (router_ && monitor_) zmq_socket_monitor(router_->handle(), nullptr, 0);
  monitor_.reset();
  router_.reset();
  zap_.reset();
}

bool ZmqEndpoint::start(std::string* error) {
  if (!isZ85Key(options_.curve_secret_key)) {
    *error = "curve secret key: not a 40-character Z85 key";
    return false;
  }
  std::vector<std::string> errors;
  allow_ = loadAllowList(options_.allow_dir, &errors);
  if (!errors.empty() && allow_.host_by_key.empty() && errors.front().rfind(options_.allow_dir + ":", 0) == 0) {
    *error = "allow-list: " + errors.front();
    return false;
  }
  for (const auto& e : errors) logLine("faultline-aggregator: allow-list: " + e);
  allowed_keys_ = allow_.host_by_key.size();
  metrics_.add("faultline_allowlist_reloads_total", "result", errors.empty() ? "ok" : "partial");
  try {
    // ZAP first: a handshake that finds no handler would be let through unauthenticated.
    zap_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::rep);
    zap_->set(zmq::sockopt::linger, 0);
    zap_->bind(kZapEndpoint);
    router_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::router);
    router_->set(zmq::sockopt::linger, 0);
    router_->set(zmq::sockopt::curve_server, 1);
    router_->set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
    router_->set(zmq::sockopt::zap_domain, "faultline");
    // A restarted agent reconnects with the same routing id: the new connection takes it over.
    router_->set(zmq::sockopt::router_handover, 1);
    // Far beyond the limit libzmq itself drops the connection (memory bound); between the two
    // the message arrives and is rejected and counted here.
    router_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.max_message_bytes) * 2 + 4096);
    router_->set(zmq::sockopt::rcvhwm, 10000);
    // A fleet reconnecting at once (an aggregator restart with 2,000 agents) overflows the
    // default listen backlog of 100: connects are refused and retried for seconds.
    router_->set(zmq::sockopt::backlog, 4096);
    // Handshakes that fail before ZAP (a HELLO that does not open with our key) are seen only
    // here; ACCEPTED carries the connection's fd, whose peer the monitor thread reads.
    if (zmq_socket_monitor(router_->handle(), kMonitorEndpoint,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
      throw zmq::error_t();
    monitor_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(kMonitorEndpoint);
    router_->bind(options_.endpoint);
    std::lock_guard lock(endpoint_mu_);
    endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    *error = options_.endpoint + ": " + e.what();
    if (router_ && monitor_) zmq_socket_monitor(router_->handle(), nullptr, 0);
    monitor_.reset();
    router_.reset();
    zap_.reset();
    return false;
  }
  return true;
}

std::string ZmqEndpoint::endpoint() const {
  std::lock_guard lock(endpoint_mu_);
  return endpoint_;
}

void ZmqEndpoint::stop() { stop_ = true; }
void ZmqEndpoint::requestReload() { reload_requested_ = true; }

void ZmqEndpoint::reload() {
  std::vector<std::string> errors;
  AllowList fresh = loadAllowList(options_.allow_dir, &errors);
  for (const auto& e : errors) logLine("faultline-aggregator: allow-list: " + e);
  bool dir_failed = !errors.empty() && fresh.host_by_key.empty() &&
                    errors.front().rfind(options_.allow_dir + ":", 0) == 0;
  if (dir_failed) {
    // An unreadable directory keeps the old list rather than locking every agent out.
    metrics_.add("faultline_allowlist_reloads_total", "result", "error");
  } else {
    allow_ = std::move(fresh);
    allowed_keys_ = allow_.host_by_key.size();
    metrics_.add("faultline_allowlist_reloads_total", "result", errors.empty() ? "ok" : "partial");
    logLine("faultline-aggregator: allow-list reloaded, " + std::to_string(allow_.host_by_key.size()) + " keys");
  }
  ++reloads_;
}

void ZmqEndpoint::run() {
  if (!router_) return;
  const bool grouped = !options_.legacy_ingest;
  if (grouped) {
    if (wake_fd_ < 0) wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      logLine("faultline-aggregator: ingest: eventfd failed; passes are stored on the socket thread");
    } else {
      store_quit_ = false;
      store_thread_ = std::thread([this] { storeLoop(); });
    }
  }
  const bool pipelined = store_thread_.joinable();
  if (monitor_ && !monitor_thread_.joinable()) monitor_thread_ = std::thread([this] { monitorLoop(); });
  while (!stop_) {
    if (reload_requested_.exchange(false)) reload();
    zmq::pollitem_t items[] = {{zap_->handle(), 0, ZMQ_POLLIN, 0},
                               {router_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, pipelined ? wake_fd_ : -1, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, pipelined ? 3 : 2, std::chrono::milliseconds(options_.poll_ms));
      if (items[0].revents & ZMQ_POLLIN) handleZap();
      if (pipelined && (items[2].revents & ZMQ_POLLIN)) {
        uint64_t n;
        while (::read(wake_fd_, &n, sizeof n) == sizeof n) {
        }
        awaitStore();
      }
      if (items[1].revents & ZMQ_POLLIN) {
        if (!grouped) handleRouter();
        else readPass();
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      logLine(std::string("faultline-aggregator: ingest: zmq: ") + e.what());
    }
  }
  stopStore();
  if (monitor_thread_.joinable()) monitor_thread_.join();
}

// Each event is two frames: [u16 event, u32 value] and the endpoint. A CURVE server that cannot
// open a HELLO (the client was given another server key) reports HANDSHAKE_FAILED_PROTOCOL with
// ZMTP_CRYPTOGRAPHIC and then, at once, DISCONNECTED with the connection's fd: the failure is
// recorded on that DISCONNECTED, with the address read at ACCEPTED (libzmq 4.3's monitor names
// only our own endpoint). ZAP's refusals are recorded by handleZap, not here. A peer that closes
// or resets during the handshake (HANDSHAKE_FAILED_NO_DETAIL) is not listed: a TCP health check
// looks the same, and a client that refused us says so in its own log.
void ZmqEndpoint::monitorLoop() {
  std::map<int, std::string> peers;  // open connections' fds -> address
  std::optional<uint32_t> failed;    // the protocol error waiting for its DISCONNECTED
  while (!stop_) {
    zmq::pollitem_t item{monitor_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(options_.poll_ms)) <= 0) continue;
      zmq::message_t head, where;
      while (monitor_->recv(head, zmq::recv_flags::dontwait)) {
        if (head.more()) (void)monitor_->recv(where, zmq::recv_flags::dontwait);
        if (head.size() < 6) continue;
        uint16_t event = 0;
        uint32_t value = 0;
        std::memcpy(&event, head.data(), sizeof event);
        std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
        if (event == ZMQ_EVENT_ACCEPTED) {
          peers[static_cast<int>(value)] = peerAddress(static_cast<int>(value));
          if (options_.connections) options_.connections->accepted(static_cast<int>(value));
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
          failed = value;
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
          if (options_.connections) options_.connections->disconnected(static_cast<int>(value), clock_.nowNs());
          auto it = peers.find(static_cast<int>(value));
          std::string peer = it == peers.end() ? "" : it->second;
          if (it != peers.end()) peers.erase(it);
          if (!failed) continue;
          Refusal r;
          if (*failed == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
            r.reason = "wrong server key";
            r.detail = "its CurveZMQ HELLO does not open with this aggregator's key";
          } else if (*failed == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
            r.reason = "not CURVE";
            r.detail = "its ZMTP greeting names another security mechanism";
          } else {
            char code[16];
            std::snprintf(code, sizeof code, "0x%08x", *failed);
            r.reason = "protocol error";
            r.detail = std::string("ZMTP protocol error ") + code;
          }
          r.peer = peer;
          failed.reset();
          refuse(r, false);
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      logLine(std::string("faultline-aggregator: ingest: zmq monitor: ") + e.what());
    }
  }
}

// ZAP (RFC 27): [version, request id, domain, address, identity, mechanism, credentials...];
// reply [version, request id, status code, status text, user id, metadata].
void ZmqEndpoint::handleZap() {
  std::vector<zmq::message_t> req;
  while (true) {
    zmq::message_t m;
    if (!zap_->recv(m, zmq::recv_flags::dontwait)) break;
    bool more = m.more();
    req.push_back(std::move(m));
    if (!more) break;
  }
  if (req.empty()) return;
  std::string version = req.size() > 0 ? req[0].to_string() : "", request_id = req.size() > 1 ? req[1].to_string() : "";
  std::string address = req.size() > 3 ? req[3].to_string() : "";
  std::string status = "400", text = "not allowed", user;
  if (req.size() >= 7 && req[5].to_string_view() == "CURVE" && req[6].size() == 32) {
    char z85[41] = {};
    zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
    if (auto it = allow_.host_by_key.find(z85); it != allow_.host_by_key.end()) {
      status = "200";
      text = "OK";
      user = it->second;
    } else {
      Refusal r;
      r.reason = "unknown key";
      r.peer = address;
      r.key = z85;
      refuse(r, false);
    }
  } else {
    ingestor_.countReject("unauthenticated");
    Refusal r;
    r.reason = "not CURVE";
    r.peer = address;
    r.detail = "mechanism " + (req.size() > 5 ? printable(req[5].to_string_view()) : std::string("?"));
    refuse(r, true);
  }
  zap_->send(zmq::buffer(version.empty() ? std::string("1.0") : version), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(status), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(text), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(user), zmq::send_flags::sndmore);
  zap_->send(zmq::str_buffer(""), zmq::send_flags::none);
}

bool ZmqEndpoint::recvMessage(std::vector<zmq::message_t>* frames) {
  frames->clear();
  while (true) {
    zmq::message_t m;
    if (!router_->recv(m, zmq::recv_flags::dontwait)) break;
    bool more = m.more();
    frames->push_back(std::move(m));
    if (!more) break;
  }
  return !frames->empty();
}

void ZmqEndpoint::handleRouter() {
  // Drain what is queued now (bounded, so ZAP requests are not starved by a flood), all of it in
  // one group commit: one fsync per pass instead of one per batch. Acks go out after the commit.
  Outcome out;
  const bool group = ingestor_.beginGroup();
  std::vector<zmq::message_t> frames;
  for (int n = 0; n < 256; ++n) {
    if (!recvMessage(&frames)) break;
    Screened s;
    if (screen(frames, &s)) dispatch(s, out);
    // The HTTP API or the verdict engine wants the store: commit and ack what we have, the
    // rest of the queue is read at the next poll.
    if (group && ingestor_.othersWaiting()) break;
  }
  if (group && !ingestor_.endGroup()) {
    // Nothing of this pass is stored: no acks, the agents resend.
    out.logs.push_back("faultline-aggregator: ingest: group commit failed; " + std::to_string(out.acks.size()) +
                       " batches will be resent");
    out.acks.clear();
  }
  finish(out);
}

void ZmqEndpoint::fillPass(Pass& pass) {
  const size_t max_pass = options_.max_pass > 0 ? static_cast<size_t>(options_.max_pass) : 1;
  for (size_t n = 0; pass.items.size() < max_pass && n < max_pass; ++n) {
    Item it;
    if (!recvMessage(&it.frames)) break;
    it.s = std::make_unique<Screened>();
    if (!screen(it.frames, it.s.get())) continue;
    if (!it.s->relay && it.s->plain.type == common::kTypeBatch) {
      IngestResult rejected;
      it.batch = ingestor_.decodeBatch(it.s->plain.payload, it.s->host, &it.sequence, &rejected);
      if (!it.batch) {
        if (identityRefused(rejected.reason))
          refuse({rejected.reason, it.s->peer, "", it.s->host, rejected.detail}, true);
        else
          reject("", it.s->who, rejected.reason);
        continue;
      }
      it.payloads = ingestor_.payloadsFor(*it.batch);
    }
    pass.items.push_back(std::move(it));
  }
}

void ZmqEndpoint::readPass() {
  auto pass = std::make_unique<Pass>();
  pass->items.reserve(64);
  fillPass(*pass);
  if (!store_thread_.joinable()) {  // no store thread (eventfd failed): store it here
    if (!pass->items.empty()) storePass(*pass);
    finish(pass->out);
    return;
  }
  // Decoded while the store thread wrote the pass before; what arrived meanwhile joins this one.
  awaitStore();
  fillPass(*pass);
  if (pass->items.empty()) return;
  std::lock_guard lock(store_mu_);
  store_pass_ = std::move(pass);
  store_done_ = false;
  store_cv_.notify_all();
}

void ZmqEndpoint::storeLoop() {
  std::unique_lock lock(store_mu_);
  while (true) {
    store_cv_.wait(lock, [&] { return store_quit_ || (store_pass_ && !store_done_); });
    if (store_pass_ && !store_done_) {
      Pass* pass = store_pass_.get();
      lock.unlock();
      storePass(*pass);
      lock.lock();
      store_done_ = true;
      store_cv_.notify_all();
      const uint64_t one = 1;
      if (::write(wake_fd_, &one, sizeof one) < 0) {
        // The counter is full only if run() stopped reading it; awaitStore() does not need it.
      }
      continue;
    }
    if (store_quit_) return;
  }
}

void ZmqEndpoint::awaitStore() {
  std::unique_ptr<Pass> done;
  {
    std::unique_lock lock(store_mu_);
    store_cv_.wait(lock, [&] { return !store_pass_ || store_done_; });
    done = std::move(store_pass_);
    store_done_ = false;
  }
  if (done) finish(done->out);
}

void ZmqEndpoint::stopStore() {
  if (!store_thread_.joinable()) return;
  awaitStore();
  {
    std::lock_guard lock(store_mu_);
    store_quit_ = true;
    store_cv_.notify_all();
  }
  store_thread_.join();
}

// One pass in one group, acked after its commit (by the run() thread, from pass.out). Heartbeats
// and relay batches go through dispatch() inside the group, in order.
void ZmqEndpoint::storePass(Pass& pass) {
  auto& items = pass.items;
  Outcome& out = pass.out;
  bool group = ingestor_.beginGroup();
  size_t acked = 0;  // acks of groups already committed
  auto commit = [&] {
    if (group && !ingestor_.endGroup()) {
      // Nothing of this group is stored: no acks, the agents resend.
      out.logs.push_back("faultline-aggregator: ingest: group commit failed; " +
                         std::to_string(out.acks.size() - acked) + " batches will be resent");
      out.acks.resize(acked);
    }
    acked = out.acks.size();
  };
  // Consecutive batches go to the store as one run (a few statements per table for all of them);
  // heartbeats and relay batches between them keep their place.
  constexpr size_t kMaxRun = 256;
  for (size_t i = 0; i < items.size();) {
    size_t end = i;
    if (!items[i].batch) {
      dispatch(*items[i].s, out);
      end = i + 1;
    } else {
      while (end < items.size() && items[end].batch && end - i < kMaxRun) ++end;
      std::vector<Store::IngestInput> run;
      run.reserve(end - i);
      for (size_t k = i; k < end; ++k) run.push_back({&*items[k].batch, items[k].s->routing_id, &items[k].payloads});
      std::vector<IngestResult> results;
      if (group) {
        results = ingestor_.ingestRun(run);
      } else {
        for (const auto& in : run) results.push_back(ingestor_.ingest(*in.batch, in.agent));
      }
      for (size_t k = i; k < end; ++k) {
        const auto& r = results[k - i];
        auto& it = items[k];
        if (r.status == IngestResult::Status::kRejected)
          note(out, "", it.s->who, r.reason);  // counted by the Ingestor
        else
          out.acks.emplace_back(it.s->routing_id, common::encodeAck({it.s->routing_id, it.sequence}));
      }
    }
    i = end;
    // The HTTP API or the verdict engine wants the store: commit what we have, let it in
    // (beginGroup yields to it), and go on with the rest of the pass in a new group.
    if (group && i < items.size() && ingestor_.othersWaiting()) {
      commit();
      group = ingestor_.beginGroup();
    }
  }
  commit();
}

void ZmqEndpoint::finish(Outcome& out) {
  for (const auto& line : out.logs) logLine(line);
  out.logs.clear();
  for (const auto& [routing_id, ack] : out.acks) {
    metrics_.add("faultline_acks_total");  // before the send: a test may read it on the ack
    try {
      router_->send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_->send(zmq::buffer(common::kTypeAck), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_->send(zmq::buffer(ack), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      // The agent resends what is not acked; nothing is lost.
      logLine("faultline-aggregator: ingest: ack to " + printable(routing_id) + ": " + e.what());
    }
  }
  out.acks.clear();
}

bool ZmqEndpoint::screen(std::vector<zmq::message_t>& frames, Screened* s) {
  s->routing_id = frames[0].to_string();
  // The hostname ZAP bound to this connection's key; every frame of a message carries it.
  if (frames.size() > 1) {
    const char* uid = zmq_msg_gets(frames[1].handle(), "User-Id");
    if (uid) s->host = uid;
    const char* peer = zmq_msg_gets(frames[1].handle(), "Peer-Address");
    if (peer) s->peer = peer;
    // The connection it came on: its host is connected (until the monitor sees that fd close).
    const int fd = zmq_msg_get(frames[1].handle(), ZMQ_SRCFD);
    if (uid && fd >= 0 && options_.connections) options_.connections->seen(s->host, fd);
  }
  s->who = s->host.empty() ? printable(s->routing_id) : s->host;
  const std::string& who = s->who;
  auto rejected = [&](const std::string& reason, const std::string& detail = "") {
    reject(reason, who, detail);
    return false;
  };
  if (s->host.empty()) return rejected("unauthenticated");
  if (frames.size() != 3) return rejected("frame count", std::to_string(frames.size() - 1) + " frames");
  if (frames[2].size() > options_.max_message_bytes)
    return rejected("oversized", std::to_string(frames[2].size()) + " bytes");
  {
    // Counted as sent (before inflating), under a known type only: a hostile type name must not
    // create metric series.
    auto t = frames[1].to_string_view();
    std::string_view base = t.substr(0, t.find('+'));
    bool known = base == common::kTypeBatch || base == common::kTypeHeartbeat || base == common::kTypeRelay;
    metrics_.add("faultline_ingest_received_bytes_total", "type", known ? std::string(base) : "other",
                 frames[1].size() + frames[2].size());
  }
  // "batch+zstd" / "heartbeat+zstd": inflated within the same size limit.
  std::string why;
  if (!common::unwrapPayload(frames[1].to_string_view(), frames[2].to_string_view(), &s->plain, &why,
                             options_.max_message_bytes))
    return rejected("zstd: " + why);
  s->relay = s->host.starts_with(kRelayPrefix);
  if (s->relay != (s->plain.type == common::kTypeRelay)) {
    // A site's key speaks only "relay"; a node's key never does.
    return rejected(s->relay ? "relay: not a relay message" : "relay: not a relay key", printable(s->plain.type));
  }
  return true;
}

void ZmqEndpoint::dispatch(Screened& s, Outcome& out) {
  const std::string& routing_id = s.routing_id;
  const std::string& host = s.host;
  const std::string& who = s.who;
  auto type = s.plain.type;
  auto payload = s.plain.payload;
  const bool relay = s.relay;
  if (type == common::kTypeBatch || type == common::kTypeRelay) {
    uint64_t sequence = 0;
    auto r = relay ? ingestor_.ingestRelayBytes(payload, std::string_view(host).substr(kRelayPrefix.size()), &sequence)
                   : ingestor_.ingestBytes(payload, routing_id, host, &sequence);
    if (r.status == IngestResult::Status::kRejected) {
      // Counted by the Ingestor; only logged here (refusals also listed).
      if (identityRefused(r.reason))
        return refuse({r.reason, s.peer, "", host, r.detail}, true);
      return note(out, "", who, r.reason + (r.detail.empty() ? "" : " (" + r.detail + ")"));
    }
    // Acked once the pass's group is committed.
    out.acks.emplace_back(routing_id, common::encodeAck({routing_id, sequence}));
    return;
  }
  if (type == common::kTypeHeartbeat) {
    std::string reason;
    auto hb = common::decodeHeartbeat(payload, &reason);
    if (!hb) return note(out, "heartbeat: decode: " + reason, who);
    if (hb->hostname != host) {
      ingestor_.countReject("heartbeat: hostname mismatch");
      return refuse({"hostname mismatch", s.peer, "", host, "heartbeat claims " + printable(hb->hostname)}, true);
    }
    if (!ingestor_.heartbeat(toInfo(*hb), routing_id, &reason)) return note(out, "", who, "heartbeat: " + reason);
    return;
  }
  note(out, "unknown type", who, printable(type));
}

// reason "" = already counted by the Ingestor.
std::string ZmqEndpoint::rejectLine(const std::string& reason, const std::string& who, const std::string& detail) {
  std::string line = "faultline-aggregator: ingest: rejected from " + who + ": " + (reason.empty() ? detail : reason);
  if (!reason.empty() && !detail.empty()) line += " (" + detail + ")";
  return line;
}

void ZmqEndpoint::reject(const std::string& reason, const std::string& who, const std::string& detail) {
  if (!reason.empty()) ingestor_.countReject(reason);
  logLine(rejectLine(reason, who, detail));
}

void ZmqEndpoint::note(Outcome& out, const std::string& reason, const std::string& who, const std::string& detail) {
  if (!reason.empty()) ingestor_.countReject(reason);
  out.logs.push_back(rejectLine(reason, who, detail));
}

void ZmqEndpoint::refuse(const Refusal& r, bool counted) {
  if (!counted) ingestor_.countReject(r.reason);
  metrics_.add("faultline_refusals_total", "reason", r.reason);
  const uint64_t n = options_.refusals ? options_.refusals->record(r, clock_.nowNs()) : 1;
  if (!powerOfTen(n)) return;
  std::string line = "faultline-aggregator: ingest: refused " + (r.peer.empty() ? std::string("a peer") : r.peer);
  if (!r.host.empty()) line += " (key of " + r.host + ")";
  line += ": " + r.reason;
  if (!r.key.empty()) line += ", key " + r.key;
  if (!r.detail.empty()) line += ", " + r.detail;
  if (n > 1) line += " (" + std::to_string(n) + " times)";
  if (auto hint = refusalHint(r.reason); !hint.empty()) line += " — " + hint;
  logLine(line);
}

void ZmqEndpoint::logLine(const std::string& line) {
  std::lock_guard lock(log_mu_);
  int64_t now = clock_.steadyNs();
  if (now - log_window_start_ns_ >= kMinuteNs) {
    if (log_suppressed_)
      options_.log("faultline-aggregator: ingest: " + std::to_string(log_suppressed_) + " log lines suppressed");
    log_window_start_ns_ = now;
    log_in_window_ = 0;
    log_suppressed_ = 0;
  }
  if (options_.log_per_minute > 0 && log_in_window_ >= options_.log_per_minute) {
    ++log_suppressed_;
    metrics_.add("faultline_ingest_log_suppressed_total");
    return;
  }
  ++log_in_window_;
  options_.log(line);
}

}  // namespace faultline::aggregator
