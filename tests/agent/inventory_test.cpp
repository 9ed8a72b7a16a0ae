// Node inventory: nvidia-smi's CSV (a fake nvidia-smi script printing real-format output), HCA
// ports from a fake sysfs tree, the collector running the command off the event loop (failure,
// hang), and the agent sending the inventory at start, on change and every Nth heartbeat.
#include "agent/inventory.h"

#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <deque>
#include <filesystem>
#include <fstream>

#include "agent/agent.h"
#include "common/schema/faultline.capnp.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

const char* kSmiOutput =
    "0, 00000000:18:00.0, GPU-9f3a2c11-0e7b-4c3d-8a21-5b6f0d2e9c41, 1650922021234\n"
    "1, 00000000:2A:00.0, GPU-00010ff4-4ae4-0588-e405-0ff44ae40588, 1650922021235\n"
    "6, 00000000:BA:00.0, GPU-00060022-b315-5df5-155d-0022b3155df5, [N/A]\n";

void writeFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// A stand-in for nvidia-smi: prints `out_file`'s content (so a test can change the node), or
// fails/hangs as told.
std::string fakeSmi(const TempDir& dir, const std::string& body) {
  std::string path = dir.file("nvidia-smi");
  writeFile(path, "#!/bin/sh\n" + body + "\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

// /sys/class/infiniband/<hca>/{device -> ../../../0000:0c:00.0, ports/<n>/{state,link_layer}}
void fakeHca(const std::string& root, const std::string& name, const std::string& pci, int port,
             const std::string& state, const std::string& layer = "InfiniBand") {
  namespace fs = std::filesystem;
  fs::path dev = fs::path(root) / "devices" / "pci0000:00" / pci / "infiniband" / name;
  fs::create_directories(dev / "ports" / std::to_string(port));
  fs::path cls = fs::path(root) / "class" / "infiniband";
  fs::create_directories(cls);
  std::error_code ec;
  fs::create_directory_symlink(fs::relative(dev, cls), cls / name, ec);
  fs::create_directory_symlink(fs::path("../../..") / pci, dev / "device", ec);  // relative, like sysfs
  writeFile((dev / "ports" / std::to_string(port) / "state").string(), state + "\n");
  writeFile((dev / "ports" / std::to_string(port) / "link_layer").string(), layer + "\n");
}

// A getifaddrs()-shaped list built by hand: each entry owns its sockaddr.
class IfaddrsList {
 public:
  IfaddrsList& add(const char* name, unsigned flags, int family, const char* address) {
    auto& e = entries_.emplace_back();
    e.name = name;
    e.ifa.ifa_name = e.name.data();
    e.ifa.ifa_flags = flags;
    if (family == AF_INET) {
      e.addr.v4.sin_family = AF_INET;
      REQUIRE(::inet_pton(AF_INET, address, &e.addr.v4.sin_addr) == 1);
    } else if (family == AF_INET6) {
      e.addr.v6.sin6_family = AF_INET6;
      REQUIRE(::inet_pton(AF_INET6, address, &e.addr.v6.sin6_addr) == 1);
    } else {
      e.addr.any.sa_family = static_cast<sa_family_t>(family);  // AF_PACKET: no IP address
    }
    e.ifa.ifa_addr = family < 0 ? nullptr : &e.addr.any;
    return *this;
  }
  const struct ifaddrs* head() {
    for (size_t i = 0; i < entries_.size(); ++i)
      entries_[i].ifa.ifa_next = i + 1 < entries_.size() ? &entries_[i + 1].ifa : nullptr;
    return entries_.empty() ? nullptr : &entries_.front().ifa;
  }

 private:
  struct Entry {
    std::string name;
    struct ifaddrs ifa = {};
    union {
      sockaddr any;
      sockaddr_in v4;
      sockaddr_in6 v6;
      sockaddr_storage storage;
    } addr = {};
  };
  std::deque<Entry> entries_;  // stable addresses: the list links into it
};

}  // namespace

TEST_CASE("inventory: interface addresses from a getifaddrs list", "[inventory]") {
  IfaddrsList l;
  l.add("lo", IFF_UP | IFF_LOOPBACK, AF_INET, "127.0.0.1")
      .add("lo", IFF_UP | IFF_LOOPBACK, AF_INET6, "::1")
      .add("eth0", IFF_UP, AF_PACKET, nullptr)
      .add("ib0", IFF_UP, AF_INET, "192.168.5.7")
      .add("eth0", IFF_UP, AF_INET, "10.0.0.2")
      .add("eth0", IFF_UP, AF_INET6, "fe80::a00:27ff:fe4e:66a1")  // link-local: on every node
      .add("ib0", IFF_UP, AF_INET6, "fd00:0:0:0::2")              // printed canonically
      .add("eth0:1", IFF_UP, AF_INET, "10.0.0.2")                 // the same address twice
      .add("tun0", IFF_UP, -1, nullptr)                           // no address at all
      .add("ib1", 0, AF_INET, "192.168.6.7")                      // down, still this node's
      .add("dummy0", IFF_UP, AF_INET, "0.0.0.0");
  CHECK(interfaceAddresses(l.head()) ==
        std::vector<std::string>{"10.0.0.2", "192.168.5.7", "192.168.6.7", "fd00::2"});
  CHECK(interfaceAddresses(nullptr).empty());

  // This machine's own list: whatever it holds, never a loopback or link-local address.
  std::string error;
  auto mine = readInterfaceAddresses(&error);
  CHECK(error.empty());
  CHECK(std::is_sorted(mine.begin(), mine.end()));
  for (const auto& a : mine) {
    CHECK(a != "127.0.0.1");
    CHECK(a != "::1");
    CHECK(a.rfind("fe80:", 0) != 0);
  }
}

TEST_CASE("inventory: addresses survive the heartbeat codec, an inventory without them decodes as empty",
          "[inventory]") {
  common::HeartbeatData hb;
  hb.agent_id = "agent-1";
  hb.hostname = "gpu-node-2";
  common::NodeInventory inv;
  inv.collected_ns = 1'700'000'000'000'000'000;
  inv.gpus.push_back({0, "0000:18:00.0", "GPU-1", "1650922021234"});
  const uint64_t hash_without = common::inventoryHash(inv);
  inv.addresses = {"10.0.0.2", "192.168.5.7", "fd00::2"};
  hb.inventory_hash = common::inventoryHash(inv);
  CHECK(hb.inventory_hash != hash_without);  // a changed address is a changed inventory
  hb.inventory = inv;
  std::string reason;
  auto got = common::decodeHeartbeat(common::encodeHeartbeat(hb), &reason);
  REQUIRE(got);
  REQUIRE(got->inventory);
  CHECK(got->inventory->addresses == inv.addresses);
  CHECK(got->inventory->sameDevices(inv));
  CHECK(common::inventoryHash(*got->inventory) == hb.inventory_hash);
  auto moved = inv;
  moved.addresses = {"10.0.0.3"};
  CHECK_FALSE(moved.sameDevices(inv));

  // An agent from before addresses: its NodeInventory has no field 5 at all.
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Heartbeat>();
  root.setAgentId("agent-1");
  root.setHostname("gpu-node-2");
  auto old = root.initInventory();
  old.setCollectedNs(inv.collected_ns);
  auto gpus = old.initGpus(1);
  gpus[0].setIndex(0);
  gpus[0].setPciBusId("0000:18:00.0");
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  auto bytes = out.getArray();
  got = common::decodeHeartbeat(std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size()), &reason);
  REQUIRE(got);
  REQUIRE(got->inventory);
  CHECK(got->inventory->gpus.size() == 1);
  CHECK(got->inventory->addresses.empty());
}

