// SPDX-License-Identifier: Apache-2.0
// Keeps a disk cache directory within its budgets: removes the least recently used entries (by
// their mtime, kcache's own recency stamp), temporary files left by writers that died, and lock
// files nobody needs any more. One process cleans a directory at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kcache/result.hpp"
#include "store/cache_directory.hpp"

namespace kcache::store {

// Once a budget is exceeded, entries are removed down to this share of each budget, so that the
// next writes do not trigger another cleanup at once.
inline constexpr std::uint64_t kLowWaterPercent = 90;
// A temporary file (`<entry>.kc.tmp.<host>.<pid>.<random>`) this old belongs to a writer that
// died: a live one renames or removes its temporary moments after creating it.
inline constexpr std::chrono::hours kStaleTemporaryAge{1};
// A record of the key index (keys/ab/cd…, store/key_index.hpp) this old is dropped: it only
// serves to explain a miss, and a key unused this long has no nearest entry worth naming.
inline constexpr std::chrono::hours kStaleIndexRecordAge{24 * 30};
// Taken, never waited for, by the process that cleans; it lies beside the entry folders.
inline constexpr const char* kCleanupLockName = "cleanup.lock";
// The settings file a cache directory may hold, which a cleanup keeps.
inline constexpr std::string_view kConfigFileName = "kcache.conf";

// Lowercase hex digits only, at least one: fingerprints and the folder names made from them.
inline bool is_hex(std::string_view text) {
    return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The entry folders are named by a fingerprint's first byte. Anything else at the top of the
// directory (a config file, statistics, the key index) is not the cleaner's business.
inline bool is_entry_folder(std::string_view name) {
    return name.size() == 2 && is_hex(name);
}

// `percent` of `budget` without overflowing for budgets near the top of the range.
inline std::uint64_t share_of(std::uint64_t budget, std::uint64_t percent) {
    return budget / 100 * percent + budget % 100 * percent / 100;
}

struct CleanupRequest {
    std::uint64_t max_bytes = 0;  // bytes of entries; 0: no byte budget
    std::uint64_t max_files = 0;  // number of entries; 0: no file budget
    // Removes every entry whose stamp is older than this, whatever the budgets say.
    std::optional<std::chrono::seconds> evict_older_than;
    // Removes every entry, whatever its stamp (`kcache -C`; a stamp may lie in the future).
    bool all_entries = false;
    // Removes every temporary file, however young (`kcache -C`): a writer at work then fails its
    // rename, counted, and its kernel is compiled again at the next miss.
    bool all_temporaries = false;
    // Counts what would be removed and removes nothing.
    bool dry_run = false;
};

// Files and bytes count entries (`*.kc`) only; temporary and lock files are counted apart. In a
// dry run, the removals and the "after" figures are what a real run would have done.
struct CleanupReport {
    // false: another process holds the cleanup lock, so this one looked at nothing.
    bool ran = false;
    bool dry_run = false;
    std::uint64_t files_before = 0;
    std::uint64_t bytes_before = 0;
    std::uint64_t files_after = 0;
    std::uint64_t bytes_after = 0;
    std::uint64_t entries_removed = 0;
    std::uint64_t bytes_removed = 0;
    std::uint64_t temps_swept = 0;
    std::uint64_t locks_removed = 0;
    std::uint64_t index_records_removed = 0;  // keys/ records of the miss explanations
    // What stood at one of kcache's names but was not what kcache puts there (a FIFO or a folder
    // at an entry's name, a link at an entry folder's, `stats` or `keys`): removed, the link
    // itself and never what it points to, so that the name works again.
    std::uint64_t strays_removed = 0;
    // Files that could not be looked at or removed (each logged); the pass goes on without them.
    std::uint64_t errors = 0;
};

// One pass over `directory`. Only its two-hex-digit folders (`ab/`) and, in them, names made of
// a hex stem and `.kc`, `.kc.tmp.*` or `.kc.lock` are kcache's: anything else is left alone.
// Nothing is followed out of the directory. Skipped (ran == false) when another process is
// cleaning. kIoError when the directory cannot be listed or the cleanup lock cannot be opened.
Result<CleanupReport> clean_directory(const CacheDirectory& directory,
                                      const CleanupRequest& request);

// The temporary files of the directory's other atomic writes (kcache.conf's at the top, the
// statistics shards' in stats/): (relative path, status) of each, links and all. `top` is the
// listing of the directory itself, which the caller has made.
std::vector<std::pair<std::string, util::FileStatus>> other_temporaries(
    const CacheDirectory& directory, const std::vector<std::string>& top);

// What a name inside an entry folder is: `<hex>.kc`, `<hex>.kc.tmp.<host>.<pid>.<random>` (see
// util::Files::write_atomic) or `<hex>.kc.lock` (DiskStore::lock).
enum class NameKind { kEntry, kTemporary, kLock, kForeign };
NameKind classify(std::string_view name);

}  // namespace kcache::store
