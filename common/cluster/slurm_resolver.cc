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

}  // namespace

StatusOr<ClusterConfig> ResolveSlurmCluster(const EnvironmentMap& env, int port_base) {
  if (port_base < 1 || port_base > 65535) {
    return InvalidArgumentError("--slurm-port-base " + std::to_string(port_base) +
                                " is out of range 1-65535");
  }
  MIRRORED_ASSIGN_OR_RETURN(Variable procid_var, FirstSet(env, {"SLURM_PROCID"}));
  MIRRORED_ASSIGN_OR_RETURN(int rank, ParseCount(procid_var));
  MIRRORED_ASSIGN_OR_RETURN(Variable ntasks_var, FirstSet(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
  MIRRORED_ASSIGN_OR_RETURN(int num_tasks, ParseCount(ntasks_var));
  if (num_tasks < 1) {
    return InvalidArgumentError(ntasks_var.name + " is 0: the step has no task");
  }
  if (rank >= num_tasks) {
    return InvalidArgumentError("SLURM_PROCID " + std::to_string(rank) + " is out of range: " +
                                ntasks_var.name + " is " + std::to_string(num_tasks));
  }

  MIRRORED_ASSIGN_OR_RETURN(Variable nodes_var,
                            FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}));
  StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(nodes_var.value);
  if (!hosts.ok()) {
    return InvalidArgumentError(nodes_var.name + " \"" + nodes_var.value + "\": " +
                                hosts.status().message());
  }
  std::set<std::string> unique;
  for (const std::string& host : *hosts) {
    if (!unique.insert(host).second) {
      return InvalidArgumentError(nodes_var.name + " \"" + nodes_var.value + "\" names host \"" +
                                  host + "\" twice");
    }
  }

  MIRRORED_ASSIGN_OR_RETURN(Variable per_node_var,
                            FirstSet(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}));
  StatusOr<std::vector<int>> per_node = ExpandSlurmTasksPerNode(per_node_var.value);
  if (!per_node.ok()) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\": " +
                                per_node.status().message());
  }
  if (per_node->size() != hosts->size()) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\" lists " +
                                std::to_string(per_node->size()) + " nodes but " + nodes_var.name +
                                " \"" + nodes_var.value + "\" has " + std::to_string(hosts->size()));
  }
  long long total = 0;
  for (int n : *per_node) total += n;
  if (total != num_tasks) {
    return InvalidArgumentError(per_node_var.name + " \"" + per_node_var.value + "\" adds up to " +
                                std::to_string(total) + " tasks but " + ntasks_var.name + " is " +
                                std::to_string(num_tasks));
  }
  const int max_per_node = *std::max_element(per_node->begin(), per_node->end());
  if (port_base + max_per_node - 1 > 65535) {
    return InvalidArgumentError("--slurm-port-base " + std::to_string(port_base) + " + " +
                                std::to_string(max_per_node) +
                                " tasks on one node goes past port 65535");
  }

  std::vector<HostPort> workers;
  int my_node = -1, my_local = -1;
  for (size_t node = 0; node < hosts->size(); ++node) {
    for (int local = 0; local < (*per_node)[node]; ++local) {
      if (static_cast<int>(workers.size()) == rank) {
        my_node = static_cast<int>(node);
        my_local = local;
      }
      workers.push_back(HostPort{(*hosts)[node], static_cast<uint16_t>(port_base + local)});
    }
  }

  if (auto local_text = Lookup(env, "SLURM_LOCALID")) {
    MIRRORED_ASSIGN_OR_RETURN(int local_id, ParseCount(Variable{"SLURM_LOCALID", *local_text}));
    if (local_id != my_local) {
      return InvalidArgumentError(
          "SLURM_LOCALID " + std::to_string(local_id) + " does not match SLURM_PROCID " +
          std::to_string(rank) + ": by " + per_node_var.name + " \"" + per_node_var.value +
          "\" rank " + std::to_string(rank) + " is local task " + std::to_string(my_local) +
          " on " + (*hosts)[my_node] +
          " (run srun with the default block distribution, --distribution=block)");
    }
  }

  // The node this task runs on, by Slurm's own word (srun sets both): a task
  // that disagrees would listen on another node's address.
  if (auto node_text = Lookup(env, "SLURM_NODEID")) {
    MIRRORED_ASSIGN_OR_RETURN(int node_id, ParseCount(Variable{"SLURM_NODEID", *node_text}));
    if (node_id != my_node) {
      return InvalidArgumentError("SLURM_NODEID " + std::to_string(node_id) + " does not match SLURM_PROCID " +
                                  std::to_string(rank) + ": by " + per_node_var.name + " \"" + per_node_var.value +
                                  "\" rank " + std::to_string(rank) + " runs on node " + std::to_string(my_node) +
                                  " (" + (*hosts)[my_node] + ")");
    }
  }
  if (auto node_name = Lookup(env, "SLURMD_NODENAME"); node_name && *node_name != (*hosts)[my_node]) {
    return InvalidArgumentError("SLURMD_NODENAME \"" + *node_name + "\" does not match SLURM_PROCID " +
                                std::to_string(rank) + ": by " + nodes_var.name + " and " + per_node_var.name +
                                " rank " + std::to_string(rank) + " runs on " + (*hosts)[my_node]);
  }

  ClusterConfig config;
  if (nodes_var.name != "SLURM_STEP_NODELIST") {
    // sbatch's batch script has the job's variables but no step's: the
    // other nodes would get no task, and this one would wait for them.
    config.warnings.push_back(
        "SLURM_STEP_NODELIST is not set: this is not a task started by srun (the batch script itself?); start "
        "one task per node with `srun mirrored-launch cluster --from-slurm`, or this task waits for the others "
        "until --registration-timeout");
  }
  MIRRORED_ASSIGN_OR_RETURN(config.cluster,
                            ClusterSpec::Create({{std::string(kWorkerJob), std::move(workers)}}));
  config.task = TaskId{std::string(kWorkerJob), rank};
  config.source = "Slurm (" + procid_var.name + ", " + ntasks_var.name + ", " + nodes_var.name +
                  ", " + per_node_var.name + ")";
  return config;
}

}  // namespace mirrored
