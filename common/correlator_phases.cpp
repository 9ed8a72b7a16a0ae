#include "common/correlator_phases.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace faultline::common::phases {

namespace {

std::string tag(std::string_view kind, std::string_view id) { return fmt::format("[{}: {}]", kind, id); }

// The job's names for the nodes logs name ("gpu-a01.cluster" is gpu-a01), each resolved once:
// a cascade names the same few thousand hosts hundreds of thousands of times.
class JobNodes {
 public:
  explicit JobNodes(const JobInfo& job) {
    for (const auto& n : job.nodes) {
      exact_.insert(n);
      by_short_.emplace(n.substr(0, n.find('.')), n);  // the first node of that short name
    }
  }
  // "" when not the job's.
  const std::string& of(const std::string& node) {
    if (exact_.empty() || exact_.count(node)) return node;
    auto [it, inserted] = resolved_.try_emplace(node);
    if (inserted) {
      auto s = by_short_.find(node.substr(0, node.find('.')));
      if (s != by_short_.end()) it->second = s->second;
    }
    return it->second;
  }

 private:
  std::unordered_set<std::string_view> exact_;
  std::unordered_map<std::string, std::string> by_short_;
  std::unordered_map<std::string, std::string> resolved_;
};

bool inWindow(const Symptom& s, const JobInfo& job, const CorrelatorOptions& o, Role role) {
  if (!s.time_known) return true;
  if (job.start_ns != 0) {
    int64_t pre = role == Role::kContext ? o.context_pre_start_ns : o.pre_start_ns;
    if (s.last_ns < job.start_ns - pre) return false;
  }
  return job.end_ns == 0 || s.first_ns <= job.end_ns + o.post_end_ns;
}

// A message that is a fault only on nodes with NVSwitches (rule field `requires_node_fact`): a
// root there, context on a node known to have none, and with nothing known fallback evidence.
Role judgeByNvswitch(Item& it) {
  Symptom& s = it.s;
  if (!it.nvswitch) {
    s.fields["node_fact"] = "nvswitch unknown";
    s.fallback_root = true;
    it.because = "NVSwitch presence unknown: fallback evidence only [phase: scope]";
    return it.eff == Role::kRoot ? Role::kCascade : it.eff;
  }
  s.fields["node_fact"] = *it.nvswitch ? "node has NVSwitches" : "node has no NVSwitch";
  if (!*it.nvswitch) it.because = "the node has no NVSwitch: no fault here [phase: scope]";
  return *it.nvswitch ? it.eff : Role::kContext;
}

// A message that is a fault only in a job of several nodes (rule field `requires_job:
// several_nodes`: a service bound to the loopback address, which a one-node job works with): as
// its rule says in a job of two or more nodes, context in a one-node job, and with the job's nodes
// unknown fallback evidence.
Role judgeByJobSize(Item& it, size_t job_nodes) {
  Symptom& s = it.s;
  if (job_nodes == 0) {
    s.fields["job_fact"] = "job's nodes unknown";
    s.fallback_root = true;
    it.because = "the job's node count is unknown: fallback evidence only [phase: scope]";
    return it.eff == Role::kRoot ? Role::kCascade : it.eff;
  }
  if (job_nodes == 1) {
    s.fields["job_fact"] = "one-node job";
    it.because = "a one-node job: no fault here [phase: scope]";
    return Role::kContext;
  }
  s.fields["job_fact"] = fmt::format("job of {} nodes", job_nodes);
  return it.eff;
}

// The persists relation that keeps an early symptom in scope: the fault lasts until a reboot
// (an `until` symptom or a new boot id on the node) and none came before the job start; and the
// job shows it: the node has fault evidence of its own during the job (a node whose GPU was lost
// long ago but that ran the job without complaint did not fail it). `node` lists the indices in
// `all` of the symptoms on s's node.
const Relation* persisting(const Symptom& s, const RelationContext& ctx, const std::vector<Symptom>& all,
                           const std::vector<size_t>& node, const JobInfo& job, const std::vector<Relation>& relations) {
  if (!s.time_known || job.start_ns == 0 || s.first_ns > job.start_ns) return nullptr;
  bool shows = std::any_of(node.begin(), node.end(), [&](size_t k) {
    const Symptom& u = all[k];
    return (u.role == Role::kRoot || u.role == Role::kCascade) && (!u.time_known || u.first_ns >= job.start_ns);
  });
  if (!shows) return nullptr;
  for (const auto& r : relations) {
    if (r.effect != RelationEffect::kPersists || !matches(r.symptom, s, ctx)) continue;
    bool ended = std::any_of(node.begin(), node.end(), [&](size_t k) {
      const Symptom& u = all[k];
      if (!u.time_known || u.first_ns <= s.first_ns || u.first_ns > job.start_ns) return false;
      bool new_boot = !u.boot_id.empty() && !s.boot_id.empty() && u.boot_id != s.boot_id;
      return new_boot || matches(*r.until, u, {u.role, ctx.nvswitch});
    });
    if (!ended) return &r;
  }
  return nullptr;
}

// Whether a persists relation names the symptom: only those scan the node's other symptoms (a
// week of old dmesg must not cost a pass over everything per line).
bool namedByPersists(const Symptom& s, const RelationContext& ctx, const std::vector<Relation>& relations) {
  return std::any_of(relations.begin(), relations.end(), [&](const Relation& r) {
    return r.effect == RelationEffect::kPersists && matches(r.symptom, s, ctx);
  });
}

// What a synthetic item (a comparison across the job's nodes, not a line) is: its rule and kind,
// its place and time, and what it says.
struct Synthetic {
  const char* rule_id;
  const char* symptom;
  SubDomain sub_domain;
  const char* category;
  Severity severity;
  const char* source;
  SourceKind source_kind;
  Role role;
  bool background;
  const char* because;
};

Item synthetic(const Synthetic& k, const std::string& node, std::optional<int64_t> t_ns, std::string summary,
               std::string evidence, std::map<std::string, std::string> fields) {
  Item it;
  Symptom& s = it.s;
  s.rule_id = k.rule_id;
  s.symptom = k.symptom;
  s.sub_domain = k.sub_domain;
  s.category = k.category;
  s.severity = k.severity;
  s.node = node;
  s.source = k.source;
  s.source_kind = k.source_kind;
  s.time_known = t_ns.has_value();
  s.first_ns = s.last_ns = t_ns.value_or(0);
  s.summary = std::move(summary);
  s.evidence = {std::move(evidence)};
  s.fields = std::move(fields);
  it.eff = k.role;
  it.background = k.background;
  it.because = k.because;
  return it;
}

// Nodes of the job whose GPU inventory holds fewer GPUs than most of its peers: a GPU lost before
// the job started (it fell off the bus, or the driver did not bring it up).
std::vector<Item> missingGpus(const JobInfo& job, const CorrelatorOptions& o) {
  std::map<std::string, int> count;
  for (const auto& n : job.nodes)
    if (auto f = o.node_facts.find(n); f != o.node_facts.end() && f->second.gpu_count) count[n] = *f->second.gpu_count;
  std::vector<Item> out;
  if (count.size() < 2) return out;
  int most = 0;
  for (const auto& [n, c] : count) most = std::max(most, c);
  size_t with_most = std::count_if(count.begin(), count.end(), [&](const auto& kv) { return kv.second == most; });
  if (with_most * 2 < count.size()) return out;  // no common configuration to compare with
  for (const auto& [n, c] : count) {
    if (c >= most) continue;
    static constexpr Synthetic kMissing{"inventory.gpu_missing", "gpu_missing_from_inventory", SubDomain::kHardware,
                                        "gpu", Severity::kCritical, "inventory", SourceKind::kJournal, Role::kRoot, true,
                                        "the node had fewer GPUs than its peers when the job started [phase: scope]"};
    out.push_back(synthetic(
        kMissing, n, job.start_ns != 0 ? std::optional<int64_t>(job.start_ns) : std::nullopt,
        fmt::format("{} of {} GPUs in the node's inventory", c, most),
        fmt::format("inventory of {}: {} GPUs; the job's other nodes have {}", n, c, most),
        {{"gpus", std::to_string(c)}, {"expected_gpus", std::to_string(most)},
         {"action", "Check the node for a GPU that fell off the bus or failed to initialise "
                    "(nvidia-smi, dmesg for Xid 79/AER, lspci); drain it until repaired."}}));
  }
  return out;
}

// The releases the job's nodes announce (version banners and the errors that quote one), compared
// across nodes: where most nodes agree, each node that runs another release gets a root of its own
// (its version differs from the rest, ../shared/TAXONOMY.md); with no majority, one root names no
// node. Kept as background: the cause only when nothing during the job is (a release difference
// that does not break the job must not outrank a GPU lost mid-run).
std::vector<Item> differingVersions(const JobInfo& job, const std::vector<Item>& items) {
  struct Component {
    const char* field;
    const char* name;
  };
  static constexpr std::array<Component, 3> kComponents{{{"nccl_version", "NCCL"},
                                                          {"cuda_driver_version", "CUDA driver API"},
                                                          {"driver_version", "NVIDIA driver"}}};
  const std::set<std::string> job_nodes(job.nodes.begin(), job.nodes.end());
  std::vector<Item> out;
  for (const Component& c : kComponents) {
    std::map<std::string, std::string> version_of;  // node -> its first announced release
    int64_t first_ns = 0;
    for (const Item& it : items) {
      const std::string& v = it.s.field(c.field);
      if (v.empty() || it.s.node.empty() || !job_nodes.count(it.s.node)) continue;
      version_of.emplace(it.s.node, v);
      if (it.s.time_known && (first_ns == 0 || it.s.first_ns < first_ns)) first_ns = it.s.first_ns;
    }
    if (version_of.size() < 2) continue;
    std::map<std::string, std::vector<std::string>> nodes_of;  // release -> nodes
    for (const auto& [node, v] : version_of) nodes_of[v].push_back(node);
    if (nodes_of.size() < 2) continue;
    auto most = std::max_element(nodes_of.begin(), nodes_of.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    const bool majority = most->second.size() >= 2 && most->second.size() * 2 > version_of.size();
    static constexpr Synthetic kDiffers{"nodes.version_differs", "version_differs_between_nodes",
                                        SubDomain::kSystemSoftware, "versions", Severity::kError, "comparison",
                                        SourceKind::kJournal, Role::kRoot, true,
                                        "the job's nodes announced different releases [phase: scope]"};
    const std::optional<int64_t> at = job.start_ns != 0 ? std::optional<int64_t>(job.start_ns)
                                      : first_ns != 0   ? std::optional<int64_t>(first_ns)
                                                        : std::nullopt;
    auto make = [&](const std::string& node, std::string summary, std::string evidence) {
      out.push_back(synthetic(kDiffers, node, at, std::move(summary), std::move(evidence),
                              {{"component", c.name},
                               {"action", "Install one release of the component on every node of the job (the image, "
                                          "the module or the driver package the odd node differs in); drain the odd "
                                          "node until it matches."}}));
    };
    if (majority) {
      for (const auto& [v, nodes] : nodes_of) {
        if (v == most->first) continue;
        for (const auto& n : nodes)
          make(n, fmt::format("{} {} on {}; the job's other {} node(s) run {}", c.name, v, n, most->second.size(), most->first),
               fmt::format("{} {} on {}, {} on {}", c.name, v, n, most->first, fmt::join(most->second, ", ")));
      }
    } else {
      std::vector<std::string> parts;
      for (const auto& [v, nodes] : nodes_of) parts.push_back(fmt::format("{} on {}", v, fmt::join(nodes, ", ")));
      make("", fmt::format("the job's nodes run different {} releases: {}", c.name, fmt::join(parts, "; ")),
           fmt::format("{}: {}", c.name, fmt::join(parts, "; ")));
    }
  }
  return out;
}

// Ranks that announce their place in the job's world ("MEMBER: 3/8"): when fewer distinct members
// announced themselves than the world holds, the world never formed (ranks never started, or a
// node's processes never came up). A cascade, not a cause: it decides no domain, and it tells a
// job that ran into its time limit hung from one that ran healthily.
std::vector<Item> missingMembers(const JobInfo& job, const std::vector<Item>& items) {
  std::map<std::string, std::pair<std::set<std::string>, std::string>> worlds;  // rule -> members, size
  const Item* last = nullptr;
  for (const Item& it : items) {
    const std::string& member = it.s.field("member");
    const std::string& size = it.s.field("world_size");
    if (member.empty() || size.empty()) continue;
    auto& w = worlds[it.s.rule_id];
    if (!w.second.empty() && w.second != size) w.second = "mixed";
    else w.second = size;
    w.first.insert(member);
    if (!last || (it.s.time_known && (!last->s.time_known || it.s.first_ns > last->s.first_ns))) last = &it;
  }
  std::vector<Item> out;
  for (const auto& [rule, w] : worlds) {
    int size = 0;
    auto [p, ec] = std::from_chars(w.second.data(), w.second.data() + w.second.size(), size);
    if (ec != std::errc() || size <= 0 || static_cast<size_t>(size) <= w.first.size()) continue;
    static constexpr Synthetic kAbsent{"world.members_missing", "ranks_missing_from_world", SubDomain::kNone,
                                       "launcher", Severity::kWarning, "comparison", SourceKind::kApplication,
                                       Role::kCascade, false,
                                       "fewer ranks announced themselves than the world holds [phase: scope]"};
    std::optional<int64_t> at;
    if (last && last->s.time_known) at = last->s.first_ns;
    else if (job.start_ns != 0) at = job.start_ns;
    out.push_back(synthetic(kAbsent, "", at,
                            fmt::format("{} of {} ranks announced themselves; the job's world never formed",
                                        w.first.size(), size),
                            fmt::format("{}: members {} of {}", rule, fmt::join(w.first, ", "), size),
                            {{"announced", std::to_string(w.first.size())}, {"world_size", std::to_string(size)}}));
  }
  return out;
}

}  // namespace

namespace {

bool earlierSymptom(const Symptom& a, const Symptom& b) {
  if (a.time_known != b.time_known) return a.time_known;
  if (a.time_known && a.first_ns != b.first_ns) return a.first_ns < b.first_ns;
  if (a.severity != b.severity) return a.severity > b.severity;
  if (a.node != b.node) return a.node < b.node;
  return a.rule_id < b.rule_id;
}

// What scope decided for one of the job's symptoms before it becomes an Item (small: a cascade
// has hundreds of thousands; the rare reason or judged copy lives in Extra).
struct Kept {
  uint32_t index = 0;  // into the job's symptoms
  uint32_t node = 0;   // into the job's distinct nodes
  Role eff = Role::kRoot;
  std::optional<bool> nvswitch;
  bool background = false;
  int32_t extra = -1;  // into the extras
  // earlier()'s keys but the rule: timed first, time (0 when untimed), severity, node's rank.
  bool untimed = false;
  int64_t time = 0;
  Severity severity = Severity::kError;
  uint32_t node_rank = 0;
};

struct Extra {
  std::string because;
  std::optional<Symptom> judged;  // a node-fact symptom, as judged (fields["node_fact"] ...)
};

}  // namespace

bool earlier(const Item& a, const Item& b) { return earlierSymptom(a.s, b.s); }

std::vector<Item> scope(const JobInfo& job, std::vector<Symptom> symptoms, const std::vector<Relation>& relations,
                        const CorrelatorOptions& o) {
  static const std::string kRequiresNodeFact = "requires_node_fact";
  static const std::string kRequiresJob = "requires_job";
  JobNodes job_nodes(job);
  // The distinct nodes: each one's NVSwitch fact (RelationContext) and its place in name order.
  struct Node {
    std::string_view name;
    bool nvswitch_seen = false;
    std::optional<bool> nvswitch;
    uint32_t rank = 0;
  };
  std::vector<Node> nodes;
  std::unordered_map<std::string_view, uint32_t> node_ids;
  std::vector<uint32_t> node_of;
  node_of.reserve(symptoms.size());
  // The job's nodes' (and node-less) symptoms, kept in place.
  size_t own = 0;
  for (size_t i = 0; i < symptoms.size(); ++i) {
    Symptom& s = symptoms[i];
    if (!s.node.empty()) {
      const std::string& n = job_nodes.of(s.node);
      if (n.empty()) continue;
      if (&n != &s.node) s.node = n;
    } else if (job.nodes.size() == 1) {
      s.node = job.nodes.front();  // a one-node job owns node-less lines
    }
    if (own != i) symptoms[own] = std::move(s);
    const Symptom& kept = symptoms[own++];
    auto [id, new_node] = node_ids.try_emplace(kept.node, static_cast<uint32_t>(nodes.size()));
    if (new_node) nodes.emplace_back().name = kept.node;
    node_of.push_back(id->second);
    // NVSwitch driver or SXid evidence on a node shows it has NVSwitches, whatever node.json says.
    if (kept.category == "nvswitch" || kept.rule_id.rfind("sxid.", 0) == 0) nodes[id->second].nvswitch_seen = true;
  }
  symptoms.resize(own);
  {
    for (auto& n : nodes) {
      if (n.nvswitch_seen) n.nvswitch = true;
      else if (auto f = o.node_facts.find(std::string(n.name)); f != o.node_facts.end()) n.nvswitch = f->second.nvswitch;
    }
    std::vector<uint32_t> by_name(nodes.size());
    for (uint32_t k = 0; k < by_name.size(); ++k) by_name[k] = k;
    std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) { return nodes[a].name < nodes[b].name; });
    for (uint32_t r = 0; r < by_name.size(); ++r) nodes[by_name[r]].rank = r;
  }
  // Each node's symptoms, built when a symptom from before the window needs them.
  std::vector<std::vector<size_t>> by_node;
  auto nodeList = [&](uint32_t node) -> const std::vector<size_t>& {
    if (by_node.empty()) {
      by_node.resize(nodes.size());
      for (size_t k = 0; k < own; ++k) by_node[node_of[k]].push_back(k);
    }
    return by_node[node];
  };
  // First decide (the symptoms stay as they came: early ones look at their node's others), then
  // move each once into its place.
  std::vector<Kept> kept;
  std::vector<Extra> extras;
  kept.reserve(own);
  for (size_t i = 0; i < own; ++i) {
    Kept k;
    k.index = static_cast<uint32_t>(i);
    k.node = node_of[i];
    k.eff = symptoms[i].role;
    k.nvswitch = nodes[k.node].nvswitch;
    const Symptom* s = &symptoms[i];
    // A rule whose meaning depends on a fact (the node's NVSwitches, the job's size) is judged on
    // a copy, which replaces the symptom when the items are built.
    const bool by_nvswitch = s->field(kRequiresNodeFact) == "nvswitch";
    if (by_nvswitch || s->field(kRequiresJob) == "several_nodes") {
      Item it;
      it.s = *s;
      it.eff = k.eff;
      it.nvswitch = k.nvswitch;
      k.eff = by_nvswitch ? judgeByNvswitch(it) : judgeByJobSize(it, job.nodes.size());
      k.extra = static_cast<int32_t>(extras.size());
      extras.push_back({std::move(it.because), std::move(it.s)});
      s = &*extras.back().judged;
    }
    if (!inWindow(*s, job, o, k.eff)) {
      const RelationContext ctx{k.eff, k.nvswitch};
      const Relation* r = job.start_ns != 0 && s->last_ns < job.start_ns && namedByPersists(*s, ctx, relations)
                              ? persisting(*s, ctx, symptoms, nodeList(k.node), job, relations)
                              : nullptr;
      if (!r) continue;
      if (k.extra < 0) {
        k.extra = static_cast<int32_t>(extras.size());
        extras.emplace_back();
      }
      extras[k.extra].because =
          fmt::format("from before the job, and nothing on the node ended it since {}", tag("causality", r->id));
      k.background = true;
    }
    k.untimed = !s->time_known;
    k.time = s->time_known ? s->first_ns : 0;
    k.severity = s->severity;
    k.node_rank = nodes[k.node].rank;
    kept.push_back(k);
  }
  // earlier() on numbers: untimed last, time, severity (higher first), node (by name), then rule;
  // equal ones keep their order.
  auto ruleOf = [&](const Kept& k) -> const std::string& {
    return k.extra >= 0 && extras[k.extra].judged ? extras[k.extra].judged->rule_id : symptoms[k.index].rule_id;
  };
  std::sort(kept.begin(), kept.end(), [&](const Kept& a, const Kept& b) {
    if (a.untimed != b.untimed) return b.untimed;
    if (a.time != b.time) return a.time < b.time;
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.node_rank != b.node_rank) return a.node_rank < b.node_rank;
    if (int c = ruleOf(a).compare(ruleOf(b)); c != 0) return c < 0;
    return a.index < b.index;
  });
  std::vector<Item> items;
  items.reserve(kept.size());
  for (const Kept& k : kept) {
    Item& it = items.emplace_back();
    Extra* x = k.extra >= 0 ? &extras[k.extra] : nullptr;
    it.s = x && x->judged ? std::move(*x->judged) : std::move(symptoms[k.index]);
    it.eff = k.eff;
    it.nvswitch = k.nvswitch;
    it.background = k.background;
    if (x) it.because = std::move(x->because);
  }
  // Synthetic roots come after the symptoms they tie with (as in one stable sort of both).
  auto missing = missingGpus(job, o);
  auto differing = differingVersions(job, items);
  auto absent = missingMembers(job, items);
  if (!missing.empty() || !differing.empty() || !absent.empty()) {
    for (auto& it : missing) items.push_back(std::move(it));
    for (auto& it : differing) items.push_back(std::move(it));
    for (auto& it : absent) items.push_back(std::move(it));
    std::stable_sort(items.begin(), items.end(), earlier);
  }
  return items;
}

