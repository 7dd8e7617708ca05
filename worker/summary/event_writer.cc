#include "worker/summary/event_writer.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "proto/tensorboard_event.pb.h"

namespace mirrored {
namespace {

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) return InternalError("cannot create log directory " + log_dir + ": " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double now = WallTime();
  // TensorFlow's naming; the pid keeps two writers of one second apart.
  std::string path = log_dir + "/events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." +
                     host + "." + std::to_string(getpid());
  MIRRORED_ASSIGN_OR_RETURN(auto records, TfRecordWriter::Open(path));
  tensorflow::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  MIRRORED_RETURN_IF_ERROR(records->Append(version.SerializeAsString()));
  MIRRORED_RETURN_IF_ERROR(records->Flush());
  return std::unique_ptr<EventWriter>(new EventWriter(std::move(records)));
}

Status EventWriter::WriteScalar(const std::string& tag, int64_t step, float value) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return writer_->Append(event.SerializeAsString());
}

Status EventWriter::WriteSessionStart(int64_t step, const std::string& checkpoint_path) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  event.mutable_session_log()->set_status(tensorflow::SessionLog::START);
  event.mutable_session_log()->set_checkpoint_path(checkpoint_path);
  return writer_->Append(event.SerializeAsString());
}

}  // namespace mirrored
