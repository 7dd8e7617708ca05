// The per-machine cache of decompressed IDX files: hits map the shared entry,
// a changed or corrupt entry is rebuilt, concurrent readers publish one
// entry, and whatever the cache cannot do falls back to the source.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "tests/data/idx_test_util.h"
#include "worker/data/fashion_mnist.h"
#include "worker/data/idx_cache.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

class IdxCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mirrored_idx_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "src");
    options_ = {.dir = (dir_ / "cache").string(), .lock_timeout = std::chrono::seconds(10), .min_inflated_bytes = 0};
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A gzipped label-style file of n values (value i = (i * mult) % 256).
  std::vector<uint8_t> Payload(uint32_t n, uint32_t mult) {
    auto b = Header(0x801, {n});
    for (uint32_t i = 0; i < n; ++i) b.push_back(uint8_t((i * mult) % 256));
    return b;
  }
  std::string WriteSource(const std::string& name, const std::vector<uint8_t>& raw) {
    std::string p = (dir_ / "src" / name).string();
    auto gz = Gzip(raw);
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(gz.data()), std::streamsize(gz.size()));
    return p;
  }
  // Files in the cache directory whose name contains `part`.
  std::vector<std::string> CacheFiles(const std::string& part = "") {
    std::vector<std::string> out;
    if (!fs::exists(options_.dir)) return out;
    for (const auto& e : fs::directory_iterator(options_.dir)) {
      std::string n = e.path().filename().string();
      if (n.find(part) != std::string::npos) out.push_back(n);
    }
    return out;
  }
  static std::vector<uint8_t> Bytes(const IdxFile& f) { return {f.data().begin(), f.data().end()}; }

  fs::path dir_;
  IdxCacheOptions options_;
};

TEST_F(IdxCacheTest, MissPublishesEntryAndHitMapsIt) {
  auto raw = Payload(5000, 7);
  auto src = WriteSource("x-labels-idx1-ubyte.gz", raw);
  auto direct = IdxFile::Read(src);
  ASSERT_TRUE(direct.ok()) << direct.status();

  auto first = ReadIdxCached(src, options_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Bytes(*first), Bytes(*direct));
  EXPECT_TRUE(first->region()->mapped()) << "the publishing process should use the shared entry too";
  ASSERT_EQ(CacheFiles(".idx").size(), 2u);  // the entry and its lock file
  EXPECT_EQ(CacheFiles(".tmp").size(), 0u);
  EXPECT_EQ(CacheFiles("x-labels-idx1-ubyte-").size(), 2u);

  auto second = ReadIdxCached(src, options_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->region()->mapped());
  EXPECT_EQ(Bytes(*second), Bytes(*direct));
  EXPECT_EQ(second->path(), src);  // errors and names refer to the source, not the entry
}

TEST_F(IdxCacheTest, ChangedSourceGetsANewEntry) {
  auto src = WriteSource("y.gz", Payload(3000, 3));
  ASSERT_TRUE(ReadIdxCached(src, options_).ok());
  // New contents (and size): the old entry must not be served.
  auto raw2 = Payload(3001, 5);
  WriteSource("y.gz", raw2);
  auto again = ReadIdxCached(src, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Bytes(*again), std::vector<uint8_t>(raw2.begin() + 8, raw2.end()));
}

