// SPDX-License-Identifier: Apache-2.0
// The GNU build ID of a shared library, read from its file without loading it: the exact build of
// a compiler, for the toolchain part of a fingerprint, at the cost of one open and a few reads.
#pragma once

#include <optional>
#include <string>

namespace kcache::util {

// Lowercase hex of the NT_GNU_BUILD_ID note of a 64-bit little-endian ELF file; nullopt if the
// file cannot be read, is not such an ELF file, or has no build ID.
std::optional<std::string> elf_build_id(const std::string& path);
// The same of a file already open for reading (a regular file: the caller checks).
std::optional<std::string> elf_build_id_of(int fd);

}  // namespace kcache::util