TEST_CASE("inventory: nvidia-smi CSV lines become GPUs with normalised PCI ids", "[inventory]") {
  std::string error;
  auto gpus = parseNvidiaSmiGpus(kSmiOutput, &error);
  CHECK(error.empty());
  REQUIRE(gpus.size() == 3);
  CHECK(gpus[0].index == 0);
  CHECK(gpus[0].pci_bus_id == "0000:18:00.0");
  CHECK(gpus[0].uuid == "GPU-9f3a2c11-0e7b-4c3d-8a21-5b6f0d2e9c41");
  CHECK(gpus[0].serial == "1650922021234");
  CHECK(gpus[2].index == 6);
  CHECK(gpus[2].pci_bus_id == "0000:ba:00.0");  // the form an Xid's device takes
  CHECK(gpus[2].serial.empty());                // [N/A]
  // nvidia-smi reports its own failure on stdout.
  gpus = parseNvidiaSmiGpus(
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
      "NVIDIA driver is installed and running.\n\n",
      &error);
  CHECK(gpus.empty());
  CHECK(error.find("couldn't communicate") != std::string::npos);
}

TEST_CASE("inventory: HCA ports from a sysfs tree", "[inventory]") {
  TempDir dir;
  fakeHca(dir.path(), "mlx5_1", "0000:1f:00.0", 1, "1: DOWN");
  fakeHca(dir.path(), "mlx5_0", "0000:0c:00.0", 1, "4: ACTIVE");
  fakeHca(dir.path(), "mlx5_0", "0000:0c:00.0", 2, "4: ACTIVE", "Ethernet");
  std::string error;
  auto ports = readHcaPorts(dir.path(), &error);
  CHECK(error.empty());
  REQUIRE(ports.size() == 3);
  CHECK(ports[0] == common::HcaPortInfo{"mlx5_0", "0000:0c:00.0", 1, "ACTIVE", "InfiniBand"});
  CHECK(ports[1] == common::HcaPortInfo{"mlx5_0", "0000:0c:00.0", 2, "ACTIVE", "Ethernet"});
  CHECK(ports[2] == common::HcaPortInfo{"mlx5_1", "0000:1f:00.0", 1, "DOWN", "InfiniBand"});
  // No infiniband class at all: a node without HCAs, not an error.
  TempDir empty;
  CHECK(readHcaPorts(empty.path(), &error).empty());
  CHECK(error.empty());
}