TEST_F(IdxCacheTest, AChangedSourcesOldEntryIsRemovedOthersAreKept) {
  auto entries = [&] {
    std::vector<std::string> idx;
    for (const auto& n : CacheFiles()) if (n.ends_with(".idx")) idx.push_back(n);
    std::sort(idx.begin(), idx.end());
    return idx;
  };
  auto src = WriteSource("z.gz", Payload(3000, 3));
  fs::create_directories(dir_ / "src" / "other");
  auto raw_other = Payload(2000, 11);
  auto gz = Gzip(raw_other);
  const std::string other = (dir_ / "src" / "other" / "z.gz").string();  // same base name, another source
  std::ofstream(other, std::ios::binary).write(reinterpret_cast<const char*>(gz.data()), std::streamsize(gz.size()));
  ASSERT_TRUE(ReadIdxCached(src, options_).ok());
  ASSERT_TRUE(ReadIdxCached(other, options_).ok());
  const auto before = entries();
  ASSERT_EQ(before.size(), 2u);

  WriteSource("z.gz", Payload(3001, 5));
  auto again = ReadIdxCached(src, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  const auto after = entries();
  ASSERT_EQ(after.size(), 2u) << "one entry per source";
  // The other source's entry is untouched, this source's is a new one.
  std::vector<std::string> common;
  std::set_intersection(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(common));
  ASSERT_EQ(common.size(), 1u);
  auto other_again = ReadIdxCached(other, options_);
  ASSERT_TRUE(other_again.ok());
  EXPECT_EQ(Bytes(*other_again), std::vector<uint8_t>(raw_other.begin() + 8, raw_other.end()));
  EXPECT_EQ(entries(), after) << "the other source was a hit";
  EXPECT_EQ(CacheFiles(".lock").size(), 2u) << "old versions' lock files go too";
}

TEST_F(IdxCacheTest, CorruptEntryIsRebuilt) {
  auto raw = Payload(4000, 11);
  auto src = WriteSource("z.gz", raw);
  ASSERT_TRUE(ReadIdxCached(src, options_).ok());
  std::string entry;
  for (const auto& n : CacheFiles("z-")) {
    if (n.ends_with(".idx")) entry = (fs::path(options_.dir) / n).string();
  }
  ASSERT_FALSE(entry.empty());
  fs::resize_file(entry, 100);  // truncated behind the cache's back
  auto again = ReadIdxCached(src, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Bytes(*again), std::vector<uint8_t>(raw.begin() + 8, raw.end()));
  EXPECT_EQ(fs::file_size(entry), raw.size());
}

TEST_F(IdxCacheTest, ConcurrentReadersShareOneEntry) {
  auto raw = Payload(200000, 13);
  auto src = WriteSource("c.gz", raw);
  constexpr int kReaders = 6;
  std::vector<StatusOr<IdxFile>> results(kReaders, InternalError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] { results[size_t(i)] = ReadIdxCached(src, options_); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->region()->mapped());
    EXPECT_EQ(Bytes(*r), std::vector<uint8_t>(raw.begin() + 8, raw.end()));
  }
  EXPECT_EQ(CacheFiles(".tmp").size(), 0u);
  EXPECT_EQ(CacheFiles("c-").size(), 2u);  // one entry, one lock file
}

TEST_F(IdxCacheTest, LockHeldElsewhereFallsBackWithinTheTimeout) {
  auto raw = Payload(1000, 17);
  auto src = WriteSource("l.gz", raw);
  // Learn the entry's name, then remove the entry and hold its lock as a
  // stuck process would.
  ASSERT_TRUE(ReadIdxCached(src, options_).ok());
  std::string lock;
  for (const auto& n : CacheFiles("l-")) {
    if (n.ends_with(".lock")) lock = (fs::path(options_.dir) / n).string();
    else fs::remove(fs::path(options_.dir) / n);
  }
  ASSERT_FALSE(lock.empty());
  int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  options_.lock_timeout = std::chrono::milliseconds(200);
  auto t0 = std::chrono::steady_clock::now();
  auto r = ReadIdxCached(src, options_);
  auto waited = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->region()->mapped());
  EXPECT_EQ(Bytes(*r), std::vector<uint8_t>(raw.begin() + 8, raw.end()));
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST_F(IdxCacheTest, UnusableDirectoryFallsBackToTheSource) {
  auto raw = Payload(1000, 19);
  auto src = WriteSource("u.gz", raw);
  std::ofstream(dir_ / "cache") << "a file where the directory should be";
  auto r = ReadIdxCached(src, options_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Bytes(*r), std::vector<uint8_t>(raw.begin() + 8, raw.end()));
}

TEST_F(IdxCacheTest, SmallPlainAndDisabledAreNotCached) {
  auto src = WriteSource("s.gz", Payload(100, 1));
  auto small = options_;
  small.min_inflated_bytes = 1 << 20;
  ASSERT_TRUE(ReadIdxCached(src, small).ok());
  EXPECT_TRUE(CacheFiles().empty());
  ASSERT_TRUE(ReadIdxCached(src, {.dir = ""}).ok());
  EXPECT_TRUE(CacheFiles().empty());
  auto plain = (dir_ / "src" / "plain").string();
  auto raw = Payload(100, 1);
  std::ofstream(plain, std::ios::binary).write(reinterpret_cast<const char*>(raw.data()), std::streamsize(raw.size()));
  ASSERT_TRUE(ReadIdxCached(plain, options_).ok());
  EXPECT_TRUE(CacheFiles().empty());
}

