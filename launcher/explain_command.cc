#include "launcher/explain_command.h"

#include <algorithm>
#include <iomanip>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/decimal_integer.h"

namespace mirrored {
namespace {

// One printed row: a training task, the evaluator, or the single local task.
struct Row {
  TaskId task;
  std::string role;                // chief, worker or evaluator
  std::optional<int> rank;         // training rank; none for the evaluator
  std::optional<HostPort> address; // none: local, or evaluator left out of the cluster
  bool coordination_service = false;
  bool this_process = false;
};

std::vector<Row> BuildRows(const ClusterConfig& config) {
  std::vector<Row> rows;
  if (config.is_single_local_task) {
    Row row{config.task, config.IsEvaluator() ? "evaluator" : "chief", std::nullopt, std::nullopt,
            false, true};
    if (!config.IsEvaluator()) row.rank = 0;
    rows.push_back(row);
    return rows;
  }
  const TaskId chief = config.cluster.ChiefTask();
  for (const TaskId& task : config.cluster.TrainingTasks()) {
    rows.push_back(Row{task, task == chief ? "chief" : "worker", config.cluster.RankOf(task),
                       config.cluster.AddressOf(task), task == chief, task == config.task});
  }
  if (config.cluster.NumTasks(std::string(kEvaluatorJob)) > 0 || config.IsEvaluator()) {
    const TaskId evaluator{std::string(kEvaluatorJob), 0};
    rows.push_back(Row{evaluator, "evaluator", std::nullopt, config.cluster.EvaluatorAddress(),
                       false, config.task == evaluator});
  }
  return rows;
}

std::string AddressText(const Row& row, bool single_local) {
  if (row.address) return row.address->ToString();
  return single_local ? "(local)" : "(not in cluster)";
}

}  // namespace

void ExplainCommand::Register(CLI::App& app) {
  subcommand_ = app.add_subcommand(
      "explain", "Print the resolved cluster: every task, its address and role, the "
                 "coordination-service host and this process's task");
  tf_config_option_ = subcommand_->add_option(
      "--tf-config", tf_config_text_,
      "TF_CONFIG as a file or a JSON string (default: the TF_CONFIG environment variable)");
  tf_config_option_->type_name("FILE|JSON");
  CLI::Option* slurm = subcommand_->add_flag(
      "--from-slurm", options_.source.from_slurm,
      "Resolve the cluster from SLURM_* variables (run under srun)");
  subcommand_->add_option("--slurm-port-base", options_.source.slurm_port_base,
                          "First port on each node with --from-slurm")
      ->capture_default_str()
      ->needs(slurm)
      ->transform(DecimalInteger<int>());
  subcommand_->add_flag("--json", options_.json, "Print JSON instead of a table");
  tf_config_option_->excludes(slurm);
  CLI::Option* k8s = subcommand_->add_flag(
      "--from-k8s-indexed-job", options_.source.from_k8s_indexed_job,
      "Resolve the cluster of a Kubernetes Indexed Job from JOB_COMPLETION_INDEX and MIRRORED_K8S_* "
      "variables (deploy/kubernetes/indexed-job.yaml)");
  k8s->excludes(tf_config_option_)->excludes(slurm);
}

int ExplainCommand::Run(const EnvironmentMap& env, std::ostream& out, std::ostream& err) const {
  Options options = options_;
  if (tf_config_option_ != nullptr && tf_config_option_->count() > 0) options.source.tf_config = tf_config_text_;
  StatusOr<ClusterConfig> config = ResolveCluster(options.source, env);
  if (!config.ok()) {
    err << "mirrored-launch: error: " << config.status().message() << "\n";
    return ExitCodeFor(config.status());
  }
  for (const std::string& warning : config->warnings) {
    err << "mirrored-launch: warning: " << warning << "\n";
  }
  out << (options.json ? FormatJson(*config) : FormatTable(*config));
  return kExitSuccess;
}

std::string ExplainCommand::FormatTable(const ClusterConfig& config) {
  const std::vector<Row> rows = BuildRows(config);
  std::ostringstream os;
  const int training = config.NumTrainingTasks();
  const bool has_evaluator = std::any_of(rows.begin(), rows.end(),
                                         [](const Row& r) { return r.role == "evaluator"; });
  os << "source: " << config.source << "\n";
  if (config.is_single_local_task) {
    os << "tasks:  1 (single local task)\n\n";
  } else {
    os << "tasks:  " << training << " training task" << (training == 1 ? "" : "s")
       << (has_evaluator ? " + evaluator" : "") << "\n\n";
  }

  size_t task_width = 4, address_width = 7;
  for (const Row& row : rows) {
    task_width = std::max(task_width, row.task.ToString().size());
    address_width = std::max(address_width, AddressText(row, config.is_single_local_task).size());
  }
  auto line = [&](const std::string& task, const std::string& role, const std::string& rank,
                  const std::string& address, const std::string& notes) {
    std::ostringstream l;
    l << std::left << std::setw(static_cast<int>(task_width) + 2) << task << std::setw(11) << role
      << std::setw(6) << rank << std::setw(static_cast<int>(address_width) + 2) << address << notes;
    std::string text = l.str();
    text.erase(text.find_last_not_of(' ') + 1);
    os << text << "\n";
  };
  line("TASK", "ROLE", "RANK", "ADDRESS", "NOTES");
  for (const Row& row : rows) {
    std::string notes;
    if (row.coordination_service) notes = "coordination service";
    if (row.this_process) notes += notes.empty() ? "<- this process" : ", <- this process";
    line(row.task.ToString(), row.role, row.rank ? std::to_string(*row.rank) : "-",
         AddressText(row, config.is_single_local_task), notes);
  }
  os << "\n";
  if (config.is_single_local_task) {
    os << "coordination service: none (single local task)\n";
  } else {
    os << "coordination service: " << config.cluster.ChiefTask().ToString() << " at "
       << config.cluster.CoordinatorAddress().ToString() << "\n";
  }
  for (const Row& row : rows) {
    if (!row.this_process) continue;
    os << "this process:         " << row.task.ToString() << " (" << row.role;
    if (row.rank) os << ", rank " << *row.rank;
    os << ")";
    if (row.address) os << " at " << row.address->ToString();
    os << "\n";
  }
  return os.str();
}

std::string ExplainCommand::FormatJson(const ClusterConfig& config) {
  using nlohmann::json;
  json tasks = json::array();
  json this_task = nullptr;
  for (const Row& row : BuildRows(config)) {
    json entry = {{"task", row.task.ToString()},
                  {"type", row.task.type},
                  {"index", row.task.index},
                  {"role", row.role},
                  {"rank", row.rank ? json(*row.rank) : json(nullptr)},
                  {"address", row.address ? json(row.address->ToString()) : json(nullptr)},
                  {"coordination_service", row.coordination_service},
                  {"this_process", row.this_process}};
    if (row.this_process) this_task = entry;
    tasks.push_back(std::move(entry));
  }
  json coordination = nullptr;
  if (!config.is_single_local_task) {
    coordination = {{"task", config.cluster.ChiefTask().ToString()},
                    {"address", config.cluster.CoordinatorAddress().ToString()}};
  }
  json out = {{"source", config.source},
              {"single_local_task", config.is_single_local_task},
              {"rpc_layer", config.rpc_layer},
              {"environment", config.environment},
              {"num_training_tasks", config.NumTrainingTasks()},
              {"tasks", std::move(tasks)},
              {"coordination_service", std::move(coordination)},
              {"this_task", std::move(this_task)},
              {"warnings", config.warnings}};
  return out.dump(2) + "\n";
}

}  // namespace mirrored
