// Facts about the running node read once at startup by main.cpp: boot id, boot time, hostname.
// Blocking file reads; failures return empty / nullopt, never throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace faultline::agent {

// Contents of /proc/sys/kernel/random/boot_id (or `path`) without dashes' removal, trimmed.
std::string readBootId(const std::string& path = "/proc/sys/kernel/random/boot_id");
// UTC ns of the boot: CLOCK_REALTIME - CLOCK_MONOTONIC (the clock /dev/kmsg stamps use).
int64_t bootTimeNs();
std::string hostName();
// Reads a whole small file; nullopt when it cannot be read.
std::optional<std::string> readSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

}  // namespace faultline::agent