// Whether a source is cached follows its inflated size: 2 MiB of zeros
// gzip to 2 KiB, and are worth one shared copy per machine.
TEST_F(IdxCacheTest, ASmallGzipOfALargeSetIsCached) {
  auto raw = Header(0x801, {2u << 20});
  raw.resize(raw.size() + (2u << 20), 0);
  auto src = WriteSource("z.gz", raw);
  ASSERT_LT(fs::file_size(src), 1u << 20);
  auto options = options_;
  options.min_inflated_bytes = 1 << 20;
  auto r = ReadIdxCached(src, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->region()->mapped());
  EXPECT_EQ(CacheFiles(".idx").size(), 2u) << "the entry and its lock";
}

// A FIFO where the entry should be: refused at once (never a blocking open),
// and the source read instead.
TEST_F(IdxCacheTest, AFifoAsTheEntryFallsBackToTheSource) {
  auto raw = Payload(1000, 3);
  auto src = WriteSource("f.gz", raw);
  ASSERT_TRUE(ReadIdxCached(src, options_).ok());
  std::vector<std::string> entries;
  for (const auto& n : CacheFiles(".idx")) {
    if (!n.ends_with(".lock")) entries.push_back(n);
  }
  ASSERT_EQ(entries.size(), 1u);
  const fs::path entry = fs::path(options_.dir) / entries[0];
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0644), 0);
  auto r = ReadIdxCached(src, options_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Bytes(*r), std::vector<uint8_t>(raw.begin() + 8, raw.end()));
}

TEST_F(IdxCacheTest, SourceErrorsAreTheSourcesOwn) {
  auto missing = ReadIdxCached((dir_ / "src" / "missing.gz").string(), options_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.gz"), std::string::npos);
  auto gz = Gzip(Payload(1000, 1));
  gz.resize(gz.size() / 2);
  auto p = (dir_ / "src" / "cut.gz").string();
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(gz.data()), std::streamsize(gz.size()));
  auto cut = ReadIdxCached(p, options_);
  EXPECT_EQ(ExitCodeFor(cut.status()), 2);
  EXPECT_NE(cut.status().message().find("cut.gz: gzip stream is truncated"), std::string::npos) << cut.status();
  // Its header and trailer disagree, so it is read from the source
  // without touching the cache: not even a lock file.
  EXPECT_EQ(CacheFiles(".idx").size(), 0u);
}

TEST(IdxCacheDirTest, EnvironmentChoosesTheDirectory) {
  const char* env = std::getenv("MIRRORED_DATA_CACHE");
  const std::optional<std::string> saved = env ? std::optional<std::string>(env) : std::nullopt;
  ::setenv("MIRRORED_DATA_CACHE", "/some/dir", 1);
  EXPECT_EQ(IdxCacheDir(), "/some/dir");
  ::setenv("MIRRORED_DATA_CACHE", "off", 1);
  EXPECT_EQ(IdxCacheDir(), "");
  ::unsetenv("MIRRORED_DATA_CACHE");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(IdxCacheDir(), "/xdg/mirrored/datasets");
  ::unsetenv("XDG_CACHE_HOME");
  if (saved) ::setenv("MIRRORED_DATA_CACHE", saved->c_str(), 1);
}

TEST(DatasetBytesTest, BytePixelsGatherAsScaledFloats) {
  std::vector<uint8_t> px = {0, 51, 102, 153, 204, 255};
  auto region = ByteRegion::Own(px);
  Dataset d(1, 1, 2, region, region->bytes(), 1.0f / 255.0f, {4, 5, 6});
  std::vector<float> images(4);
  std::vector<int32_t> labels(2);
  std::vector<uint32_t> idx = {2, 0};
  d.Gather(idx, images.data(), labels.data());
  EXPECT_FLOAT_EQ(images[0], 204.0f / 255.0f);
  EXPECT_FLOAT_EQ(images[1], 1.0f);
  EXPECT_FLOAT_EQ(images[2], 0.0f);
  EXPECT_FLOAT_EQ(images[3], 51.0f / 255.0f);
  EXPECT_EQ(labels, (std::vector<int32_t>{6, 4}));
  Dataset head = d.Head(1);
  EXPECT_EQ(head.size(), 1u);
  EXPECT_FLOAT_EQ(head.pixel(0, 1), 51.0f / 255.0f);
  EXPECT_THROW(Dataset(1, 1, 2, region, region->bytes(), 1.0f, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace mirrored::data
