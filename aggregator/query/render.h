// Human tables for the query CLI, from the JSON documents of query.h / the HTTP API. Pure.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace faultline::aggregator {

std::string renderJobs(const nlohmann::json& jobs);
std::string renderJobHistory(const nlohmann::json& job);
std::string renderNodes(const nlohmann::json& nodes);
std::string renderNode(const nlohmann::json& node);
std::string renderSymptoms(const nlohmann::json& symptoms);
std::string renderAgents(const nlohmann::json& agents);
// GET /agents/refusals: a table of refused identities and, once per reason, what to check.
std::string renderRefusals(const nlohmann::json& refusals);
std::string renderFleet(const nlohmann::json& fleet);

}  // namespace faultline::aggregator
