#include "common/cluster/slurm_resolver.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "common/cluster/slurm_host_list.h"

namespace mirrored {
namespace {

constexpr const char* kOutsideSlurm =
    "--from-slurm must run inside a Slurm job step (under srun)";

struct Variable {
  std::string name;
  std::string value;
};

// The first of `names` that is set.
StatusOr<Variable> FirstSet(const EnvironmentMap& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = Lookup(env, name)) return Variable{name, *value};
  }
  std::string list;
  size_t i = 0;
  for (const char* name : names) {
    list += (i == 0 ? "" : (i + 1 == names.size() ? " nor " : ", ")) + std::string(name);
    ++i;
  }
  if (names.size() == 1) return InvalidArgumentError(list + " is not set: " + kOutsideSlurm);
  return InvalidArgumentError("neither " + list + " is set: " + kOutsideSlurm);
}

StatusOr<int> ParseCount(const Variable& v) {
  int out = 0;
  auto [end, ec] = std::from_chars(v.value.data(), v.value.data() + v.value.size(), out);
  if (v.value.empty() || ec != std::errc() || end != v.value.data() + v.value.size() || out < 0) {
    return InvalidArgumentError(v.name + " \"" + v.value + "\" is not a non-negative integer");
  }
  return out;
}

// This task's rank and the step's number of tasks.
struct StepTasks {
  Variable procid;
  int rank = 0;
  Variable ntasks;
  int num_tasks = 0;
};

StatusOr<StepTasks> ReadStepTasks(const EnvironmentMap& env) {
  StepTasks t;
  MIRRORED_ASSIGN_OR_RETURN(t.procid, FirstSet(env, {"SLURM_PROCID"}));
  MIRRORED_ASSIGN_OR_RETURN(t.rank, ParseCount(t.procid));
  MIRRORED_ASSIGN_OR_RETURN(t.ntasks, FirstSet(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
  MIRRORED_ASSIGN_OR_RETURN(t.num_tasks, ParseCount(t.ntasks));
  if (t.num_tasks < 1) {
    return InvalidArgumentError(t.ntasks.name + " is 0: the step has no task");
  }
  if (t.rank >= t.num_tasks) {
    return InvalidArgumentError("SLURM_PROCID " + std::to_string(t.rank) + " is out of range: " + t.ntasks.name +
                                " is " + std::to_string(t.num_tasks));
  }
  return t;
}

// The step's nodes, in node-list order, and how many tasks each runs.
struct StepNodes {
  Variable nodes;
  std::vector<std::string> hosts;
  Variable per_node_var;
  std::vector<int> per_node;
};

StatusOr<std::vector<std::string>> ReadHosts(const Variable& nodes) {
  StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(nodes.value);
  if (!hosts.ok()) {
    return InvalidArgumentError(nodes.name + " \"" + nodes.value + "\": " + hosts.status().message());
  }
  std::set<std::string> unique;
  for (const std::string& host : *hosts) {
    if (!unique.insert(host).second) {
      return InvalidArgumentError(nodes.name + " \"" + nodes.value + "\" names host \"" + host + "\" twice");
    }
  }
  return hosts;
}

StatusOr<StepNodes> ReadStepNodes(const EnvironmentMap& env, const StepTasks& tasks) {
  StepNodes n;
  MIRRORED_ASSIGN_OR_RETURN(n.nodes, FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}));
  MIRRORED_ASSIGN_OR_RETURN(n.hosts, ReadHosts(n.nodes));
  MIRRORED_ASSIGN_OR_RETURN(n.per_node_var, FirstSet(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}));
  const Variable& per_node_var = n.per_node_var;
  StatusOr<std::vector<int>> per_node = ExpandSlurmTasksPerNode(per_node_var.value);
  if (!per_node.ok()) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\": " +
                                per_node.status().message());
  }
  if (per_node->size() != n.hosts.size()) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\" lists " +
                                std::to_string(per_node->size()) + " nodes but " + n.nodes.name + " \"" +
                                n.nodes.value + "\" has " + std::to_string(n.hosts.size()));
  }
  long long total = 0;
  for (int count : *per_node) total += count;
  if (total != tasks.num_tasks) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\" adds up to " +
                                std::to_string(total) + " tasks but " + tasks.ntasks.name + " is " +
                                std::to_string(tasks.num_tasks));
  }
  n.per_node = std::move(*per_node);
  return n;
}

// Every task's address, in rank order (srun's block distribution: the
// tasks fill the nodes in node-list order), and where this task falls.
struct Layout {
  std::vector<HostPort> workers;
  int my_node = -1;
  int my_local = -1;  // this task's offset on its node
};

