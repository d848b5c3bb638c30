// SPDX-License-Identifier: Apache-2.0
// A whole file's bytes as a read gave them: in memory of their own (a string), or mapped from the
// file, read-only and populated at once. Reading a large entry into fresh memory faults in and
// zeroes a page for every 4 KiB, copies the file into them and unmaps them when the entry goes; a
// mapping shares the page cache's pages instead (docs/performance.md). Files::read_bytes decides
// which a file gets: only files that no one but their owner, this process's user, can cut short
// under the mapping are mapped (see there).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kcache/result.hpp"

namespace kcache::util {

class FileBytes {
public:
    FileBytes() = default;
    explicit FileBytes(std::string text) noexcept : text_(std::move(text)) {}
    // The first `size` (> 0) bytes of the open file `fd`, mapped; kIoError naming `path` if mmap
    // fails.
    static Result<FileBytes> map(int fd, std::size_t size, const std::string& path);

    FileBytes(FileBytes&& other) noexcept;
    FileBytes& operator=(FileBytes&& other) noexcept;
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    ~FileBytes();  // unmaps a mapping

    std::string_view view() const noexcept {
        return mapping_ != nullptr ? std::string_view(static_cast<const char*>(mapping_), size_)
                                   : std::string_view(text_);
    }
    bool mapped() const noexcept { return mapping_ != nullptr; }
    // The bytes as a string: moved out when held as one, copied from a mapping (which stays).
    std::string take_text() &&;

private:
    void unmap() noexcept;
    std::string text_;
    void* mapping_ = nullptr;  // or null: the bytes are text_
    std::size_t size_ = 0;     // the mapping's
};

}  // namespace kcache::util