namespace {

// The relations pass over one job's items. Matching is split (causality.h): the kind part of
// every matcher is decided once per kind of symptom (a cascade has a few dozen kinds over
// hundreds of thousands of symptoms), the state part (role now, fields, node facts) per item.
class RelationPass {
 public:
  RelationPass(std::vector<Item>& items, const std::vector<Relation>& relations)
      : items_(items), relations_(relations), causes_(relations.size()) {
    kindsAndNodes();
    for (const auto& r : relations) tags_.push_back(tag("causality", r.id));
    indexCauses();
  }

  void run() {
    decided_.assign(items_.size(), Decided{});
    for (size_t i = 0; i < items_.size(); ++i) {
      bool role_decided = false;
      for (size_t r : kinds_[kind_of_[i]].relations)
        if (matchesState(relations_[r].symptom, items_[i].s, {items_[i].eff, items_[i].nvswitch}))
          applyOne(i, r, role_decided);
    }
    breakCycles();
  }

 private:
  struct Kind {
    std::vector<size_t> relations;  // whose symptom matcher the kind passes, in order
    std::vector<bool> cause;        // per relation: whether the kind passes its cause matcher
  };
  // Per relation with a cause side: the items that may be its cause (by their role before the
  // pass; re-checked with the current role when used), all and per node.
  struct CauseIndex {
    std::vector<size_t> all;
    std::unordered_map<uint32_t, std::vector<size_t>> by_node;
  };
  using KindKey = std::tuple<std::string_view, std::string_view, SubDomain, SourceKind, Severity, bool>;
  struct KindHash {
    size_t operator()(const KindKey& k) const {
      const auto& [rule, category, domain, source, severity, fallback] = k;
      size_t h = std::hash<std::string_view>()(rule) * 31 + std::hash<std::string_view>()(category);
      return ((h * 31 + size_t(domain)) * 31 + size_t(source)) * 31 + size_t(severity) * 2 + fallback;
    }
  };

