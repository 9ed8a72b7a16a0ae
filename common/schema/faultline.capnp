@0xc5f2a3d19b7e4a61;
# faultline wire and record schema. APPEND-ONLY: never renumber, retype or remove a field;
# new fields take the next ordinal, new enumerants go at the end. See docs/wire-protocol.md.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("faultline::schema");

enum Role {
  root @0;
  cascade @1;
  teardown @2;
  context @3;
}

enum SubDomain {
  none @0;
  hardware @1;
  network @2;
  systemSoftware @3;
  infrastructure @4;
  application @5;
  ambiguous @6;
  unattributed @7;
}

enum Severity {
  info @0;
  warning @1;
  error @2;
  critical @3;
}

struct Field {
  key @0 :Text;
  value @1 :Text;
}

struct Symptom {
  ruleId @0 :Text;
  symptom @1 :Text;
  subDomain @2 :SubDomain;
  category @3 :Text;
  role @4 :Role;
  severity @5 :Severity;
  node @6 :Text;
  device @7 :Text;          # normalised PCI bus id, GPU UUID, NVSwitch, HCA port; "" if unknown
  source @8 :Text;          # source name on the node ("kmsg", "journal", "fabricmanager", a path)
  firstNs @9 :Int64;        # UTC ns since epoch
  lastNs @10 :Int64;
  timeKnown @11 :Bool;
  count @12 :UInt32;
  evidence @13 :List(Text); # first few raw messages
  fields @14 :List(Field);  # named captures and constants (xid, pci, rank, status ...)
  summary @15 :Text;
  bootId @16 :Text;
  fallbackRoot @17 :Bool;
  sourceKind @18 :Text;     # kernel | journal | fabricmanager | application
}

# What an agent (or the offline bundle reader) ships for one node.
struct SymptomBatch {
  agentId @0 :Text;
  hostname @1 :Text;
  bootId @2 :Text;
  sequence @3 :UInt64;       # per agent, strictly increasing
  agentVersion @4 :Text;
  rulesetVersion @5 :Text;
  createdNs @6 :Int64;
  symptoms @7 :List(Symptom);
  sources @8 :List(SourceStatus);
  # Templates of the error lines no rule matched (issue 30), as the agent's bounded miner grouped
  # them since its last batch; at most the agent's per-batch bound. Empty from agents before it
  # (and from the offline reader); an aggregator before it ignores them.
  unmatched @9 :List(UnmatchedTemplate);
  unmatchedLeftOut @10 :UInt64;       # templates with lines since the last batch not shipped
                                      # (over the per-batch bound)
  unmatchedLinesLeftOut @11 :UInt64;  # ... and their lines
}

# One template of a node's error lines no rule matched, since the agent's previous batch.
struct UnmatchedTemplate {
  text @0 :Text;            # the masked template ("<NUM>", "<*>" where its lines differ)
  count @1 :UInt64;         # its lines since the previous batch (>= 1)
  firstLine @2 :Text;       # the first of them, cut (the agent's bound, 256 bytes by default)
  firstNs @3 :Int64;        # its time (UTC ns): the line's own stamp, else when the agent read it
  timeKnown @4 :Bool;       # false: firstNs is the read time (an unstamped line)
  sourceKind @5 :Text;      # kernel | journal | fabricmanager | application
}

struct SourceStatus {
  node @0 :Text;
  source @1 :Text;
  format @2 :Text;
  records @3 :UInt64;
  skipped @4 :UInt64;
  status @5 :Text;           # "ok" | "error" | "partial"
  reason @6 :Text;
  lost @7 :UInt64;
  lagNs @8 :Int64;
}

struct JobRecord {
  jobId @0 :Text;
  state @1 :Text;            # Slurm state as reported (FAILED, TIMEOUT, ...)
  exitCode @2 :Text;         # "exit:signal"
  startNs @3 :Int64;
  endNs @4 :Int64;
  nodes @5 :List(Text);
  timeLimitSec @6 :Int64;
  rankLayout @7 :List(RankRange);
}

struct RankRange {
  node @0 :Text;
  first @1 :Int32;
  last @2 :Int32;
}

struct ChainEntry {
  timeNs @0 :Int64;
  node @1 :Text;
  device @2 :Text;
  symptom @3 :Text;
  ruleId @4 :Text;
  role @5 :Role;
  count @6 :UInt32;
  nodes @7 :List(Text);
  firstNs @8 :Int64;
  lastNs @9 :Int64;
  evidence @10 :Text;
}

struct Cause {
  ruleId @0 :Text;
  symptom @1 :Text;
  category @2 :Text;
  summary @3 :Text;
  node @4 :Text;
  device @5 :Text;
  timeNs @6 :Int64;
  evidence @7 :Text;
  subDomain @8 :SubDomain;
}

struct ResponsibleNode {
  node @0 :Text;
  device @1 :Text;
  confidence @2 :Float32;
}

struct Diagnosis {
  schemaVersion @0 :UInt32;
  jobId @1 :Text;
  terminalState @2 :Text;
  subDomain @3 :SubDomain;
  responsible @4 :List(ResponsibleNode);
  cause @5 :Cause;
  hasCause @6 :Bool;
  recommendedAction @7 :Text;
  candidates @8 :List(Cause);
  chain @9 :List(ChainEntry);
  coverage @10 :List(SourceStatus);
  rulesetVersion @11 :Text;
  explanation @12 :Text;
}

