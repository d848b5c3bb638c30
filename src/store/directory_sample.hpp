// SPDX-License-Identifier: Apache-2.0
// A writer's first look at a large cache directory: a few entry folders read and scaled up, so
// that it scans the whole directory for its budgets only when that could matter.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "kcache/result.hpp"
#include "store/cache_directory.hpp"

namespace kcache::store {

// What a writer learns of a directory without a full pass: the entries of a few of its entry
// folders, which fingerprints fill evenly, scaled up to all 256; and when a cleaner last held the
// cleanup lock (the lock's stamp).
struct DirectorySample {
    std::uint64_t sampled_files = 0;  // entries found in the folders sampled
    std::uint64_t estimated_files = 0;
    std::uint64_t estimated_bytes = 0;
    std::optional<std::chrono::system_clock::time_point> last_cleanup;  // nullopt: none seen
};
// Entry folders a sample reads: a 64th of the directory.
inline constexpr unsigned kSampledFolders = 4;
// Fewer entries than this in a sample, and the directory is small enough that a full pass is
// cheap and exact: the sample is not trusted.
inline constexpr std::uint64_t kTrustedSampleFiles = 64;

// `folders` entry folders from folder number `first` on (wrapping after ff). kIoError when the
// directory cannot be listed; a folder that is missing counts as empty.
Result<DirectorySample> sample_directory(const CacheDirectory& directory, unsigned first,
                                         unsigned folders = kSampledFolders);

// Whether a writer's first write must still scan the whole directory: when the sample is small
// (a small directory scans cheaply), when no cleaner held the lock within kStaleTemporaryAge
// (temporaries of dead writers wait for a pass), or when the estimate reaches 80% of a budget.
bool full_scan_due(const DirectorySample& sample, std::uint64_t max_bytes, std::uint64_t max_files,
                   std::chrono::system_clock::time_point now);

}  // namespace kcache::store