  void kindsAndNodes() {
    std::unordered_map<KindKey, uint32_t, KindHash> kind_ids;
    std::unordered_map<std::string_view, uint32_t> node_ids;
    kind_of_.reserve(items_.size());
    node_of_.reserve(items_.size());
    for (const auto& it : items_) {
      const Symptom& s = it.s;
      auto [k, new_kind] = kind_ids.try_emplace({s.rule_id, s.category, s.sub_domain, s.source_kind, s.severity, s.fallback_root},
                                                static_cast<uint32_t>(kinds_.size()));
      if (new_kind) {
        Kind kind;
        kind.cause.resize(relations_.size());
        for (size_t r = 0; r < relations_.size(); ++r) {
          if (matchesKind(relations_[r].symptom, s)) kind.relations.push_back(r);
          kind.cause[r] = relations_[r].cause && matchesKind(*relations_[r].cause, s);
        }
        kinds_.push_back(std::move(kind));
      }
      kind_of_.push_back(k->second);
      node_of_.push_back(node_ids.try_emplace(s.node, static_cast<uint32_t>(node_ids.size())).first->second);
    }
  }

  void indexCauses() {
    for (size_t r = 0; r < relations_.size(); ++r) {
      if (!relations_[r].cause) continue;
      for (size_t j = 0; j < items_.size(); ++j)
        if (kinds_[kind_of_[j]].cause[r] && matchesState(*relations_[r].cause, items_[j].s, {items_[j].eff, items_[j].nvswitch})) {
          causes_[r].all.push_back(j);
          causes_[r].by_node[node_of_[j]].push_back(j);
        }
    }
  }