# Agent -> aggregator, every heartbeat interval on the same ZeroMQ connection as the batches
# (frame type "heartbeat", see docs/wire-protocol.md). Not acknowledged; lets the aggregator
# report coverage per node and see a stuck or lossy agent.
struct Heartbeat {
  agentId @0 :Text;
  hostname @1 :Text;
  bootId @2 :Text;
  agentVersion @3 :Text;
  rulesetVersion @4 :Text;
  createdNs @5 :Int64;          # UTC ns since epoch
  sources @6 :List(SourceStatus);
  spoolBatches @7 :UInt64;      # unacknowledged batches in the local spool
  spoolBytes @8 :UInt64;
  droppedSymptoms @9 :UInt64;   # dropped because the spool was full (since the spool was created)
  nextSequence @10 :UInt64;     # the sequence the next batch will get
  startedNs @11 :Int64;         # when this agent process started
  inventory @12 :NodeInventory; # the node's GPUs and HCAs: set when it changed since the last
                                # heartbeat that carried it, and every Nth heartbeat; unset otherwise
  inventoryHash @13 :UInt64;    # hash of the agent's current inventory, in every heartbeat (0: none yet)
}

# What an agent found on its node (nvidia-smi and /sys/class/infiniband): lets the aggregator turn
# "PCI:0000:ba:00" in an Xid line into GPU 6 and the ranks that used it.
struct NodeInventory {
  collectedNs @0 :Int64;        # UTC ns since epoch
  gpus @1 :List(GpuInfo);
  hcas @2 :List(HcaPort);
  gpuError @3 :Text;            # why the GPU list may be incomplete ("" = read fine)
  hcaError @4 :Text;
  addresses @5 :List(Text);     # IPv4/IPv6 addresses of the non-loopback interfaces (no link-local
                                # IPv6), sorted; resolves the peer address an error names to a node.
                                # Empty from an agent that predates it.
}

struct GpuInfo {
  index @0 :UInt32;             # nvidia-smi index
  pciBusId @1 :Text;            # normalised like Symptom.device: "0000:18:00.0"
  uuid @2 :Text;                # "GPU-…"
  serial @3 :Text;              # board serial ("" when nvidia-smi says [N/A])
}

struct HcaPort {
  name @0 :Text;                # "mlx5_0"
  pciAddress @1 :Text;          # normalised: "0000:0c:00.0"
  port @2 :UInt32;
  state @3 :Text;               # "ACTIVE", "DOWN", … (from ports/N/state)
  linkLayer @4 :Text;           # "InfiniBand" | "Ethernet"
}

# Site relay -> central aggregator (frame type "relay" / "relay+zstd", acked like "batch"; see
# docs/operations.md "Edge sites"). An edge site's aggregator stores and judges locally and sends
# upstream only what the central view needs: its verdict revisions, its node history and,
# optionally, per-node symptom summaries.
struct RelayBatch {
  siteId @0 :Text;              # the site's name: its key file at the central is relays/SITE.pub
  sequence @1 :UInt64;          # per site, strictly increasing (dedup key at the central)
  createdNs @2 :Int64;          # UTC ns since epoch
  aggregatorVersion @3 :Text;
  rulesetVersion @4 :Text;
  verdicts @5 :List(RelayVerdict);
  nodeEvents @6 :List(RelayNodeEvent);
  symptoms @7 :List(Symptom);   # summaries: one per (node, rule, device) with summed counts and
                                # the first evidence line only
  liveNodes @8 :List(Text);     # the site's nodes whose agents were live (a heartbeat within the
                                # site's --agent-timeout) when the batch was packed; the central
                                # shows them live as of createdNs. Empty from sites before it.
}

# One verdict revision of one job at the site, with the job it judges.
struct RelayVerdict {
  jobId @0 :Text;               # the site's Slurm job id (the central keys it as "SITE:JOBID")
  state @1 :Text;               # Slurm state
  exitCode @2 :Text;
  startNs @3 :Int64;
  endNs @4 :Int64;
  nodelist @5 :Text;            # Slurm hostlist ("gpu-a[01-16]"): compact on a thin link
  timeLimitSec @6 :Int64;
  revision @7 :UInt32;
  createdNs @8 :Int64;
  status @9 :Text;              # provisional | final
  reason @10 :Text;             # job_end | settle | late_symptoms | reported | timeout
  missingNodes @11 :List(Text);
  diagnosisJson @12 :Text;      # the diagnosis exactly as the site stores and serves it; empty
                                # when `confirms` is set
  symptoms @13 :UInt32;         # symptoms the site judged on
  confirms @14 :UInt32;         # 0, or an earlier revision of this job whose verdict this one
                                # repeats (same terminal state, sub_domain, cause rule, responsible
                                # nodes): the central stores it with that revision's diagnosis, so a
                                # busy node's late_symptoms revisions cost a few dozen bytes, not a
                                # whole diagnosis. A central older than this field refuses such a
                                # batch (empty diagnosis): upgrade the central before its sites.
}

struct RelayNodeEvent {
  node @0 :Text;
  timeNs @1 :Int64;
  kind @2 :Text;                # agent_seen | boot | source | blamed
  detail @3 :Text;
  jobId @4 :Text;               # the site's job id ("" if none)
}
