// SPDX-License-Identifier: Apache-2.0
// Statistics that outlive the process: counters summed over every program that used one cache
// directory, kept as small text files under $DIR/stats/ for `kcache -s` to show and `-z` to zero.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kcache/result.hpp"
#include "store/cache_directory.hpp"

namespace kcache::store {

// The one list of counters, in the order the stats file, `kcache -s` and `kcache -s --json` show
// them: X(name, unit, group, label). Adding a counter is one line here, a field of the same name
// in CacheStats (counters_of() copies each by name, so a missing one fails to compile), and the
// code that counts it; the shard file, the flusher's delta, the JSON and the -s table follow.
//   name:  the stats file's, CacheStats's and the JSON's ("disk_x" as "disk": {"x"}, a "_ns"
//          counter as "_seconds"); a name never changes meaning (see kFormatVersion).
//   unit:  kCount, kNanoseconds (shown in seconds) or kBytes.
//   group: a sum that -s and the JSON show with a share of it for each member: kLookups (a lookup
//          is a hit or a miss), kTierLookups (a lookup's miss that reached the tiers is exactly one
//          of memory_hits, disk_hits, disk_misses; prebuilds are apart); kNone.
//   label: the -s table's row; empty where another row shows it as a note.
// A saved-time estimate: (memory_hits + disk_hits) lookups were served without compiling, at
// compile_ns / compiles each (a prebuild found stored saved nothing: it is not among them).
#define KCACHE_STATS_COUNTERS(X)                                                                 \
    X(hits, kCount, kLookups, "  Hits (loaded in the process):")                                 \
    X(misses, kCount, kLookups, "  Misses:")                                                     \
    X(waits, kCount, kNone, "    waited for another thread:")                                    \
    X(memory_hits, kCount, kTierLookups, "  from the memory tier:")                              \
    X(disk_hits, kCount, kTierLookups, "  from the disk tier:")                                  \
    X(disk_misses, kCount, kTierLookups, "  in neither tier:")                                   \
    X(disk_rejected, kCount, kNone, "    entries of other key material replaced:")               \
    X(compiles, kCount, kNone, "Compiles:")                                                      \
    X(compile_failures, kCount, kNone, "  failed:")                                              \
    X(prebuilds, kCount, kNone, "Prebuilds (kcache compile):")                                   \
    X(prebuild_compiles, kCount, kNone, "") /* of compiles: those of prebuilds */                \
    X(compile_ns, kNanoseconds, kNone, "Compile time spent:") /* failures included */            \
    X(evictions, kCount, kNone, "Evicted from loaded maps:")                                     \
    X(verify_failures, kCount, kNone, "Verify failures:")                                        \
    X(disk_writes, kCount, kNone, "Disk writes:")                                                \
    X(disk_errors, kCount, kNone, "  errors:")                                                   \
    X(disk_corrupt, kCount, kNone, "  corrupt entries removed:")                                 \
    X(disk_evicted, kCount, kNone, "  evicted:")                                                 \
    X(disk_evicted_bytes, kBytes, kNone, "")              /* shown with disk_evicted */          \
    X(config_errors, kCount, kNone, "Settings not used:") /* settings a process could not use */ \
    X(remote_hits, kCount, kNone, "Remote tier hits:")                                           \
    X(remote_misses, kCount, kNone, "  misses:")                                                 \
    X(remote_errors, kCount, kNone, "  errors:")                                                 \
    X(remote_timeouts, kCount, kNone, "  timeouts:")                                             \
    X(remote_skipped, kCount, kNone, "  requests skipped (server set aside):")                   \
    X(remote_corrupt, kCount, kNone, "  corrupt values:")                                        \
    X(remote_signature_rejects, kCount, kNone, "  signature rejects:")                           \
    X(remote_too_large, kCount, kNone, "  values over the size cap:")                            \
    X(remote_writes, kCount, kNone, "  writes:")                                                 \
    X(remote_writes_exists, kCount, kNone, "    already there (lost the race):")                 \
    X(remote_write_errors, kCount, kNone, "    refused:")                                        \
    X(remote_writes_dropped, kCount, kNone, "    dropped:")                                      \
    X(remote_breaker_openings, kCount, kNone, "  servers set aside:")                            \
    X(remote_lease_won, kCount, kNone, "  leases won (compiled for the fleet):")                 \
    X(remote_lease_waited, kCount, kNone, "  leases waited for:")                                \
    X(remote_lease_wait_timeouts, kCount, kNone, "    waits that ran out:")                      \
    X(remote_lease_takeovers, kCount, kNone, "  leases taken over:")                             \
    X(remote_bytes_in, kBytes, kNone, "  bytes in:")                                             \
    X(remote_bytes_out, kBytes, kNone, "  bytes out:")

enum class StatsUnit : std::uint8_t { kCount, kNanoseconds, kBytes };
enum class StatsGroup : std::uint8_t { kNone, kLookups, kTierLookups };

// Counters only (no gauges such as the number of entries): every field is a sum over processes.
struct StatsCounters {
#define KCACHE_STATS_MEMBER(name, unit, group, label) std::uint64_t name = 0;
    KCACHE_STATS_COUNTERS(KCACHE_STATS_MEMBER)
#undef KCACHE_STATS_MEMBER
    // Seconds since the Unix epoch of the last zero(); 0: never zeroed. A time, not a counter:
    // += keeps the later of the two.
    std::uint64_t zeroed_at = 0;