  std::optional<size_t> findCause(size_t i, size_t r) const {
    const Relation& rel = relations_[r];
    const CauseIndex& idx = causes_[r];
    const bool local = rel.scope == RelationScope::kSameNode || rel.scope == RelationScope::kSameDevice;
    const std::vector<size_t>* list = &idx.all;
    static const std::vector<size_t> kNone;
    if (local) {
      auto it = idx.by_node.find(node_of_[i]);
      list = it == idx.by_node.end() ? &kNone : &it->second;
    }
    for (size_t j : *list)
      if (j != i && matchesState(*rel.cause, items_[j].s, {items_[j].eff, items_[j].nvswitch}) &&
          causePlaced(rel, items_[i].s, items_[j].s, j < i) && onsetAllows(rel, i, j))
        return j;
    return std::nullopt;
  }

  // A symptom printed after a timeout (its rule's detection delay) began before its stamp: it is
  // no consequence of a cause that began after it, under a relation that wants it after its cause.
  bool onsetAllows(const Relation& rel, size_t i, size_t j) const {
    const Item& a = items_[i];
    const Item& c = items_[j];
    // Relations that allow their symptom a time before the cause were written with the delay in mind.
    if (a.delay_ns == 0 || !a.s.time_known || !c.s.time_known || rel.before_ns != 0) return true;
    return a.s.first_ns - a.delay_ns >= c.s.first_ns - c.delay_ns;
  }

