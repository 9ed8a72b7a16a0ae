// The agent uses the shared protocol codec (common/protocol.h) under its own namespace.
#pragma once

#include "common/protocol.h"

namespace faultline::agent {

using common::Ack;
using common::decodeAck;
using common::decodeHeartbeat;
using common::encodeAck;
using common::encodeHeartbeat;
using common::HeartbeatData;
using common::compressZstd;
using common::kTypeAck;
using common::kTypeBatchZstd;
using common::kTypeHeartbeatZstd;
using common::kTypeBatch;
using common::kTypeHeartbeat;

}  // namespace faultline::agent
