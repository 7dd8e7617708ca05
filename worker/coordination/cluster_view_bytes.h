// The cluster view on the wire: RegisterResponse.view carries a serialized
// rpc::ClusterView. The service serializes a view once and answers every
// task with the same bytes (ClusterViewBytesCache); the agent parses them.
//
//   ClusterViewBytesCache cache;
//   std::shared_ptr<const std::string> bytes = cache.Get(registered.view);  // once per view
//   StatusOr<ClusterView> view = ParseClusterView(*bytes);                   // in the agent
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "worker/coordination/cluster_view.h"

namespace mirrored::coordination {

std::string SerializeClusterView(const ClusterView& view);

// Errors: InvalidArgument when the bytes are no rpc::ClusterView or do not
// make a valid view (BuildClusterView's checks).
StatusOr<ClusterView> ParseClusterView(const std::string& bytes);

// The serialization of the latest view asked for. Thread-safe. Every
// registration of a generation is answered with the same view object, so
// the job serializes its view once, not once per task.
class ClusterViewBytesCache {
 public:
  std::shared_ptr<const std::string> Get(const std::shared_ptr<const ClusterView>& view);

 private:
  std::mutex mu_;
  std::shared_ptr<const ClusterView> view_;
  std::shared_ptr<const std::string> bytes_;
};

}  // namespace mirrored::coordination
