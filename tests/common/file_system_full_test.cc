#include "common/file_system_full.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace mirrored {
namespace {

TEST(FileSystemFullTest, NamesTheDirectoryTheErrnoAndTheSpaceLeft) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string text = FileSystemFullText(dir + "/no-such-dir/ckpt-10/model.safetensors", ENOSPC);
  // The nearest directory that exists, where statvfs can tell the space.
  EXPECT_NE(text.find("the file system holding " + dir + " is full (No space left on device; "), std::string::npos)
      << text;
  EXPECT_NE(text.find(" free of "), std::string::npos) << text;
  EXPECT_NE(text.find("): free space there, or use another --run-dir"), std::string::npos) << text;
  // Not a temporary directory (gone by the time it is read).
  std::filesystem::create_directories(dir + "/mirrored-fs-full-" + std::to_string(getpid()) + "/.tmp-ckpt-10-ab");
  const std::string named = dir + "/mirrored-fs-full-" + std::to_string(getpid());
  EXPECT_NE(FileSystemFullText(named + "/.tmp-ckpt-10-ab/model.safetensors", ENOSPC)
                .find("the file system holding " + named + " is full ("),
            std::string::npos);
  std::filesystem::remove_all(named);
  EXPECT_TRUE(IsFileSystemFull(ENOSPC));
  EXPECT_TRUE(IsFileSystemFull(EDQUOT));
  EXPECT_FALSE(IsFileSystemFull(EIO));
  EXPECT_NE(FileSystemFullText(dir + "/x", EDQUOT).find("the disk quota for " + dir + " is used up ("),
            std::string::npos);
}

TEST(FileSystemFullTest, TheLaunchersReportFindsItInAnErrorLine) {
  const std::string full = FileSystemFullText("/tmp/r/metrics.jsonl", ENOSPC);
  auto found = FileSystemFullIn("mirrored-worker: worker:0: error: cannot append to /tmp/r/metrics.jsonl: " + full);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found + ": free space there, or use another --run-dir", full);
  EXPECT_FALSE(FileSystemFullIn("mirrored-worker: worker:0: error: write /x: Input/output error").has_value());
}

TEST(FileSystemFullTest, ByteSizes) {
  EXPECT_EQ(ByteSizeText(0), "0 bytes");
  EXPECT_EQ(ByteSizeText(1), "1 byte");
  EXPECT_EQ(ByteSizeText(12 * 1024 + 100), "12 KiB");
  EXPECT_EQ(ByteSizeText(2 * 1024 * 1024), "2.0 MiB");
  EXPECT_EQ(ByteSizeText(3ull * 1024 * 1024 * 1024 + 400ull * 1024 * 1024), "3.4 GiB");
}

}  // namespace
}  // namespace mirrored
