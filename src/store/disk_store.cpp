// SPDX-License-Identifier: Apache-2.0
#include "store/disk_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "store/directory_sample.hpp"
#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::store {
namespace {

// A store scans again once it has written this share of a budget (1/10): often enough that the
// directory stays near its budget, rarely enough that writes do not pay for a scan each.
constexpr std::uint64_t kScanIntervalDivisor = 10;

std::uint64_t scan_interval(std::uint64_t budget) {
    return std::max<std::uint64_t>(1, budget / kScanIntervalDivisor);
}

}  // namespace

Result<std::string> default_directory() {
    // The one rule for the directory; the configuration (cache/settings_table) asks it too.
    if (auto value = util::env_string("KCACHE_DIR")) return *value;
    if (auto xdg = util::env_string("XDG_CACHE_HOME")) return *xdg + "/kcache";
    if (auto home = util::env_string("HOME")) return *home + "/.cache/kcache";
    return Error(Errc::kIoError,
                 "no cache directory: set KCACHE_DIR (neither XDG_CACHE_HOME nor HOME is set)");
}

Result<std::unique_ptr<DiskStore>> DiskStore::open(const DiskOptions& options) {
    std::string directory = options.directory;
    if (directory.empty()) {
        auto found = default_directory();
        if (!found) return found.error();
        directory = *found;
    }
    util::Files& files = options.files != nullptr ? *options.files : util::real_files();
    DirectoryPolicy policy;
    policy.allow_shared = options.allow_shared_directory;
    policy.read_only = options.read_only;
    auto opened = CacheDirectory::open(std::move(directory), policy, files);
    if (!opened) return opened.error();
    return over(std::move(*opened), options.max_bytes, options.max_files);
}

std::unique_ptr<DiskStore> DiskStore::over(std::shared_ptr<CacheDirectory> directory,
                                           std::uint64_t max_bytes, std::uint64_t max_files) {
    return std::unique_ptr<DiskStore>(new DiskStore(std::move(directory), max_bytes, max_files));
}

std::string DiskStore::relative_path_of(const util::Fingerprint& fingerprint) {
    // Appended into one reserved string: every disk lookup names its file, and a chain of
    // concatenations was several allocations per lookup in a warm start's count.
    const std::string hex = fingerprint.hex();
    std::string path;
    path.reserve(hex.size() + 4);
    path.append(hex, 0, 2).append("/").append(hex, 2).append(".kc");
    return path;
}

std::string DiskStore::path_of(const util::Fingerprint& fingerprint) const {
    return directory_->path_of(relative_path_of(fingerprint));
}

std::optional<util::FileLock> DiskStore::lock(const util::Fingerprint& fingerprint,
                                              std::chrono::milliseconds patience) {
    return directory_->lock(relative_path_of(fingerprint) + ".lock", patience);
}

std::shared_ptr<const VerifiedArtifact> DiskStore::get(const util::Fingerprint& fingerprint,
                                                       Reading reading) {
    const bool lookup = reading == Reading::kLookup;
    const std::string relative = relative_path_of(fingerprint);
    // Read and, if bad, removed below the same directory: one replaced meanwhile keeps its
    // good entry of the same name.
    const util::OpenDirectory& held = directory_->held();
    util::Files& files = directory_->files();
    // Reading refreshes the recency stamp that eviction goes by, when it is older than the
    // granularity LRU needs: a hot entry is then stamped once in a while, not on every hit.
    auto bytes = files.read_bytes(held, relative, kMaxEntryBytes,
                                  directory_->read_only() ? util::kNeverStamp : kStampGranularity,
                                  directory_->writers(), kMapEntryFrom);
    if (!bytes && bytes.error().code() != Errc::kCorruptEntry) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        util::warn_once("disk-read:" + directory_->path(),
                        "disk read failed (a miss): " + bytes.error().message());
    }
    if (bytes && !*bytes) {
        if (lookup) misses_.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
    }
    // Decoded in place: the file's bytes become the entry's, payload included.
    auto entry = bytes ? VerifiedArtifact::decode(std::move(**bytes))
                       : Result<std::shared_ptr<const VerifiedArtifact>>(bytes.error());
    if (!entry) {
        if (lookup) misses_.fetch_add(1, std::memory_order_relaxed);
        if (entry.error().code() != Errc::kCorruptEntry) return nullptr;  // I/O, counted above
        // Not an entry (it failed its checks, or is no regular file of a plausible size): a miss,
        // counted, and removed so that the next write can put a good one in its place.
        corrupt_.fetch_add(1, std::memory_order_relaxed);
        const std::string why = entry.error().message();
        if (directory_->read_only()) {
            util::log_line(util::LogLevel::kInfo, held.path_of(relative) + ": " + why);
            return nullptr;
        }
        // A folder at the name is left to the cleaner: a lookup removes files, never trees.
        auto removed = files.remove(held, relative);
        util::log_line(util::LogLevel::kInfo,
                       held.path_of(relative) + ": " + why +
                           (removed ? "; removed" : "; left to the cleanup"));
        if (!removed && removed.error().code() != Errc::kInvalidArgument) {
            errors_.fetch_add(1, std::memory_order_relaxed);
        }
        return nullptr;
    }
    if (lookup) hits_.fetch_add(1, std::memory_order_relaxed);
    return std::move(entry).value();
}