  // The reason a relation gives, made once per (relation, cause item, wording): most of a
  // cascade's items share one.
  const std::string& because(size_t r, std::optional<size_t> j, int wording) {
    const uint64_t key = (uint64_t(r) * 3 + uint64_t(wording)) * (items_.size() + 1) + (j ? *j + 1 : 0);
    auto [it, inserted] = because_.try_emplace(key);
    if (!inserted) return it->second;
    const Relation& rel = relations_[r];
    const Symptom* c = j ? &items_[*j].s : nullptr;
    if (wording == 0)
      it->second = c ? fmt::format("{} of {} on {} {}", relationEffectName(rel.effect), c->rule_id,
                                   c->node.empty() ? "an unknown node" : c->node, tags_[r])
                     : fmt::format("{} {}", relationEffectName(rel.effect), tags_[r]);
    else
      it->second = c ? fmt::format("generic wrapper; the detail is {} on {} {}", c->rule_id, c->node, tags_[r])
                     : fmt::format("generic wrapper, names no cause {}", tags_[r]);
    return it->second;
  }

  // Two items made each other's consequence (a relation whose cause side does not ask for a root,
  // and a later one that found the other still a root, as at one stamp): the relation loaded first
  // decides, as it would for one symptom; the other item gets back the role and reason it had
  // before. Neither is then left as the cascade of a cascade.
  void breakCycles() {
    for (size_t i = 0; i < items_.size(); ++i) {
      const Decided& d = decided_[i];
      if (!d.set) continue;
      const Decided& other = decided_[*d.cause];
      if (!other.set || other.cause != i || d.relation < other.relation) continue;
      items_[i].eff = d.eff_before;
      items_[i].because = d.because_before;
      decided_[i].set = false;
    }
  }

  // Applies one relation to one item; returns whether it changed or marked it.
  bool applyOne(size_t i, size_t r_index, bool& role_decided) {
    Item& it = items_[i];
    const Relation& r = relations_[r_index];
    switch (r.effect) {
      case RelationEffect::kConsequence:
      case RelationEffect::kContext: {
        if (role_decided) return false;
        std::optional<size_t> j;
        if (r.cause && !(j = findCause(i, r_index))) return false;
        // Only a decision with a cause can be half of a cycle (breakCycles).
        if (j) decided_[i] = {true, r_index, j, it.eff, it.because};
        if (r.effect == RelationEffect::kContext) it.eff = Role::kContext;
        else if (it.eff == Role::kRoot) it.eff = Role::kCascade;
        it.because = because(r_index, j, 0);
        role_decided = true;
        return true;
      }
      case RelationEffect::kWrapper: {
        if (it.wrapper) return false;
        it.wrapper = true;
        it.plausible = r.plausible;
        it.wrapper_relation = r.id;
        if (it.eff == Role::kRoot) it.eff = Role::kCascade;
        if (auto j = findCause(i, r_index)) it.because = because(r_index, j, 1);
        else if (it.because.empty()) it.because = because(r_index, std::nullopt, 1);
        return true;
      }
      case RelationEffect::kPeer:
        if (!it.peer_field.empty() || it.s.field(r.peer_field).empty()) return false;
        it.peer_field = r.peer_field;
        it.peer_relation = r.id;
        return true;
      case RelationEffect::kJobWide:
        if (!it.job_wide_relation.empty()) return false;
        it.job_wide_relation = r.id;
        return true;
      case RelationEffect::kService:
      case RelationEffect::kBetween:
        if (!it.elsewhere_relation.empty()) return false;
        it.elsewhere_relation = r.id;
        it.elsewhere = r.effect;
        return true;
      case RelationEffect::kPersists: return false;  // decided in scope
      case RelationEffect::kLocates: return false;   // decided before the pass (locate)
    }
    return false;
  }

