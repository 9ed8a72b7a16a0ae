#include "agent/system_info.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <sstream>

namespace faultline::agent {

std::optional<std::string> readSmallFile(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string out(max_bytes, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max_bytes));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string readBootId(const std::string& path) {
  auto s = readSmallFile(path, 128);
  if (!s) return "";
  while (!s->empty() && (s->back() == '\n' || s->back() == ' ')) s->pop_back();
  return *s;
}

int64_t bootTimeNs() {
  timespec rt{}, mono{};
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  return (static_cast<int64_t>(rt.tv_sec) - mono.tv_sec) * 1'000'000'000 + (rt.tv_nsec - mono.tv_nsec);
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace faultline::agent
