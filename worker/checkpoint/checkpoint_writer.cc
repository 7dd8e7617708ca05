#include "worker/checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <cstring>

#include "common/crc32c.h"
#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "worker/checkpoint/evaluator_lease.h"

namespace mirrored {

// An owned copy of CheckpointContents for the background thread.
struct CheckpointWriter::Snapshot {
  std::vector<std::vector<char>> buffers;  // one per tensor, never resized after Copy
  CheckpointContents contents;             // views point into `buffers`

  // Reuses the buffers of `spare` (the previous snapshot) where it can:
  // copying into pages already mapped is several times faster than into
  // fresh ones, and this copy is the stall training sees.
  static std::unique_ptr<Snapshot> Copy(const CheckpointContents& in,
                                        std::unique_ptr<Snapshot> spare) {
    std::unique_ptr<Snapshot> s = spare ? std::move(spare) : std::make_unique<Snapshot>();
    s->contents = CheckpointContents{};
    s->contents.state = in.state;
    s->buffers.resize(in.model.size() + in.optimizer.size());
    size_t next = 0;
    auto copy = [&](const std::vector<TensorView>& from, std::vector<TensorView>* to) {
      for (const TensorView& t : from) {
        const int64_t count = ElementCount(t.shape);
        const size_t bytes = count > 0 ? static_cast<size_t>(count) * DTypeSize(t.dtype) : 0;
        std::vector<char>& buffer = s->buffers[next++];
        buffer.resize(bytes);
        if (bytes > 0 && t.data != nullptr) std::memcpy(buffer.data(), t.data, bytes);
        TensorView view = t;
        // A null source stays null so Encode() reports it.
        view.data = t.data != nullptr ? buffer.data() : nullptr;
        to->push_back(std::move(view));
      }
    };
    copy(in.model, &s->contents.model);
    copy(in.optimizer, &s->contents.optimizer);
    return s;
  }
};

CheckpointWriter::CheckpointWriter(FileEnv* env, std::string run_dir,
                                   CheckpointWriterOptions options)
    : env_(env), run_dir_(std::move(run_dir)), options_(options) {}

CheckpointWriter::~CheckpointWriter() {
  Status s = Wait(options_.wait_timeout);
  if (!s.ok()) {
    MIRRORED_LOG(ERROR) << "checkpoint writer shut down with an unreported error: " << s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  // The background thread finishes its current write before it sees
  // shutdown_; Wait() above bounded that unless it timed out.
  if (thread_.joinable()) thread_.join();
}

Status CheckpointWriter::WaitIdleLocked(std::unique_lock<std::mutex>& lock,
                                        std::chrono::milliseconds timeout) {
  const bool idle = cv_.wait_for(lock, timeout, [&] { return !busy_ && pending_ == nullptr; });
  if (!idle) {
    return DeadlineExceededError(
        "the previous checkpoint write (" +
        (busy_step_ ? CheckpointDirName(*busy_step_) : std::string("queued")) + " in " +
        CheckpointsDir(run_dir_) + ") did not finish within " + std::to_string(timeout.count()) +
        " ms; check the run directory's file system");
  }
  return TakeUnreportedLocked();
}

Status CheckpointWriter::TakeUnreportedLocked() {
  Status error = std::move(unreported_);
  unreported_ = OkStatus();
  return error;
}

Status CheckpointWriter::Wait() { return Wait(options_.wait_timeout); }

Status CheckpointWriter::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return WaitIdleLocked(lock, timeout);
}

Status CheckpointWriter::TakeFailure() {
  std::lock_guard<std::mutex> lock(mu_);
  return TakeUnreportedLocked();
}

Status CheckpointWriter::Write(const CheckpointContents& contents) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    MIRRORED_RETURN_IF_ERROR(WaitIdleLocked(lock, options_.wait_timeout));
    busy_ = true;
    busy_step_ = contents.state.step;
  }
  Status s = WriteNow(contents);
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    busy_step_.reset();
  }
  cv_.notify_all();
  return s;
}

