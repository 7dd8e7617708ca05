#include "common/cluster/cluster_spec.h"

#include <algorithm>
#include <cctype>

#include "common/quoted_text.h"

namespace mirrored {

Status ClusterSpec::ValidateJobName(const std::string& job) {
  if (job == kParameterServerJob) {
    return InvalidArgumentError(
        "cluster.ps: parameter-server training is not supported; mirrored runs synchronous "
        "data-parallel training with chief, worker and evaluator tasks only");
  }
  if (job != kChiefJob && job != kWorkerJob && job != kEvaluatorJob) {
    return InvalidArgumentError("cluster has an unsupported job " + QuotedText(job) +
                                ": the jobs can be chief, worker and evaluator");
  }
  return OkStatus();
}

StatusOr<ClusterSpec> ClusterSpec::Create(JobMap jobs) {
  std::map<std::string, std::string> seen;  // CanonicalKey -> "worker:1"
  for (const auto& [job, addresses] : jobs) {
    MIRRORED_RETURN_IF_ERROR(ValidateJobName(job));
    if (addresses.empty()) {
      return InvalidArgumentError("cluster." + job + " is an empty list: give at least one address");
    }
    if ((job == kChiefJob || job == kEvaluatorJob) && addresses.size() > 1) {
      return InvalidArgumentError("cluster." + job + " has " + std::to_string(addresses.size()) +
                                  " tasks: at most one " + job + " is allowed");
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      const std::string name = job + ":" + std::to_string(i);
      if (Status host = HostPort::ValidateHost(addresses[i].host); !host.ok()) {
        return host.WithContext("cluster." + job + "[" + std::to_string(i) + "]");
      }
      auto [it, inserted] = seen.emplace(addresses[i].CanonicalKey(), name);
      if (!inserted) {
        return InvalidArgumentError("cluster." + job + "[" + std::to_string(i) + "] \"" +
                                    addresses[i].ToString() + "\" is already the address of " +
                                    it->second + ": every task needs its own host:port");
      }
    }
  }
  if (!jobs.empty() && !jobs.count(std::string(kChiefJob)) &&
      !jobs.count(std::string(kWorkerJob))) {
    return InvalidArgumentError("cluster has no chief or worker task: nothing would train");
  }
  return ClusterSpec(std::move(jobs));
}

int ClusterSpec::NumTasks(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

bool ClusterSpec::Contains(const TaskId& task) const {
  return task.index >= 0 && task.index < NumTasks(task.type);
}

std::optional<HostPort> ClusterSpec::AddressOf(const TaskId& task) const {
  if (!Contains(task)) return std::nullopt;
  return jobs_.at(task.type)[task.index];
}

TaskId ClusterSpec::ChiefTask() const {
  if (NumTasks(std::string(kChiefJob)) > 0) return TaskId{std::string(kChiefJob), 0};
  return TaskId{std::string(kWorkerJob), 0};
}

HostPort ClusterSpec::CoordinatorAddress() const {
  auto address = AddressOf(ChiefTask());
  return address ? *address : HostPort{};
}

std::vector<TaskId> ClusterSpec::TrainingTasks() const {
  std::vector<TaskId> tasks;
  for (std::string_view job : {kChiefJob, kWorkerJob}) {
    const int n = NumTasks(std::string(job));
    for (int i = 0; i < n; ++i) tasks.push_back(TaskId{std::string(job), i});
  }
  return tasks;
}

namespace {

// A host as the same machine is named: lower case, every loopback one "".
std::string MachineKey(const std::string& host) {
  std::string key = host;
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  if (key == "localhost" || key.rfind("127.", 0) == 0 || key == "::1") return "";
  return key;
}

}  // namespace

int ClusterSpec::TrainingTasksAtHostOf(const TaskId& task) const {
  const std::optional<HostPort> mine = AddressOf(task);
  if (!mine) return 0;
  const std::string key = MachineKey(mine->host);
  int n = 0;
  for (const TaskId& t : TrainingTasks()) {
    if (MachineKey(AddressOf(t)->host) == key) ++n;
  }
  return n;
}

std::optional<int> ClusterSpec::LocalIndexAtHostOf(const TaskId& task) const {
  if (!RankOf(task)) return std::nullopt;
  const std::string key = MachineKey(AddressOf(task)->host);
  int n = 0;
  for (const TaskId& t : TrainingTasks()) {
    if (t == task) return n;
    if (MachineKey(AddressOf(t)->host) == key) ++n;
  }
  return std::nullopt;
}

namespace {

// The hosts of `tasks` as machine keys, in the order of their first task.
std::vector<std::string> HostsInOrder(const ClusterSpec& spec, const std::vector<TaskId>& tasks) {
  std::vector<std::string> hosts;
  for (const TaskId& t : tasks) {
    const std::string key = MachineKey(spec.AddressOf(t)->host);
    if (std::find(hosts.begin(), hosts.end(), key) == hosts.end()) hosts.push_back(key);
  }
  return hosts;
}

}  // namespace

std::optional<int> ClusterSpec::TrainingHostIndexOf(const TaskId& task) const {
  if (!RankOf(task)) return std::nullopt;
  const std::vector<std::string> hosts = HostsInOrder(*this, TrainingTasks());
  const auto it = std::find(hosts.begin(), hosts.end(), MachineKey(AddressOf(task)->host));
  return static_cast<int>(it - hosts.begin());
}

int ClusterSpec::NumTrainingHosts() const {
  return static_cast<int>(HostsInOrder(*this, TrainingTasks()).size());
}

std::optional<int> ClusterSpec::RankOf(const TaskId& task) const {
  if (!Contains(task)) return std::nullopt;
  if (task.type == kChiefJob) return task.index;
  if (task.type == kWorkerJob) return NumTasks(std::string(kChiefJob)) + task.index;
  return std::nullopt;
}

std::optional<HostPort> ClusterSpec::EvaluatorAddress() const {
  return AddressOf(TaskId{std::string(kEvaluatorJob), 0});
}

}  // namespace mirrored