Result<void> DiskStore::put(const util::Fingerprint& fingerprint, const Artifact& entry,
                            Cleaning cleaning) {
    if (directory_->read_only()) return directory_->read_only_error();
    return put_encoded(fingerprint, encode(entry), cleaning);
}

Result<void> DiskStore::put_encoded(const util::Fingerprint& fingerprint, std::string_view bytes,
                                    Cleaning cleaning) {
    if (directory_->read_only()) return directory_->read_only_error();
    const std::string relative = relative_path_of(fingerprint);
    auto written = directory_->write_atomic(relative, bytes);
    // A write follows a compile, so a stat here is cheap beside it; a hit never pays it. Checked
    // whether the write worked or not: a directory that cannot be written still gets lookups. A
    // directory removed under the process (an rm -rf) is made again, as the first write made it.
    if (directory_->check_replaced(/*make=*/!written)) {
        util::log_line(util::LogLevel::kInfo, "cache directory " + directory_->path() +
                                                  " was replaced since it was opened; using the "
                                                  "new one");
        if (!written) written = directory_->write_atomic(relative, bytes);
    }
    if (!written) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        util::warn_once("disk-write:" + directory_->path(),
                        "disk write failed (kept in memory only): " + written.error().message());
        return written;
    }
    writes_.fetch_add(1, std::memory_order_relaxed);
    if (cleanup_due(bytes.size())) {
        if (cleaning == Cleaning::kDeferred) {
            cleanup_pending_.store(true, std::memory_order_relaxed);
        } else {
            run_due_cleanup();
        }
    }
    return ok();
}

void DiskStore::run_pending_cleanup() {
    if (cleanup_pending_.exchange(false, std::memory_order_relaxed)) run_due_cleanup();
}

bool DiskStore::cleanup_due(std::uint64_t bytes_written) {
    const std::uint64_t bytes =
        bytes_since_scan_.fetch_add(bytes_written, std::memory_order_relaxed) + bytes_written;
    const std::uint64_t files = files_since_scan_.fetch_add(1, std::memory_order_relaxed) + 1;
    // The first write looks at the directory even within budget: other processes may have
    // filled it, and writers that died may have left temporaries behind. A full scan of a large
    // directory costs every writing process its length (0.4 s at 100,000 entries), so a sample
    // stands in for it while a recent cleanup left the directory well within its budgets.
    // Later, a tenth of a budget written catches what other processes added; and the size found
    // by the last scan plus what this store added since tells when this store's own writes
    // exceed a budget, so that a lone writer keeps the directory within it rather than
    // overshooting by up to a tenth.
    if (!scanned_.exchange(true, std::memory_order_relaxed) && !trust_sample()) return true;
    const auto over = [](std::uint64_t budget, std::uint64_t known, std::uint64_t since) {
        return budget != 0 && (since >= scan_interval(budget) || known + since > budget);
    };
    return over(max_bytes_, known_bytes_.load(std::memory_order_relaxed), bytes) ||
           over(max_files_, known_files_.load(std::memory_order_relaxed), files);
}