Status CheckpointWriter::WriteAsync(const CheckpointContents& contents) {
  std::unique_lock<std::mutex> lock(mu_);
  MIRRORED_RETURN_IF_ERROR(WaitIdleLocked(lock, options_.wait_timeout));
  // Copied under the lock: the background thread is idle, so this holds
  // nobody up but the caller, and at most one snapshot exists.
  pending_ = Snapshot::Copy(contents, std::move(spare_));
  if (!thread_.joinable()) thread_ = std::thread([this] { BackgroundLoop(); });
  lock.unlock();
  cv_.notify_all();
  return OkStatus();
}

void CheckpointWriter::BackgroundLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // No deadline needed: the destructor sets shutdown_ and notifies.
    cv_.wait(lock, [&] { return shutdown_ || pending_ != nullptr; });
    if (pending_ == nullptr) return;  // shutdown with nothing queued
    std::unique_ptr<Snapshot> snapshot = std::move(pending_);
    busy_ = true;
    busy_step_ = snapshot->contents.state.step;
    lock.unlock();
    Status s = WriteNow(snapshot->contents);
    lock.lock();
    spare_ = std::move(snapshot);
    // Not logged here: the next Write, WriteAsync or Wait returns it, and
    // the task's exit line says it (a line here made one more copy of a
    // full disk's message); the destructor logs one nobody collected.
    if (!s.ok() && unreported_.ok()) unreported_ = s;
    busy_ = false;
    busy_step_.reset();
    cv_.notify_all();
  }
}

CheckpointState::FileDigest CheckpointWriter::Digest(const SafetensorsFile::Encoded& encoded) {
  CheckpointState::FileDigest d;
  d.crc32c = Crc32cExtend(0, encoded.header.data(), encoded.header.size());
  d.bytes = encoded.header.size();
  for (std::string_view piece : encoded.pieces) {
    d.crc32c = Crc32cExtend(d.crc32c, piece.data(), piece.size());
    d.bytes += piece.size();
  }
  return d;
}

Status CheckpointWriter::WriteFile(const std::string& path,
                                   const SafetensorsFile::Encoded& encoded) {
  MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env_->NewWritableFile(path));
  MIRRORED_RETURN_IF_ERROR(file->Append(encoded.header));
  for (std::string_view piece : encoded.pieces) {
    if (!piece.empty()) MIRRORED_RETURN_IF_ERROR(file->Append(piece));
  }
  MIRRORED_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

Status CheckpointWriter::RemoveStrayTempEntries() {
  const std::string dir = CheckpointsDir(run_dir_);
  MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir));
  for (const std::string& name : names) {
    if (!name.starts_with(kTempPrefix)) continue;
    MIRRORED_LOG(INFO) << "removing " << JoinPath(dir, name)
                       << ", left by an interrupted checkpoint write";
    MIRRORED_RETURN_IF_ERROR(env_->RemoveTree(JoinPath(dir, name)));
  }
  return OkStatus();
}

struct CheckpointWriter::EncodedCheckpoint {
  SafetensorsFile::Encoded model;
  SafetensorsFile::Encoded optimizer;
  std::string state_json;  // the state with both files' digests
};

StatusOr<CheckpointWriter::EncodedCheckpoint> CheckpointWriter::Encode(const CheckpointContents& contents,
                                                                       const std::string& context) {
  const int64_t step = contents.state.step;
  auto model = SafetensorsFile::Encode(contents.model,
                                       {{"format", "mirrored"}, {"step", std::to_string(step)}});
  if (!model.ok()) return model.status().WithContext(context + " (" + kModelFileName + ")");
  auto optimizer = SafetensorsFile::Encode(
      contents.optimizer, {{"format", "mirrored"}, {"step", std::to_string(step)}});
  if (!optimizer.ok())
    return optimizer.status().WithContext(context + " (" + kOptimizerFileName + ")");
  CheckpointState state = contents.state;
  state.files[kModelFileName] = Digest(*model);
  state.files[kOptimizerFileName] = Digest(*optimizer);
  return EncodedCheckpoint{.model = std::move(model).value(),
                           .optimizer = std::move(optimizer).value(),
                           .state_json = state.ToJsonText()};
}

