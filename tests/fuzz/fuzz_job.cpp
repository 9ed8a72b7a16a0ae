// libFuzzer target for the job descriptions (common/job.h, aggregator/jobs/job_events.h,
// aggregator/offline/bundle.h): the input is read as job.json (parseJobJson), as `sacct --json`
// output (parseSacctJson, jobUpdatesFromSacct), as a job event's body (jobUpdateFromJson), and as
// a bundle's files: loadBundle over a folder whose job.json is the input's part before a line
// "--node.json--" (or all of it) and whose one node has the part after it (or all of it) as
// node.json and a short dmesg, so the node's boot time and zone reach the parsers.
//
// Properties: no crash, hang, leak or sanitizer report, no exception; every refusal says why.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "aggregator/jobs/job_events.h"
#include "aggregator/offline/bundle.h"
#include "common/job.h"
#include "common/rule_engine.h"
#include "tests/fuzz/fuzz_util.h"

using faultline::fuzz::fail;

namespace {

void write(const std::filesystem::path& p, std::string_view content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

// Built once, before the first input (LLVMFuzzerInitialize), so no input pays for loading the rules.
const faultline::common::RuleEngine* engine_ = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const faultline::common::RuleEngine engine(faultline::fuzz::realRules());
  engine_ = &engine;
  (void)faultline::fuzz::scratchDir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const faultline::common::RuleEngine& engine = *engine_;
  const std::string_view in = faultline::fuzz::bytes(data, size);
  try {
    std::string error;
    if (!faultline::common::parseJobJson(in, &error) && error.empty()) fail("job.json refused without a reason");
    error.clear();
    if (!faultline::common::parseSacctJson(in, "4812345", &error) && error.empty())
      fail("sacct JSON refused without a reason");
    std::vector<std::string> errors;
    (void)faultline::aggregator::jobUpdatesFromSacct(in, &errors);
    auto body = nlohmann::json::parse(in, nullptr, false);
    if (!body.is_discarded()) {
      error.clear();
      if (!faultline::aggregator::jobUpdateFromJson(body, "4812345", faultline::aggregator::JobEventKind::kEnd,
                                                    int64_t{1717243200} * 1'000'000'000, &error) &&
          error.empty())
        fail("job event refused without a reason");
    }

    const std::string_view sep = "\n--node.json--\n";
    const size_t at = in.find(sep);
    const std::string_view job = at == std::string_view::npos ? in : in.substr(0, at);
    const std::string_view node = at == std::string_view::npos ? in : in.substr(at + sep.size());
    const auto dir = faultline::fuzz::scratchDir() / "bundle";
    const auto node_dir = dir / "nodes" / "gpu-a01";
    std::filesystem::create_directories(node_dir);
    write(dir / "job.json", job);
    write(node_dir / "node.json", node);
    write(node_dir / "dmesg",
          "[  812.334210] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
          "[Sat Jun  1 10:13:34 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n");
    error.clear();
    if (!faultline::offline::loadBundle(dir.string(), engine, &error) && error.empty())
      fail("bundle refused without a reason");
  } catch (const std::exception& e) {
    fail("exception: %s", e.what());
  }
  return 0;
}