bool DiskStore::trust_sample() {
    // Which folders: a different run of them in each process, so that no one folder's luck
    // decides for every process.
    const auto seed =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        static_cast<std::uint64_t>(::getpid());
    auto sample = sample_directory(*directory_, static_cast<unsigned>(seed % 256));
    if (!sample ||
        full_scan_due(*sample, max_bytes_, max_files_, std::chrono::system_clock::now())) {
        return false;
    }
    known_bytes_.store(sample->estimated_bytes, std::memory_order_relaxed);
    known_files_.store(sample->estimated_files, std::memory_order_relaxed);
    sampled_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void DiskStore::run_due_cleanup() {
    std::unique_lock<std::mutex> cleaning(cleaning_, std::try_to_lock);
    if (!cleaning.owns_lock()) return;
    bytes_since_scan_.store(0, std::memory_order_relaxed);
    files_since_scan_.store(0, std::memory_order_relaxed);
    // Failures are counted and logged by cleanup(); the put has reached the disk either way.
    auto report = cleanup(budget_request());
    if (report && report->ran) {
        // A pass that could not remove what it chose may leave the directory over budget; its
        // figures would then make every write scan again, so the next scan waits for a tenth.
        const bool trusted = report->errors == 0;
        known_bytes_.store(trusted ? report->bytes_after : 0, std::memory_order_relaxed);
        known_files_.store(trusted ? report->files_after : 0, std::memory_order_relaxed);
    }
}

CleanupRequest DiskStore::budget_request() const {
    CleanupRequest request;
    request.max_bytes = max_bytes_;
    request.max_files = max_files_;
    return request;
}

Result<CleanupReport> DiskStore::cleanup(const CleanupRequest& request) {
    if (directory_->read_only()) return CleanupReport{};
    auto report = clean_directory(*directory_, request);
    if (!report) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        util::warn_once("disk-cleanup:" + directory_->path(),
                        "disk cleanup failed: " + report.error().message());
        return report;
    }
    if (!report->ran) {
        util::log_line(util::LogLevel::kDebug, "disk cleanup skipped: another process is at it");
        return report;
    }
    errors_.fetch_add(report->errors, std::memory_order_relaxed);
    scans_.fetch_add(1, std::memory_order_relaxed);
    if (!report->dry_run) {
        evicted_.fetch_add(report->entries_removed, std::memory_order_relaxed);
        evicted_bytes_.fetch_add(report->bytes_removed, std::memory_order_relaxed);
    }
    const bool removed_any =
        report->entries_removed + report->temps_swept + report->locks_removed != 0;
    if (removed_any && util::log_enabled(util::LogLevel::kInfo)) {
        util::log_line(util::LogLevel::kInfo,
                       std::string("disk cleanup: ") +
                           (report->dry_run ? "would remove " : "removed ") +
                           std::to_string(report->entries_removed) + " entries (" +
                           std::to_string(report->bytes_removed) + " bytes), " +
                           std::to_string(report->temps_swept) + " stale temporaries, " +
                           std::to_string(report->locks_removed) + " unused lock files; " +
                           std::to_string(report->files_after) + " entries (" +
                           std::to_string(report->bytes_after) + " bytes) left");
    }
    return report;
}

DiskStats DiskStore::stats() const {
    DiskStats s;
    s.hits = hits_.load(std::memory_order_relaxed);
    s.misses = misses_.load(std::memory_order_relaxed);
    s.writes = writes_.load(std::memory_order_relaxed);
    s.errors = errors_.load(std::memory_order_relaxed);
    s.corrupt = corrupt_.load(std::memory_order_relaxed);
    s.evicted = evicted_.load(std::memory_order_relaxed);
    s.evicted_bytes = evicted_bytes_.load(std::memory_order_relaxed);
    s.scans = scans_.load(std::memory_order_relaxed);
    s.sampled = sampled_.load(std::memory_order_relaxed);
    return s;
}

}  // namespace kcache::store