TEST_CASE("inventory: the collector runs nvidia-smi off the loop, failures and hangs are reported", "[inventory]") {
  TempDir dir;
  writeFile(dir.file("gpus.csv"), kSmiOutput);
  fakeHca(dir.file("sys"), "mlx5_0", "0000:0c:00.0", 1, "4: ACTIVE");
  boost::asio::io_context io;
  ManualClock clock;
  InventoryOptions o;
  o.sysfs_root = dir.file("sys");
  o.timeout_ms = 500;
  std::optional<common::NodeInventory> got;
  auto run = [&](InventoryCollector& c) {
    got.reset();
    REQUIRE(c.collect([&](common::NodeInventory inv) { got = std::move(inv); }));
    CHECK_FALSE(c.collect([](common::NodeInventory) {}));  // one at a time
    REQUIRE(runUntil(io, [&] { return got.has_value(); }));
    CHECK_FALSE(c.running());
  };

  SECTION("real-format output, arguments as documented") {
    o.nvidia_smi = fakeSmi(dir, "[ \"$1 $2\" = \"--query-gpu=index,pci.bus_id,uuid,serial --format=csv,noheader\" ] || exit 3\n"
                                "cat " + dir.file("gpus.csv"));
    InventoryCollector c(io, clock, o);
    run(c);
    CHECK(got->gpu_error.empty());
    REQUIRE(got->gpus.size() == 3);
    CHECK(got->gpus[1].pci_bus_id == "0000:2a:00.0");
    REQUIRE(got->hcas.size() == 1);
    CHECK(got->hcas[0].pci_address == "0000:0c:00.0");
    CHECK(got->collected_ns == clock.nowNs());
  }
  SECTION("driver not loaded: exit status and nvidia-smi's message") {
    o.nvidia_smi = fakeSmi(dir, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9");
    InventoryCollector c(io, clock, o);
    run(c);
    CHECK(got->gpus.empty());
    CHECK(got->gpu_error.find("exit status 9: NVIDIA-SMI has failed") != std::string::npos);
    CHECK(got->hcas.size() == 1);  // the HCAs are still reported
  }
  SECTION("no nvidia-smi on this node") {
    o.nvidia_smi = dir.file("no-such-nvidia-smi");
    InventoryCollector c(io, clock, o);
    run(c);
    CHECK(got->gpus.empty());
    CHECK(got->gpu_error.find("No such file") != std::string::npos);
  }
  SECTION("a hung nvidia-smi is killed at the timeout") {
    o.nvidia_smi = fakeSmi(dir, "exec sleep 30");
    InventoryCollector c(io, clock, o);
    run(c);
    CHECK(got->gpu_error.find("timed out") != std::string::npos);
  }
}

TEST_CASE("inventory: sent at start, again only on change or every Nth heartbeat", "[inventory][agent]") {
  TempDir dir;
  writeFile(dir.file("gpus.csv"), kSmiOutput);
  writeFile(dir.file("app.log"), "");
  boost::asio::io_context io;
  ManualClock clock;
  Logger log(clock, 0);
  zmq::context_t ctx;
  Receiver rx(ctx);
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  REQUIRE(spool);
  ShipperOptions so;
  so.endpoints = {rx.endpoint()};
  so.agent_id = "agent-1";
  so.tick_ms = 0;
  Shipper shipper(io, ctx, clock, *spool, so);
  REQUIRE(shipper.start(&error));
  // ZMQ_IMMEDIATE drops heartbeats until the connection is up: wait for it with a batch.
  InventoryOptions io_opts;
  io_opts.nvidia_smi = fakeSmi(dir, "cat " + dir.file("gpus.csv"));
  io_opts.sysfs_root = dir.file("sys");
  InventoryCollector collector(io, clock, io_opts);
  AgentOptions ao;
  ao.agent_id = "agent-1";
  ao.hostname = "gpu-node-1";
  ao.batch_interval_ms = 0;
  ao.heartbeat_interval_ms = 0;
  ao.inventory_every_heartbeats = 3;
  std::vector<std::unique_ptr<Source>> none;
  Agent agent(io, clock, shippedRules(), std::move(none), *spool, &shipper, ao, log, {}, &collector);
  // Let the connection come up first (heartbeats are best effort and not queued before).
  REQUIRE(runUntil(io, [&] {
    shipper.sendHeartbeat(encodeHeartbeat(agent.heartbeat()));
    rx.waitReadable(std::chrono::milliseconds(5));
    rx.pump();
    return !rx.heartbeats.empty();
  }));
  rx.heartbeats.clear();

  agent.start();  // collects at once; the result goes out in a heartbeat without waiting
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    return !rx.heartbeats.empty();
  }));
  REQUIRE(rx.heartbeats[0].inventory);
  CHECK(rx.heartbeats[0].inventory->gpus.size() == 3);
  CHECK(rx.heartbeats[0].inventory_hash == common::inventoryHash(*rx.heartbeats[0].inventory));
  CHECK(agent.stats().inventory_changes == 1);

  auto beat = [&] {
    size_t before = rx.heartbeats.size();
    agent.sendHeartbeat();
    REQUIRE(runUntil(io, [&] {
      rx.pump();
      return rx.heartbeats.size() == before + 1;
    }));
    return rx.heartbeats.back();
  };
  // Unchanged: the next two carry only the hash, the third the inventory again.
  auto hb = beat();
  CHECK_FALSE(hb.inventory);
  CHECK(hb.inventory_hash == rx.heartbeats[0].inventory_hash);
  CHECK_FALSE(beat().inventory);
  CHECK(beat().inventory);
  CHECK_FALSE(beat().inventory);

  // Not due yet: no re-check.
  clock.advance(ao.inventory_interval_ns / 2);
  agent.periodic();
  CHECK_FALSE(collector.running());
  // A GPU was replaced: the re-check after the interval finds it and tells the aggregator at once.
  writeFile(dir.file("gpus.csv"), std::string(kSmiOutput).replace(std::string(kSmiOutput).find("GPU-0006"), 8, "GPU-7777"));
  clock.advance(ao.inventory_interval_ns / 2);
  size_t before = rx.heartbeats.size();
  agent.periodic();
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    return rx.heartbeats.size() == before + 1;
  }));
  REQUIRE(rx.heartbeats.back().inventory);
  CHECK(rx.heartbeats.back().inventory->gpus[2].uuid.rfind("GPU-7777", 0) == 0);
  CHECK(rx.heartbeats.back().inventory_hash != rx.heartbeats[0].inventory_hash);
  CHECK(agent.stats().inventory_changes == 2);
  // The same again ten minutes later: collected, not sent.
  clock.advance(ao.inventory_interval_ns);
  agent.periodic();
  REQUIRE(runUntil(io, [&] { return agent.stats().inventories == 3; }));
  CHECK(agent.stats().inventory_changes == 2);
  CHECK(rx.heartbeats.size() == before + 1);
  agent.stop();
  shipper.stop();
}

