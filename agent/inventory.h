// The node's device inventory: GPUs from `nvidia-smi --query-gpu=index,pci.bus_id,uuid,serial
// --format=csv,noheader`, InfiniBand/RoCE HCA ports from /sys/class/infiniband and the node's
// network addresses (getifaddrs). It goes to the aggregator in heartbeats (common::NodeInventory)
// so an Xid's PCI id maps to a GPU and its ranks, and a peer address an NCCL error names maps to
// this node.
//
// Readers read, parsers parse: parseNvidiaSmiGpus() and interfaceAddresses() are pure;
// readHcaPorts() does small blocking reads of sysfs (a few files per port), readInterfaceAddresses()
// one getifaddrs call; InventoryCollector runs the GPU command as a child
// process without blocking the io_context (its stdout is read through a stream_descriptor, a
// timer kills it when it hangs — nvidia-smi can hang on a wedged driver).
//
// Failures never throw: they become NodeInventory::gpu_error / hca_error and the lists hold what
// could be read. Single-threaded: the collector is used from the io_context thread; stop the
// io_context or call cancel() before destroying it while a collection runs.
#pragma once

#include <ifaddrs.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/clock.h"
#include "common/protocol.h"

namespace faultline::agent {

// Lines "0, 00000000:18:00.0, GPU-9f3a…, 1650922021234". PCI ids are normalised
// (common::normalizePciId), "[N/A]" serials become "". Lines that do not have four fields or a
// numeric index are skipped and named in `error` (nvidia-smi prints its own failures on stdout,
// e.g. "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver").
std::vector<common::GpuInfo> parseNvidiaSmiGpus(std::string_view csv, std::string* error);

// Every <root>/class/infiniband/<hca>/ports/<n>: name, PCI address (the basename of the
// <hca>/device symlink), port number, state ("4: ACTIVE" -> "ACTIVE") and link layer. Sorted by
// name, then port. No infiniband class directory = no HCAs, not an error.
std::vector<common::HcaPortInfo> readHcaPorts(const std::string& sysfs_root, std::string* error);

// The addresses in a getifaddrs() list: IPv4 and IPv6 of every interface without IFF_LOOPBACK,
// printed by inet_ntop ("10.0.0.2", "fd00::2"); loopback, unspecified and link-local IPv6
// (fe80::/10) addresses are left out (link-local ones repeat on every node). Sorted, without
// duplicates. Entries without an address or of another family (AF_PACKET) are skipped.
std::vector<std::string> interfaceAddresses(const struct ifaddrs* list);
// interfaceAddresses(getifaddrs()); empty (and *error set) when getifaddrs fails.
std::vector<std::string> readInterfaceAddresses(std::string* error);

struct InventoryOptions {
  std::string nvidia_smi = "nvidia-smi";  // path or name on PATH; "" = no GPU inventory
  std::string sysfs_root = "/sys";
  bool read_addresses = true;             // false: no addresses in the inventory
  int timeout_ms = 15'000;                // the command is killed after this (real time)
  size_t max_output_bytes = 1 << 20;
};

class InventoryCollector {
 public:
  using Done = std::function<void(common::NodeInventory)>;

  InventoryCollector(boost::asio::io_context& io, const Clock& clock, InventoryOptions options);
  ~InventoryCollector();
  InventoryCollector(const InventoryCollector&) = delete;
  InventoryCollector& operator=(const InventoryCollector&) = delete;

  // Starts one collection; `done` runs later on the io_context thread with the result (also when
  // the command cannot be started, times out or fails). False when one is already running.
  bool collect(Done done);
  bool running() const { return busy_; }
  // Kills a running command; its `done` is not called.
  void cancel();

 private:
  void readMore();
  void tryReap();
  void onTimeout();
  void finish(std::string failure, int status);
  void reapZombies();

  boost::asio::io_context& io_;
  const Clock& clock_;
  InventoryOptions options_;
  boost::asio::posix::stream_descriptor pipe_;
  boost::asio::steady_timer timeout_;
  boost::asio::steady_timer reap_timer_;
  pid_t pid_ = -1;
  bool busy_ = false;  // from collect() until done or cancel()
  std::vector<pid_t> zombies_;  // killed but not yet reaped (a process stuck in the driver)
  common::NodeInventory pending_;
  std::string output_;
  char buf_[4096];
  Done done_;
  uint64_t generation_ = 0;  // guards handlers of a cancelled run
};

}  // namespace faultline::agent
