// SPDX-License-Identifier: Apache-2.0
#include "util/file_bytes.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <utility>

#include "util/files.hpp"

namespace kcache::util {

Result<FileBytes> FileBytes::map(int fd, std::size_t size, const std::string& path) {
    // MAP_POPULATE: the page cache's pages are mapped in one call rather than a fault each; the
    // checksum reads them all at once anyway.
    void* at = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (at == MAP_FAILED) return io_error("map", path, errno);
    FileBytes bytes;
    bytes.mapping_ = at;
    bytes.size_ = size;
    return bytes;
}

FileBytes::FileBytes(FileBytes&& other) noexcept
    : text_(std::move(other.text_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
    if (this != &other) {
        unmap();
        text_ = std::move(other.text_);
        mapping_ = std::exchange(other.mapping_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

FileBytes::~FileBytes() {
    unmap();
}

std::string FileBytes::take_text() && {
    if (mapping_ != nullptr) return std::string(view());
    return std::move(text_);
}

void FileBytes::unmap() noexcept {
    if (mapping_ != nullptr) munmap(mapping_, size_);
    mapping_ = nullptr;
    size_ = 0;
}

}  // namespace kcache::util
