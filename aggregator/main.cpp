// faultline-aggregator: parses its options into an AggregatorConfig (app/config.h) and hands it
// to the AggregatorService (app/service.h), which builds, runs and stops the pieces. Nothing else.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "aggregator/app/config.h"
#include "aggregator/app/service.h"

namespace {

std::vector<std::string> defaultRuleDirs() {
  for (const char* d : {"/usr/share/faultline/rules", FAULTLINE_DEFAULT_RULES})
    if (std::filesystem::is_directory(d)) return {d};
  return {FAULTLINE_DEFAULT_RULES};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faultline-aggregator: stores agents' symptoms and job events, judges failed jobs, serves queries"};
  auto config = faultline::aggregator::defaultAggregatorConfig();
  faultline::aggregator::addAggregatorOptions(app, config);
  CLI11_PARSE(app, argc, argv);
  if (auto why = faultline::aggregator::resolveAggregatorConfig(config); !why.empty()) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", why.c_str());
    return 2;
  }
  faultline::aggregator::AggregatorService service(std::move(config), defaultRuleDirs());
  return service.run();
}
