// TF_CONFIG parsing: turns TensorFlow's TF_CONFIG JSON (from the environment,
// a file or a literal string) into a validated ClusterConfig, with
// TFConfigClusterResolver's meaning of every field.
//
//   StatusOr<ClusterConfig> a = ParseTfConfig(R"({"cluster":{"worker":["h1:2222"]},
//                                                 "task":{"type":"worker","index":0}})");
//   StatusOr<ClusterConfig> b = ResolveTfConfig(flag_value);   // file, JSON, or $TF_CONFIG
//
// Accepted: {"cluster": {job: ["host:port", ...]}, "task": {"type", "index"},
// "rpc_layer": "grpc", "environment": "<any string>"}; other keys become
// warnings. A job may also be a map of index to address, {"1": "h2:2222",
// "0": "h1:2222"}, as TF's ClusterSpec takes it; it resolves to the list
// ["h1:2222", "h2:2222"]. Every rejection is InvalidArgument (exit code 2)
// whose message names the field and the value, e.g.
//   task.index 3 is out of range: job "worker" has 2 tasks
// and invalid JSON reports the line and column.
//
// Differences from TensorFlow chosen on purpose (checked with
// tests/common/tf_reference_check.py against tensorflow-cpu 2.21):
//  - TF's resolver accepts any job name and MultiWorkerMirroredStrategy
//    accepts chief, worker, evaluator and ps; we refuse `ps` too (no
//    parameter-server training here), with a message that says so.
//  - TF does not validate addresses (no port, port 99999) or duplicate
//    addresses at all (errors surface when a server starts or a peer is
//    unreachable); we reject them up front.
//  - Any other job ("master") fails in MultiWorkerMirroredStrategy and here.
//  - A job given as a map: TF's ClusterSpec reads each key with int(), so
//    "a" or "1.5" fails at once, but a sparse or negative set passes, and
//    of two keys naming one index ("1", "01") the later silently wins; a
//    gap fails only later, in multi_worker_util's task_id < len(job) check
//    for a task past it. We take the map only when its keys are exactly
//    0..N-1, in any order, and refuse a gap (naming the missing index), a
//    key that is not an index ("a", "-1", "1.5", past kMaxTaskIndex) and
//    two keys for one index.
//  - task.index and map keys are read as Python's int() reads them: an
//    integer, 1.0, or a string with blanks around, an optional sign and
//    digits ("+1", " 1 "), underscores between digits included ("1_0" is
//    10, as in Python). We refuse what int() also takes but no one means:
//    Unicode digits and spaces, true/false (int(True) is 1) and a fraction
//    (int(1.5) is 1, silently).
//  - TF ignores rpc_layer's value until a server starts; we accept only
//    "grpc".
//  - A missing task, task.type or task.index with a cluster: TF's resolver
//    returns None; MultiWorkerMirroredStrategy's check then passes for a
//    missing task and fails with a TypeError for a missing index. We reject
//    all three with a message, so two processes cannot both become task 0.
//  - No cluster ("{}", or only a task): TF's task is None:None; ours is the
//    single local task worker:0 (or the type TF_CONFIG names, index 0; ps
//    and other indices are still refused).
//  - TF leaves all these checks to multi_worker_util._validate_cluster_spec
//    (run by MultiWorkerMirroredStrategy); ours run at parse time with the
//    same rules (at most one chief and one evaluator, task in its job, the
//    evaluator may be left out of the cluster) plus the address checks.
//  - An empty or all-blank TF_CONFIG is a JSON error in TF (json.loads(""));
//    here it means "no TF_CONFIG": a single local task.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/cluster/cluster_config.h"
#include "common/cluster/environment_map.h"
#include "common/status.h"

namespace mirrored {

// A --tf-config file larger than this is refused unread (/dev/zero given by
// mistake); 100 000 workers take about 2 MiB.
inline constexpr size_t kMaxTfConfigBytes = size_t{16} << 20;
// The largest task.index (or key of a job given as a map) accepted, as a
// cap on what one job can name.
inline constexpr long long kMaxTaskIndex = 1000000;

// Parses one TF_CONFIG JSON document. A document without "cluster" (or
// with an empty one) yields a single local task. `source` is the
// ClusterConfig::source to record. Errors: InvalidArgument, the message
// without any prefix.
StatusOr<ClusterConfig> ParseTfConfig(std::string_view json,
                                      std::string source = "TF_CONFIG");

// The configuration of this process:
//  - `flag_value` (--tf-config) is a JSON document when its first non-blank
//    character is '{', otherwise the path of a file holding one;
//  - with no flag, the TF_CONFIG variable of `env`;
//  - with neither (or a blank TF_CONFIG), a single local task.
// Errors carry the origin as a prefix ("--tf-config file \"c.json\": ...").
// InvalidArgument for bad content, NotFound for a missing file (both exit 2).
StatusOr<ClusterConfig> ResolveTfConfig(const std::optional<std::string>& flag_value,
                                        const EnvironmentMap& env);
// Same, reading the process environment.
StatusOr<ClusterConfig> ResolveTfConfig(const std::optional<std::string>& flag_value);

// The single local task: worker:0, no cluster.
ClusterConfig SingleLocalTaskConfig(std::string source);

}  // namespace mirrored
