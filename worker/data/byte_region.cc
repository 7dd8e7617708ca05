#include "worker/data/byte_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mirrored::data {

std::shared_ptr<const ByteRegion> ByteRegion::Own(std::vector<uint8_t> bytes) {
  std::shared_ptr<ByteRegion> r(new ByteRegion());
  r->owned_ = std::move(bytes);
  r->data_ = r->owned_.data();
  r->size_ = r->owned_.size();
  return r;
}

StatusOr<std::shared_ptr<const ByteRegion>> ByteRegion::MapFile(const std::string& path, bool populate) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
  // blocking until a writer comes; regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError(path + ": no such file");
    return NotFoundError(path + ": cannot open (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file");
  }
  std::shared_ptr<ByteRegion> r(new ByteRegion());
  r->size_ = static_cast<size_t>(st.st_size);
  if (r->size_ > 0) {
    void* p = ::mmap(nullptr, r->size_, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return InvalidArgumentError(path + ": cannot map (" + std::strerror(err) + ")");
    }
    r->mapping_ = p;
    r->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const ByteRegion>(std::move(r));
}

ByteRegion::~ByteRegion() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace mirrored::data
