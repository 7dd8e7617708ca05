// ClusterSource: where a launcher takes its job's cluster from, as its
// command line says: TF_CONFIG (the environment, or --tf-config FILE|JSON),
// Slurm's variables (--from-slurm) or a Kubernetes Indexed Job's
// (--from-k8s-indexed-job). ResolveCluster resolves it, the one way that
// `cluster`, its --dry-run and `explain` share.
//
//   ClusterSource source{.from_slurm = true};
//   StatusOr<ClusterConfig> config = ResolveCluster(source, ProcessEnvironment());
//   for (const std::string& w : config->warnings) ...   // e.g. TF_CONFIG ignored
#pragma once

#include <optional>
#include <string>

#include "common/cluster/cluster_config.h"
#include "common/cluster/environment_map.h"
#include "common/cluster/slurm_resolver.h"
#include "common/status.h"

namespace mirrored {

struct ClusterSource {
  std::optional<std::string> tf_config = std::nullopt;  // --tf-config FILE|JSON
  bool from_slurm = false;                              // --from-slurm
  int slurm_port_base = kDefaultSlurmPortBase;          // --slurm-port-base N
  bool from_k8s_indexed_job = false;                    // --from-k8s-indexed-job
};

// The cluster and task `source` selects, from `env`: ResolveSlurmCluster,
// ResolveK8sIndexedJob, or else ResolveTfConfig (the flag's document, else
// TF_CONFIG, else a single local task), with their errors. A non-blank
// TF_CONFIG in `env` that another source overrides is named in the
// config's warnings, in case the user meant that one.
StatusOr<ClusterConfig> ResolveCluster(const ClusterSource& source, const EnvironmentMap& env);

}  // namespace mirrored
