// mirrored's library API in one include, for your own training program
// (docs/library.md): join the job, run a function per replica, all-reduce.
//
//   #include <mirrored/mirrored.h>        // find_package(mirrored), mirrored::strategy
//   auto strategy = mirrored::MirroredStrategy::Create(config, options);
#pragma once

#include "common/cluster/tf_config_parser.h"   // ResolveTfConfig: TF_CONFIG, or one local task
#include "common/status.h"                     // Status, StatusOr, ExitCodeFor
#include "mirrored/config.h"                   // kVersion
#include "worker/data/batch_prefetcher.h"      // a replica's shard of each global batch
#include "worker/data/fashion_mnist.h"
#include "worker/model/model.h"                // layers, forward and backward on a backend
#include "worker/model/optimizer.h"
#include "worker/strategy/mirrored_strategy.h"  // MirroredStrategy, ReplicaContext, StrategyOptions