    StatsCounters& operator+=(const StatsCounters& other) noexcept;
    bool operator==(const StatsCounters&) const = default;
};

// One counter of KCACHE_STATS_COUNTERS, for code that lists them all (the file format, the
// flusher, the CLI).
struct StatsField {
    std::string_view name;
    std::uint64_t StatsCounters::*member;
    StatsUnit unit;
    StatsGroup group;
    std::string_view label;
};
// Every counter, zeroed_at excluded, in KCACHE_STATS_COUNTERS's order.
std::span<const StatsField> stats_fields() noexcept;
// The sum of the counters of `group` (kNone: 0).
std::uint64_t group_total(const StatsCounters& counters, StatsGroup group) noexcept;

// One shard file as read: the counters this version knows, and those of newer versions, which are
// written back untouched so that an older program does not erase a newer one's counts.
struct StatsShard {
    StatsCounters counters;
    std::vector<std::pair<std::string, std::uint64_t>> unknown;
};
// nullopt: not a stats file this program can trust. Strict on purpose: every file is written
// whole by rename, so anything malformed is damage (or not ours), and a wrong count is worse
// than a logged reset. The text is untrusted (it lives in the cache directory).
std::optional<StatsShard> parse_stats_shard(std::string_view text);
std::string format_stats_shard(const StatsShard& shard);

// How long add() waits for a shard's lock by default. A holder keeps it for one read and one
// small fsynced write (milliseconds); a second is long enough that only a stuck holder (a
// stopped process) exceeds it, and short enough that an exiting program is not held up.
inline constexpr std::chrono::milliseconds kStatsLockPatience{1000};

// The statistics of one cache directory. A value with no state of its own beyond the paths, so
// that any number of threads and processes may use copies at once: each update is a
// read-modify-write under an flock, and every file is replaced by an atomic rename, so readers
// never take a lock and never see a torn file.
//
// The counters are split over kShards files, $DIR/stats/0 … $DIR/stats/f, each with its own lock
// ($DIR/stats/<shard>.lock); a process writes the shard its pid picks and read() sums them all
// (ccache's layout). One file would do for a few programs, but an update holds its lock across an
// fsync (milliseconds, more on a busy disk), so a few hundred processes flushing once a second,
// such as the ranks of a job sharing a node's cache, would queue on one lock and time out. Sixteen
// shards divide that queue by sixteen; reading sixteen small files costs `kcache -s` well under
// a millisecond.
class PersistentStats {
public:
    static constexpr unsigned kShards = 16;
    // Version of the file format: the first line of a shard is "kcache-stats <version>". A
    // counter's name never changes meaning; new counters get new names, which older readers
    // ignore (and keep when they rewrite the file), so adding one needs no new version.
    static constexpr unsigned kFormatVersion = 1;

    // No I/O: the stats folder is created by the first add() or zero(). In a read-only
    // directory, add() and zero() fail without touching it.
    static PersistentStats at(std::shared_ptr<const CacheDirectory> directory);

    // Adds `delta` to this process's shard (zeroed_at in `delta` is ignored). kIoError when the
    // shard's lock cannot be had within `patience` or the file cannot be read or written; then
    // nothing was added and the caller may retry with the same delta. A corrupt shard is logged
    // and replaced by `delta` alone: its old counts are lost, never the directory's use.
    Result<void> add(const StatsCounters& delta,
                     std::chrono::milliseconds patience = kStatsLockPatience) const;

    // The sum of every shard, zeroed_at the latest of theirs. Missing files (a directory no
    // program has recorded anything in yet) count as zeros; so does a corrupt one, with a log
    // line. kIoError only when a shard exists but cannot be read.
    Result<StatsCounters> read() const;

    // Zeroes every shard and records now as zeroed_at. Updates racing with it land before (and
    // are zeroed) or after (and are kept). kIoError naming the first shard that could not be
    // zeroed; the others are zeroed all the same.
    Result<void> zero(std::chrono::milliseconds patience = kStatsLockPatience) const;

    // A copy that always writes `shard` (taken modulo kShards) instead of the pid's: for tests
    // that need many processes on one file and one lock.
    PersistentStats on_shard(unsigned shard) const;

    const std::string& directory() const noexcept { return directory_->path(); }
    std::string shard_path(unsigned shard) const;
    // "stats/<hex digit>" below the cache directory.
    static std::string shard_relative_path(unsigned shard);

private:
    explicit PersistentStats(std::shared_ptr<const CacheDirectory> directory)
        : directory_(std::move(directory)) {}
    unsigned my_shard() const;

    std::shared_ptr<const CacheDirectory> directory_;  // never null
    std::optional<unsigned> fixed_shard_;  // nullopt: the calling process's pid picks the shard
};

}  // namespace kcache::store