StatusOr<Layout> LayOut(const StepNodes& nodes, int rank, int port_base) {
  const int max_per_node = *std::max_element(nodes.per_node.begin(), nodes.per_node.end());
  if (port_base + max_per_node - 1 > 65535) {
    return InvalidArgumentError("--slurm-port-base " + std::to_string(port_base) + " + " +
                                std::to_string(max_per_node) + " tasks on one node goes past port 65535");
  }
  Layout layout;
  for (size_t node = 0; node < nodes.hosts.size(); ++node) {
    for (int local = 0; local < nodes.per_node[node]; ++local) {
      if (static_cast<int>(layout.workers.size()) == rank) {
        layout.my_node = static_cast<int>(node);
        layout.my_local = local;
      }
      layout.workers.push_back(HostPort{nodes.hosts[node], static_cast<uint16_t>(port_base + local)});
    }
  }
  return layout;
}

// The local task and node this task runs as, by Slurm's own word (srun
// sets them), match the layout: a task that disagrees would listen on
// another task's port or another node's address.
Status CheckPlacement(const EnvironmentMap& env, int rank, const StepNodes& nodes, const Layout& layout) {
  const std::string by_layout = ": by " + nodes.per_node_var.name + " \"" + nodes.per_node_var.value + "\" rank " +
                                std::to_string(rank);
  const std::string& my_host = nodes.hosts[layout.my_node];
  if (auto local_text = Lookup(env, "SLURM_LOCALID")) {
    MIRRORED_ASSIGN_OR_RETURN(int local_id, ParseCount(Variable{"SLURM_LOCALID", *local_text}));
    if (local_id != layout.my_local) {
      return InvalidArgumentError("SLURM_LOCALID " + std::to_string(local_id) + " does not match SLURM_PROCID " +
                                  std::to_string(rank) + by_layout + " is local task " +
                                  std::to_string(layout.my_local) + " on " + my_host +
                                  " (run srun with the default block distribution, --distribution=block)");
    }
  }
  if (auto node_text = Lookup(env, "SLURM_NODEID")) {
    MIRRORED_ASSIGN_OR_RETURN(int node_id, ParseCount(Variable{"SLURM_NODEID", *node_text}));
    if (node_id != layout.my_node) {
      return InvalidArgumentError("SLURM_NODEID " + std::to_string(node_id) + " does not match SLURM_PROCID " +
                                  std::to_string(rank) + by_layout + " runs on node " +
                                  std::to_string(layout.my_node) + " (" + my_host + ")");
    }
  }
  if (auto node_name = Lookup(env, "SLURMD_NODENAME"); node_name && *node_name != my_host) {
    return InvalidArgumentError("SLURMD_NODENAME \"" + *node_name + "\" does not match SLURM_PROCID " +
                                std::to_string(rank) + ": by " + nodes.nodes.name + " and " +
                                nodes.per_node_var.name + " rank " + std::to_string(rank) + " runs on " + my_host);
  }
  return OkStatus();
}

}  // namespace

StatusOr<ClusterConfig> ResolveSlurmCluster(const EnvironmentMap& env, int port_base) {
  if (port_base < 1 || port_base > 65535) {
    return InvalidArgumentError("--slurm-port-base " + std::to_string(port_base) + " is out of range 1-65535");
  }
  MIRRORED_ASSIGN_OR_RETURN(StepTasks tasks, ReadStepTasks(env));
  MIRRORED_ASSIGN_OR_RETURN(StepNodes nodes, ReadStepNodes(env, tasks));
  MIRRORED_ASSIGN_OR_RETURN(Layout layout, LayOut(nodes, tasks.rank, port_base));
  MIRRORED_RETURN_IF_ERROR(CheckPlacement(env, tasks.rank, nodes, layout));

  ClusterConfig config;
  if (nodes.nodes.name != "SLURM_STEP_NODELIST") {
    // sbatch's batch script has the job's variables but no step's: the
    // other nodes would get no task, and this one would wait for them.
    config.warnings.push_back(
        "SLURM_STEP_NODELIST is not set: this is not a task started by srun (the batch script itself?); start "
        "one task per node with `srun mirrored-launch cluster --from-slurm`, or this task waits for the others "
        "until --registration-timeout");
  }
  MIRRORED_ASSIGN_OR_RETURN(config.cluster,
                            ClusterSpec::Create({{std::string(kWorkerJob), std::move(layout.workers)}}));
  config.task = TaskId{std::string(kWorkerJob), tasks.rank};
  config.source = "Slurm (" + tasks.procid.name + ", " + tasks.ntasks.name + ", " + nodes.nodes.name + ", " +
                  nodes.per_node_var.name + ")";
  return config;
}

}  // namespace mirrored