  // Per item: the consequence/context relation that decided its role, its cause, and what it had
  // before (breakCycles).
  struct Decided {
    bool set = false;
    size_t relation = 0;
    std::optional<size_t> cause;
    Role eff_before = Role::kRoot;
    std::string because_before;
  };

  std::vector<Item>& items_;
  const std::vector<Relation>& relations_;
  std::vector<Decided> decided_;
  std::vector<Kind> kinds_;
  std::vector<uint32_t> kind_of_;  // per item
  std::vector<uint32_t> node_of_;  // per item
  std::vector<std::string> tags_;  // per relation: "[causality: ID]"
  std::vector<CauseIndex> causes_;  // per relation
  std::unordered_map<uint64_t, std::string> because_;
};

}  // namespace

// Before the pass, whose indexes are by node: a symptom no line places on a node (a daemon's
// stderr relayed by its launcher without a host) takes the node that its `locates` relation's
// cause names, when every such cause names the same one. Two nodes named is a failure on both:
// the symptom stays without a node.
void locate(std::vector<Item>& items, const std::vector<Relation>& relations) {
  bool moved = false;
  for (const Relation& r : relations) {
    if (r.effect != RelationEffect::kLocates || !r.cause) continue;
    for (size_t i = 0; i < items.size(); ++i) {
      Item& it = items[i];
      if (!it.s.node.empty() || !matchesKind(r.symptom, it.s) || !matchesState(r.symptom, it.s, {it.eff, it.nvswitch}))
        continue;
      std::set<std::string_view> nodes;
      std::string_view by;
      for (size_t j = 0; j < items.size(); ++j) {
        const Item& c = items[j];
        if (j == i || c.s.node.empty() || !matchesKind(*r.cause, c.s) || !matchesState(*r.cause, c.s, {c.eff, c.nvswitch}) ||
            !causePlaced(r, it.s, c.s, j < i))
          continue;
        nodes.insert(c.s.node);
        by = c.s.rule_id;
      }
      if (nodes.size() != 1) continue;
      it.s.node.assign(*nodes.begin());
      it.located = true;
      it.because = fmt::format("placed on {}, where {} says it failed {}", it.s.node, by, tag("causality", r.id));
      moved = true;
    }
  }
  if (moved) std::stable_sort(items.begin(), items.end(), earlier);
}

void applyRelations(std::vector<Item>& items, const std::vector<Relation>& relations) {
  locate(items, relations);
  RelationPass(items, relations).run();
}

void estimateOnsets(std::vector<Item>& items, const RuleSet* rules) {
  if (!rules) return;
  std::unordered_map<std::string_view, const Rule*> delayed;  // rule id -> its rule when it declares a delay
  for (const auto& r : rules->rules)
    if (r.detection_delay_ns > 0 || !r.detection_delay_field.empty()) delayed.emplace(r.id, &r);
  if (delayed.empty()) return;
  for (auto& it : items) {
    auto f = delayed.find(it.s.rule_id);
    if (f == delayed.end()) continue;
    const Rule* r = f->second;
    it.delay_ns = r->detection_delay_ns;
    if (!r->detection_delay_field.empty()) {
      const std::string& v = it.s.field(r->detection_delay_field);
      int64_t sec = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), sec);
      if (ec == std::errc() && p == v.data() + v.size() && sec > 0 && sec <= 86400) it.delay_ns = sec * 1'000'000'000;
    }
  }
}

Candidates candidates(const std::vector<Item>& items) {
  Candidates c;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].eff == Role::kRoot) (items[i].background ? c.set_aside : c.roots).push_back(i);
  if (c.roots.empty()) c.roots.swap(c.set_aside);
  if (!c.roots.empty()) return c;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    const bool active = it.eff == Role::kCascade || it.eff == Role::kTeardown;
    if (active && it.wrapper && (it.s.fallback_root || it.s.sub_domain != SubDomain::kNone)) c.wrappers.push_back(i);
    else if (active && it.s.fallback_root && it.s.sub_domain != SubDomain::kNone) c.roots.push_back(i);
  }
  c.fallback = !c.roots.empty();
  if (c.fallback) c.wrappers.clear();
  return c;
}