Status CheckpointWriter::WriteNow(const CheckpointContents& contents) {
  const int64_t step = contents.state.step;
  const std::string name = CheckpointDirName(step);
  const std::string dir = CheckpointsDir(run_dir_);
  const std::string context = "writing checkpoint " + JoinPath(dir, name);
  if (options_.keep_checkpoints < 1) {
    return InvalidArgumentError(context + ": --keep-checkpoints must be at least 1, got " +
                                std::to_string(options_.keep_checkpoints));
  }
  MIRRORED_RETURN_IF_ERROR(contents.state.Validate().WithContext(context));
  MIRRORED_ASSIGN_OR_RETURN(const EncodedCheckpoint files, Encode(contents, context));
  const std::string& state_json = files.state_json;
  const auto start = std::chrono::steady_clock::now();

  if (!env_->FileExists(dir)) {
    MIRRORED_RETURN_IF_ERROR(CreateDirIfMissing(env_, run_dir_).WithContext(context));
    MIRRORED_RETURN_IF_ERROR(CreateDirIfMissing(env_, dir).WithContext(context));
    MIRRORED_RETURN_IF_ERROR(env_->SyncDir(run_dir_).WithContext(context));
  }
  if (!cleaned_temp_entries_) {
    MIRRORED_RETURN_IF_ERROR(RemoveStrayTempEntries().WithContext(context));
    cleaned_temp_entries_ = true;
  }

  const std::string temp = JoinPath(dir, std::string(kTempPrefix) + name + "-" + RandomHexSuffix());
  const std::string final_dir = JoinPath(dir, name);
  std::string replaced;  // an older ckpt-<step> moved aside (a job that redoes a step)
  Status s = [&]() -> Status {
    MIRRORED_RETURN_IF_ERROR(env_->CreateDir(temp));
    MIRRORED_RETURN_IF_ERROR(WriteFile(JoinPath(temp, kModelFileName), files.model));
    MIRRORED_RETURN_IF_ERROR(WriteFile(JoinPath(temp, kOptimizerFileName), files.optimizer));
    {
      MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f,
                                env_->NewWritableFile(JoinPath(temp, kStateFileName)));
      MIRRORED_RETURN_IF_ERROR(f->Append(state_json));
      MIRRORED_RETURN_IF_ERROR(f->Sync());
      MIRRORED_RETURN_IF_ERROR(f->Close());
    }
    MIRRORED_RETURN_IF_ERROR(env_->SyncDir(temp));
    // A job redoing a step (e.g. the final checkpoint right after a resume)
    // replaces ckpt-<step> whole, so it is always one complete version;
    // without RENAME_EXCHANGE (e.g. NFS) readers fall back to the previous
    // step's checkpoint for a moment.
    MIRRORED_ASSIGN_OR_RETURN(replaced, PublishDirectory(env_, dir, temp, name,
                                                         std::string(kTempPrefix) + "replaced-" + name + "-"));
    if (!replaced.empty()) MIRRORED_LOG(WARNING) << final_dir << " existed already; replaced it";
    return OkStatus();
  }();
  if (!s.ok()) {
    // Best effort (the next writer retries). After a failed SyncDir following
    // an exchange, `temp` holds the old version and ckpt-<step> the new one.
    if (env_->FileExists(temp)) (void)env_->RemoveTree(temp);
    return s.WithContext(context);
  }
  if (!replaced.empty()) (void)env_->RemoveTree(replaced);
  MIRRORED_RETURN_IF_ERROR(UpdateIndexAndPrune(step).WithContext(context));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MIRRORED_LOG(INFO) << "wrote checkpoint " << final_dir << " ("
                     << (files.model.total_size + files.optimizer.total_size + state_json.size())
                     << " bytes, " << seconds << " s)";
  return OkStatus();
}

