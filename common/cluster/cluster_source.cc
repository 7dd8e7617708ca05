#include "common/cluster/cluster_source.h"

#include "common/cluster/k8s_indexed_job_resolver.h"
#include "common/cluster/tf_config_parser.h"

namespace mirrored {
namespace {

// The flag that chose a source other than TF_CONFIG in the environment.
std::string FlagOf(const ClusterSource& source) {
  return source.from_slurm             ? "--from-slurm"
         : source.from_k8s_indexed_job ? "--from-k8s-indexed-job"
                                       : "--tf-config";
}

}  // namespace

StatusOr<ClusterConfig> ResolveCluster(const ClusterSource& source, const EnvironmentMap& env) {
  StatusOr<ClusterConfig> config = source.from_slurm            ? ResolveSlurmCluster(env, source.slurm_port_base)
                                   : source.from_k8s_indexed_job ? ResolveK8sIndexedJob(env)
                                                                 : ResolveTfConfig(source.tf_config, env);
  const std::optional<std::string> environment = Lookup(env, "TF_CONFIG");
  const bool other_source = source.from_slurm || source.from_k8s_indexed_job || source.tf_config.has_value();
  if (config.ok() && other_source && environment &&
      environment->find_first_not_of(" \t\r\n") != std::string::npos) {
    config->warnings.push_back("the TF_CONFIG environment variable is ignored: the cluster comes from " +
                               FlagOf(source));
  }
  return config;
}

}  // namespace mirrored