Scored score(const std::vector<Item>& items, const Candidates& c, const std::map<std::string, int>& priority,
             const CorrelatorOptions& o) {
  auto prio = [&](size_t i) {
    auto it = priority.find(items[i].s.rule_id);
    return it == priority.end() ? 0 : it->second;
  };
  Scored sc;
  size_t anchor = c.roots.front();
  if (!c.fallback) {
    // A detector that prints after a timeout reports a condition that began earlier than its
    // stamp: the root whose condition began first anchors. An onset is only as exact as the
    // detector's period, so within the clock skew the stamps keep their order.
    auto onset = [&](size_t i) { return items[i].s.first_ns - items[i].delay_ns; };
    for (size_t r : c.roots)
      if (items[r].s.time_known && items[anchor].s.time_known && onset(r) < onset(anchor) - o.clock_skew_ns)
        anchor = r;
  }
  if (c.fallback) {
    for (size_t r : c.roots)
      if (prio(r) > prio(anchor)) anchor = r;
  } else {
    // One incident is often reported several times on a node within a moment (Xid 79 and "GPU
    // has fallen off the bus"; Xid 48 and CUDA's "uncorrectable ECC error"): the most specific
    // report represents it, and a driver's report beats the application's echo of it.
    const Symptom& first = items[anchor].s;
    for (size_t r : c.roots) {
      const Symptom& s = items[r].s;
      if (&s == &first || s.node != first.node || !s.time_known || !first.time_known) continue;
      if (s.first_ns > first.first_ns + o.clock_skew_ns) break;
      const Symptom& a = items[anchor].s;
      bool same_incident = s.symptom == a.symptom ||
                           (a.source_kind == SourceKind::kApplication && s.source_kind != SourceKind::kApplication);
      if (same_incident && prio(r) > prio(anchor)) anchor = r;
    }
  }
  sc.anchor = anchor;
  const Symptom& a = items[anchor].s;
  for (size_t r : c.roots) {
    if (r == anchor) continue;
    const Symptom& s = items[r].s;
    bool within = !a.time_known || !s.time_known || s.first_ns <= a.first_ns + o.causal_window_ns;
    if (!within) sc.downstream.push_back(r);
    else if (s.sub_domain == a.sub_domain) sc.same.push_back(r);
    // Another node, another domain, within the window (or at an unknown time, which no window
    // excludes): an independent root unless a relation made it a consequence before this phase.
    else if (s.node != a.node && s.severity >= Severity::kError && !c.fallback) sc.competitors.push_back(r);
    else sc.downstream.push_back(r);
  }
  return sc;
}

void markScored(std::vector<Item>& items, const Candidates& c, const Scored& sc) {
  const Symptom& a = items[sc.anchor].s;
  const std::string anchor_name = fmt::format("{} on {}", a.rule_id, a.node.empty() ? "an unknown node" : a.node);
  for (size_t r : sc.downstream) {
    Item& it = items[r];
    it.eff = Role::kCascade;
    bool late = a.time_known && it.s.time_known && it.s.node != a.node;
    it.because = late || it.s.sub_domain == a.sub_domain
                     ? fmt::format("later than the causal window of {} [phase: scoring]", anchor_name)
                     : fmt::format("on the cause's node, in another domain: downstream of {} [phase: scoring]", anchor_name);
  }
  for (size_t r : sc.same)
    if (items[r].because.empty()) items[r].because = fmt::format("a root in the same domain as {} [phase: scoring]", anchor_name);
  for (size_t r : sc.competitors)
    items[r].because = fmt::format("an independent root in another domain on another node [phase: decision]");
  for (size_t r : c.set_aside) {
    items[r].eff = Role::kContext;
    items[r].because = fmt::format("a fault from before the job, but {} failed it during the job [phase: candidates]",
                                   anchor_name);
  }
  Item& anchor = items[sc.anchor];
  if (c.fallback) {
    anchor.eff = Role::kRoot;
    anchor.because = "no root symptom anywhere: the most specific fallback evidence [phase: scoring]";
  } else if (anchor.because.empty() || anchor.because.find("[causality:") == std::string::npos) {
    anchor.because = anchor.delay_ns > 0
                         ? fmt::format("the earliest root symptom by onset (printed about {} s after its condition "
                                       "began) [phase: scoring]", anchor.delay_ns / 1'000'000'000)
                         : "the earliest root symptom [phase: scoring]";
  }
}

std::string_view outcomeName(Outcome o) {
  switch (o) {
    case Outcome::kAttributed: return "attributed";
    case Outcome::kAmbiguous: return "ambiguous";
    case Outcome::kSystemic: return "systemic";
    case Outcome::kUnattributed: return "unattributed";
    case Outcome::kNone: return "none";
  }
  return "none";
}

namespace {

// No candidate (or none the job's end lets count): the terminal state speaks.
Decision withoutCause(const std::string& ts, const JobInfo& job, const std::vector<Item>& items,
                      const CorrelatorOptions& o) {
  Decision d;
  d.outcome = Outcome::kNone;
  if (ts == "success" || ts == "preempted" || ts == "cancelled") {
    d.explanation = ts == "success"     ? "The job completed; nothing failed."
                    : ts == "preempted" ? "The scheduler preempted the job; no fault was involved."
                                        : "The job was cancelled and no fault preceded the cancel.";
  } else if (ts == "timeout") {
    // Collective timeouts before the limit mean a hang; what follows the kill at the limit
    // (workers dying with -9, connections closing) is teardown.
    const int64_t kill_ns = job.end_ns ? job.end_ns - o.clock_skew_ns : INT64_MAX;
    auto sign = std::find_if(items.begin(), items.end(), [&](const Item& it) {
      return it.eff == Role::kCascade && (!it.s.time_known || it.s.first_ns < kill_ns);
    });
    const bool hang = sign != items.end();
    d.outcome = hang ? Outcome::kUnattributed : Outcome::kNone;
    d.sub_domain = hang ? SubDomain::kUnattributed : SubDomain::kNone;
    d.explanation = hang ? fmt::format("The job hit its time limit after signs of a hang ({}), but no root cause was found.",
                                       sign->s.summary.empty() ? sign->s.symptom : sign->s.summary)
                         : "The job ran until its time limit without any fault evidence.";
  } else if (ts == "node_fail") {
    // The scheduler lost a node and no log says why: a power or hardware fault, a kernel panic, a
    // network partition and a node the operators rebooted all look the same from here. Naming a
    // domain would be a guess (TAXONOMY: evidence that does not decide is unattributed).
    d.outcome = Outcome::kUnattributed;
    d.sub_domain = SubDomain::kUnattributed;
    d.explanation = "The scheduler reports a node failure, but the nodes' own logs hold no fault that explains it.";
    d.action = "Check the node's BMC/SEL and console log for power, hardware or kernel problems at that time.";
  } else if (ts == "out_of_memory") {
    d.outcome = Outcome::kAttributed;
    d.sub_domain = SubDomain::kApplication;
    d.explanation = "Slurm reports the job exceeded its memory allocation.";
    d.action = "Raise the job's memory request or reduce host memory use (data loaders, pinned buffers).";
  } else {
    d.outcome = Outcome::kUnattributed;
    d.sub_domain = SubDomain::kUnattributed;
    d.explanation = "The job failed but its logs hold no evidence that decides the cause.";
    d.action = "Collect the rank logs and each node's kernel log and journal for the job's window.";
  }
  return d;
}

// Only generic wrappers: they say the job failed, not why.
Decision wrappersOnly(const std::vector<Item>& items, const Candidates& c) {
  Decision d;
  d.outcome = Outcome::kUnattributed;
  d.sub_domain = SubDomain::kUnattributed;
  std::set<std::string> nodes, symptoms, relations;
  std::set<SubDomain> plausible;
  for (size_t i : c.wrappers) {
    if (!items[i].s.node.empty()) nodes.insert(items[i].s.node);
    symptoms.insert(items[i].s.symptom);
    relations.insert(items[i].wrapper_relation);
    plausible.insert(items[i].plausible.begin(), items[i].plausible.end());
  }
  std::vector<std::string> domains;
  for (auto p : plausible) domains.emplace_back(subDomainName(p));
  d.explanation = fmt::format(
      "The job failed with {} on {} node(s): generic wrapper errors that name no cause, and nothing beside them "
      "says which (plausibly {}) [causality: {}].",
      fmt::join(symptoms, ", "), nodes.size(), fmt::join(domains, ", "), fmt::join(relations, ", "));
  d.action = "Rerun with NCCL_DEBUG=WARN (or INFO) and collect every rank's output and each node's kernel log: "
             "the WARN line before the wrapper names the failing call.";
  return d;
}

std::vector<int> parseRanks(const std::string& list) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    std::string part = list.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? list.size() : end + 1;
    int a = 0, b = 0;
    if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2 && b >= a && b - a < 100000)
      for (int r = a; r <= b; ++r) out.push_back(r);
    else if (std::sscanf(part.c_str(), "%d", &a) == 1)
      out.push_back(a);
  }
  return out;
}