std::vector<int64_t> CheckpointWriter::PrunedList(int64_t step, const std::vector<int64_t>& kept,
                                                  const std::vector<int64_t>& doomed) {
  if (!pruned_) {
    pruned_.emplace();
    if (StatusOr<CheckpointIndex> old = CheckpointIndex::Read(env_, run_dir_); old.ok()) {
      for (int64_t p : old->pruned)
        if (p <= options_.start_step) pruned_->push_back(p);
    }
  }
  written_.insert(step);
  std::vector<int64_t> list = *pruned_;
  // Only this run's checkpoints: those up to the step it started from, and
  // those it wrote. A later one is an earlier run's that this run replaces
  // (it resumed from before it), not one pruned from this run. A deletion
  // that failed is retried by the next write: listed once.
  for (int64_t d : doomed)
    if (d <= options_.start_step || written_.count(d) > 0) list.push_back(d);
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  // Never both kept and pruned (a step written again, or kept this time).
  std::erase_if(list, [&](int64_t p) { return std::binary_search(kept.begin(), kept.end(), p); });
  if (list.size() > kMaxPrunedListed) list.erase(list.begin(), list.end() - kMaxPrunedListed);
  return list;
}

Status CheckpointWriter::UpdateIndexAndPrune(int64_t step) {
  const std::string dir = CheckpointsDir(run_dir_);
  MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir));
  std::vector<int64_t> others;
  for (const std::string& n : names) {
    std::optional<int64_t> s = ParseCheckpointDirName(n);
    if (s && *s != step) others.push_back(*s);
  }
  std::sort(others.rbegin(), others.rend());  // newest first
  EvaluatorLease::State lease;
  bool prune = true;
  if (StatusOr<EvaluatorLease::State> read = EvaluatorLease::Read(env_, run_dir_); read.ok()) {
    lease = *read;
    // Progress made under an earlier start went past where this run began:
    // those checkpoints were lost, and this run's are not evaluated yet.
    if (!options_.start_run.empty() && lease.start_run != options_.start_run && lease.last_evaluated_step &&
        *lease.last_evaluated_step > options_.start_step) {
      lease.last_evaluated_step = options_.start_step;
    }
  } else {
    MIRRORED_LOG(WARNING) << "not pruning old checkpoints: cannot read the evaluator's lease: "
                          << read.status();
    prune = false;
  }
  CheckpointIndex index;
  index.latest = step;
  index.kept.push_back(step);
  std::vector<int64_t> doomed;
  const size_t keep = static_cast<size_t>(options_.keep_checkpoints);
  for (size_t i = 0; i < others.size(); ++i) {
    // `others` is newest first; with the one just written, the newest K are
    // kept, and for a following evaluator its backlog among the newest 2K.
    const bool kept = !prune || i + 1 < keep || others[i] == lease.reading ||
                      (i + 1 < 2 * keep && lease.Protects(others[i]));
    (kept ? index.kept : doomed).push_back(others[i]);
    if (!kept && lease.Protects(others[i])) {
      // Once per writer: a dead evaluator would otherwise be reported at
      // every checkpoint.
      if (!warned_evaluator_behind_) {
        MIRRORED_LOG(WARNING)
            << "pruning " << CheckpointDirName(others[i])
            << " before the evaluator evaluated it: it is more than " << 2 * keep
            << " checkpoints behind (2 x --keep-checkpoints " << keep << "; its last evaluated step: "
            << (lease.last_evaluated_step ? std::to_string(*lease.last_evaluated_step) : std::string("none"))
            << "). If no evaluator runs any more, one ended without releasing its lease: delete "
            << JoinPath(dir, kEvalLeaseFileName) << " (this warning is not repeated)";
        warned_evaluator_behind_ = true;
      }
    }
  }
  std::sort(index.kept.begin(), index.kept.end());
  index.pruned = PrunedList(step, index.kept, doomed);
  // The index first: a crash after it leaves extra directories, which the
  // next write prunes, never an index naming a deleted checkpoint.
  MIRRORED_RETURN_IF_ERROR(index.Write(env_, run_dir_));
  pruned_ = index.pruned;
  for (int64_t old : doomed) {
    const std::string from = JoinPath(dir, CheckpointDirName(old));
    const std::string aside = JoinPath(dir, std::string(kTempPrefix) + "deleting-" +
                                                CheckpointDirName(old) + "-" + RandomHexSuffix());
    Status s = env_->Rename(from, aside);
    if (s.ok()) s = env_->RemoveTree(aside);
    // Not the checkpoint's failure: the next write retries the pruning.
    if (!s.ok()) {
      MIRRORED_LOG(WARNING) << "could not prune old checkpoint " << from << ": " << s;
    }
  }
  return OkStatus();
}

}  // namespace mirrored