TEST_CASE("heartbeat: one dropped before the connection is up is retried within seconds, not an interval later",
          "[inventory][agent]") {
  TempDir dir;
  writeFile(dir.file("gpus.csv"), kSmiOutput);
  boost::asio::io_context io;
  ManualClock clock;
  Logger log(clock, 0);
  zmq::context_t ctx;
  // A port nobody listens on yet: the aggregator comes up after the agent.
  std::string endpoint;
  {
    Receiver probe(ctx);
    endpoint = probe.endpoint();
  }
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  REQUIRE(spool);
  ShipperOptions so;
  so.endpoints = {endpoint};
  so.agent_id = "agent-1";
  so.tick_ms = 0;
  Shipper shipper(io, ctx, clock, *spool, so);
  REQUIRE(shipper.start(&error));
  InventoryOptions io_opts;
  io_opts.nvidia_smi = fakeSmi(dir, "cat " + dir.file("gpus.csv"));
  io_opts.sysfs_root = dir.file("sys");
  InventoryCollector collector(io, clock, io_opts);
  AgentOptions ao;
  ao.agent_id = "agent-1";
  ao.hostname = "gpu-node-1";
  ao.batch_interval_ms = 0;
  ao.heartbeat_interval_ms = 600'000;  // ten minutes: only the retry can deliver within the deadline
  std::vector<std::unique_ptr<Source>> none;
  Agent agent(io, clock, shippedRules(), std::move(none), *spool, &shipper, ao, log, {}, &collector);
  agent.start();  // the inventory is read at once and its heartbeat finds no connection
  REQUIRE(runUntil(io, [&] { return shipper.stats().heartbeats_dropped >= 1; }));
  Receiver rx(ctx, endpoint);
  REQUIRE(runUntil(
      io,
      [&] {
        rx.waitReadable(std::chrono::milliseconds(5));
        rx.pump();
        return !rx.heartbeats.empty();
      },
      std::chrono::seconds(20)));
  // The retried heartbeat still carries the inventory that the dropped one should have.
  REQUIRE(rx.heartbeats[0].inventory);
  CHECK(rx.heartbeats[0].inventory->gpus.size() == 3);
  agent.stop();
  shipper.stop();
}