// The anchor's kind of error is the job's own: on every node of a multi-node job, or naming
// ranks on several nodes, or reported by several ranks of a job-wide log no node is known for.
bool jobWide(const std::vector<Item>& items, size_t anchor, const JobInfo& job) {
  const Symptom& a = items[anchor].s;
  std::set<std::string> nodes, named_nodes;
  std::set<int> unplaced_ranks;
  for (const auto& it : items) {
    if (it.s.rule_id != a.rule_id) continue;
    if (!it.s.node.empty()) nodes.insert(it.s.node);
    else if (auto r = it.s.rank()) unplaced_ranks.insert(*r);
    for (int r : parseRanks(it.s.field("ranks")))
      if (auto n = job.nodeOfRank(r); !n.empty()) named_nodes.insert(n);
  }
  if (named_nodes.size() > 1) return true;
  if (job.nodes.size() > 1 && nodes.size() >= job.nodes.size()) return true;
  return nodes.empty() && unplaced_ranks.size() > 1;
}

}  // namespace

Decision decide(const JobInfo& job, const std::vector<Item>& items, const Candidates& c,
                const std::optional<Scored>& sc, const CorrelatorOptions& o) {
  const std::string ts = terminalStateOf(job.state);
  if (ts == "success" || ts == "preempted") return withoutCause(ts, job, items, o);
  if (!sc) {
    bool stopped = ts == "cancelled" || ts == "timeout";
    return !c.wrappers.empty() && !stopped && ts != "node_fail" ? wrappersOnly(items, c) : withoutCause(ts, job, items, o);
  }
  // A job stopped from outside with cascade-type evidence only: that evidence is as likely the
  // stop's echo or a hang's symptom as a cause. Except a connection that could not be made (rule
  // field stage: connect) before a job ran into its time limit: a job that never connected hangs
  // until the limit, and the refused or unanswered connect is where that began.
  if ((ts == "cancelled" || ts == "timeout") && c.fallback) {
    const Symptom& f = items[sc->anchor].s;
    const int64_t kill_ns = job.end_ns ? job.end_ns - o.clock_skew_ns : INT64_MAX;
    const bool connect_before_limit =
        ts == "timeout" && f.field("stage") == "connect" && (!f.time_known || f.first_ns < kill_ns);
    if (!connect_before_limit) return withoutCause(ts, job, items, o);
  }
  const Symptom& a = items[sc->anchor].s;
  Decision d;
  if (!sc->competitors.empty()) {
    d.outcome = Outcome::kAmbiguous;
    d.sub_domain = SubDomain::kAmbiguous;
    std::vector<std::string> v{fmt::format("{} on {} ({})", a.symptom, a.node, subDomainName(a.sub_domain))};
    std::set<std::string> seen{a.node};
    for (size_t r : sc->competitors)
      if (seen.insert(items[r].s.node).second)
        v.push_back(fmt::format("{} on {} ({})", items[r].s.symptom, items[r].s.node, subDomainName(items[r].s.sub_domain)));
    d.explanation = fmt::format("{} independent root causes in different domains within {} s, and no causality relation "
                                "links them: {} [phase: decision].",
                                v.size(), o.causal_window_ns / 1000000000, fmt::join(v, "; "));
    return d;
  }
  d.outcome = Outcome::kAttributed;
  d.sub_domain = a.sub_domain;
  if (!items[sc->anchor].job_wide_relation.empty() && jobWide(items, sc->anchor, job)) {
    d.job_wide = true;
    d.job_wide_relation = items[sc->anchor].job_wide_relation;
    return d;
  }
  std::set<std::string> suspects;
  if (!a.node.empty()) suspects.insert(a.node);
  for (size_t r : sc->same)
    if (!items[r].s.node.empty()) suspects.insert(items[r].s.node);
  if (a.sub_domain != SubDomain::kApplication && suspects.size() > o.systemic_threshold) {
    d.outcome = Outcome::kSystemic;
    d.explanation = fmt::format("{} nodes show {} root symptoms at once: a systemic problem, not one node [phase: decision].",
                                suspects.size(), subDomainName(a.sub_domain));
  }
  return d;
}

}  // namespace faultline::common::phases
