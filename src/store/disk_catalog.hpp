// SPDX-License-Identifier: Apache-2.0
// What a disk cache directory holds, for people: every entry with its size, stamps and key
// material (`kcache ls`, `kcache inspect`), and a check of every entry's checksum and structure
// (`kcache verify`). Read-only unless asked to repair.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"

namespace kcache::store {

struct CatalogEntry {
    std::string fingerprint;  // 32 hex digits: the folder name and the file's stem
    std::string path;
    std::uint64_t size = 0;
    std::chrono::system_clock::time_point last_used;               // kcache's recency stamp (mtime)
    std::optional<std::chrono::system_clock::time_point> created;  // where the file system says
    PayloadKind kind = PayloadKind::kCubin;
    KeyMaterial key;
    // The kernels its code defines: the key material's names where it has them, else those the
    // cubin's symbol table marks as kernels (CUDA C++ compiled without name expressions).
    std::vector<std::string> kernels;
    std::string problem;  // empty: the entry decodes; else why it does not (key is then empty)
};

// The kernels of a cubin, sorted: the functions its ELF symbol table marks as CUDA entries.
// Empty if it is not a well-formed ELF image.
std::vector<std::string> cubin_kernel_names(std::string_view cubin);

// Every entry (`ab/cdef….kc`) of `directory`, sorted by fingerprint. Entries that do not decode
// are listed with their problem. kIoError if the directory cannot be listed.
Result<std::vector<CatalogEntry>> list_entries(const CacheDirectory& directory);

// The entry whose fingerprint is `fingerprint` or starts with it (at least 4 hex digits, like a
// git hash). kInvalidArgument if the prefix is ambiguous or too short, kIoError if none matches.
Result<CatalogEntry> find_entry(const CacheDirectory& directory, const std::string& fingerprint);
// kInvalidArgument unless `fingerprint` is 4 to 32 lowercase hex digits, as find_entry wants.
Result<void> check_fingerprint_prefix(const std::string& fingerprint);

struct DirectorySize {
    std::uint64_t entries = 0;
    std::uint64_t bytes = 0;
    // Temporary files (`*.kc.tmp.*`): of writers at work, or left by writers that died (the
    // cleanup sweeps those older than kStaleTemporaryAge; `kcache -C` removes them all).
    std::uint64_t temporaries = 0;
    std::uint64_t temporary_bytes = 0;
    // Things at kcache's names that are not what it keeps there (see CleanupReport::strays).
    std::uint64_t strays = 0;
};

// Entries and their bytes, from file sizes alone (no entry is read): for `kcache -s`.
Result<DirectorySize> measure_directory(const CacheDirectory& directory);

struct VerifyReport {
    std::uint64_t checked = 0;
    std::uint64_t bad = 0;
    std::uint64_t removed = 0;
    std::vector<std::string> problems;  // "<path>: <why>", one per bad entry
};

// Decodes every entry (checksum, structure, and that its file name is the fingerprint its
// key material was stored under would need the compiler: not checked here). With `repair`,
// removes the bad ones. `checking`, where given, is told of each entry before it is read (its
// path, its index among `total`), for a progress bar.
using VerifyObserver =
    std::function<void(const std::string& path, std::size_t index, std::size_t total)>;
Result<VerifyReport> verify_entries(const CacheDirectory& directory, bool repair,
                                    const VerifyObserver& checking = {});

}  // namespace kcache::store
