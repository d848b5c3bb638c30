// SPDX-License-Identifier: Apache-2.0
#include "store/disk_cleaner.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "store/key_index.hpp"
#include "util/file_lock.hpp"
#include "util/log.hpp"

namespace kcache::store {

// The temporary's pattern is tried first because a host name may contain anything, ".kc"
// included.
NameKind classify(std::string_view name) {
    constexpr std::string_view kTemporary = ".kc.tmp.";
    constexpr std::string_view kLock = ".kc.lock";
    constexpr std::string_view kEntry = ".kc";
    if (const auto at = name.find(kTemporary); at != std::string_view::npos) {
        return is_hex(name.substr(0, at)) ? NameKind::kTemporary : NameKind::kForeign;
    }
    if (name.ends_with(kLock)) {
        return is_hex(name.substr(0, name.size() - kLock.size())) ? NameKind::kLock
                                                                  : NameKind::kForeign;
    }
    if (name.ends_with(kEntry)) {
        return is_hex(name.substr(0, name.size() - kEntry.size())) ? NameKind::kEntry
                                                                   : NameKind::kForeign;
    }
    return NameKind::kForeign;
}

namespace {

struct Found {
    std::string path;
    util::FileStatus status;
};

// Paths are relative to the cache directory.
struct Scan {
    std::vector<std::string> top;  // the directory's own listing
    std::vector<Found> entries;
    std::vector<Found> temporaries;
    std::vector<Found> locks;
    std::vector<Found> strays;
};

// Per-file trouble is logged and counted; the pass goes on, so that one unreadable file cannot
// keep the whole directory over its budget.
void note_failure(CleanupReport& report, const Error& error) {
    ++report.errors;
    util::log_line(util::LogLevel::kInfo, "disk cleanup: " + error.message());
}

Result<Scan> scan(const CacheDirectory& directory, CleanupReport& report) {
    auto top = directory.list();
    if (!top) return top.error();
    Scan out;
    out.top = *top;
    for (const std::string& folder : *top) {
        const bool ours = is_entry_folder(folder) || folder == "stats" || folder == "keys";
        if (!ours) continue;
        auto folder_status = directory.status(folder);
        if (!folder_status) {
            note_failure(report, folder_status.error());
            continue;
        }
        if (!*folder_status) continue;
        // A link or a file at one of kcache's folder names is never followed; it is a stray.
        if ((*folder_status)->kind != util::FileKind::kDirectory) {
            out.strays.push_back(Found{folder, **folder_status});
            continue;
        }
        if (!is_entry_folder(folder)) continue;
        // Held open for the pass: a stat a name, not a walk from the top for each.
        auto held = directory.folder(folder);
        if (!held) {
            note_failure(report, held.error());
            continue;
        }
        auto names = held->list();
        if (!names) {
            note_failure(report, names.error());
            continue;
        }
        for (const std::string& name : *names) {
            const NameKind kind = classify(name);
            if (kind == NameKind::kForeign) continue;
            auto status = held->status(name);
            if (!status) {
                note_failure(report, status.error());
                continue;
            }
            // Gone since the listing (a writer's rename, a reader removing a corrupt entry).
            if (!*status) continue;
            Found found{held->relative_of(name), **status};
            if ((*status)->kind != util::FileKind::kRegular) {
                out.strays.push_back(std::move(found));
                continue;
            }
            switch (kind) {
                case NameKind::kEntry:
                    out.entries.push_back(std::move(found));
                    break;
                case NameKind::kTemporary:
                    out.temporaries.push_back(std::move(found));
                    break;
                case NameKind::kLock:
                    out.locks.push_back(std::move(found));
                    break;
                case NameKind::kForeign:
                    break;
            }
        }
    }
    return out;
}

// Removes `paths` ("ab/<name>"), holding each folder open once rather than walking from the top
// for every file: in path order, not the order chosen (a pass cut short leaves a part of what
// it chose, which the next pass chooses again). The paths that could not be removed, each noted.
std::unordered_set<std::string> remove_files(const CacheDirectory& directory,
                                             std::vector<std::string> paths,
                                             CleanupReport& report) {
    std::sort(paths.begin(), paths.end());
    std::unordered_set<std::string> failed;
    std::string current;                      // the folder of the last path
    std::optional<Result<CacheFolder>> held;  // it, held, or why it could not be
    for (const std::string& path : paths) {
        const std::size_t slash = path.find('/');
        Result<void> removed = ok();
        if (slash == std::string::npos) {
            removed = directory.remove(path);
        } else {
            const std::string_view relative = std::string_view(path).substr(0, slash);
            if (!held || current != relative) {
                current = relative;
                held.emplace(directory.folder(relative));
            }
            // A folder that cannot be held (gone since the scan, say) is walked to as before,
            // which counts a file that is no longer there as removed.
            removed = *held ? (*held)->remove(std::string_view(path).substr(slash + 1))
                            : directory.remove(path);
        }
        if (!removed) {
            note_failure(report, removed.error());
            failed.insert(path);
        }
    }
    return failed;
}

// Which entries go, oldest stamp first: those older than the age limit, then as many as it
// takes to bring both counts down to the low-water mark, if either budget is exceeded.
std::vector<bool> choose_evictions(const std::vector<Found>& entries, const CleanupRequest& request,
                                   std::chrono::system_clock::time_point now) {
    std::vector<bool> evict(entries.size(), false);
    std::uint64_t files = entries.size();
    std::uint64_t bytes = 0;
    for (const Found& entry : entries) bytes += entry.status.size;
    auto take = [&](std::size_t i) {
        evict[i] = true;
        --files;
        bytes -= entries[i].status.size;
    };
    if (request.all_entries) {
        for (std::size_t i = 0; i < entries.size(); ++i) take(i);
        return evict;
    }
    if (request.evict_older_than) {
        const auto cutoff = now - *request.evict_older_than;
        for (std::size_t i = 0; i < entries.size(); ++i) {
            if (entries[i].status.modified < cutoff) take(i);
        }
    }
    const bool over = (request.max_files != 0 && files > request.max_files) ||
                      (request.max_bytes != 0 && bytes > request.max_bytes);
    if (!over) return evict;
    const std::uint64_t files_goal = share_of(request.max_files, kLowWaterPercent);
    const std::uint64_t bytes_goal = share_of(request.max_bytes, kLowWaterPercent);
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const bool enough = (request.max_files == 0 || files <= files_goal) &&
                            (request.max_bytes == 0 || bytes <= bytes_goal);
        if (enough) break;
        if (!evict[i]) take(i);
    }
    return evict;
}

}  // namespace

std::vector<std::pair<std::string, util::FileStatus>> other_temporaries(
    const CacheDirectory& directory, const std::vector<std::string>& top) {
    std::vector<std::pair<std::string, util::FileStatus>> found;
    // As util::Files::write_atomic names them: "<name>.tmp.<host>.<pid>.<random>".
    const auto stem_of = [](std::string_view name) {
        const std::size_t at = name.find(".tmp.");
        return at == std::string_view::npos ? std::optional<std::string_view>()
                                            : std::optional<std::string_view>(name.substr(0, at));
    };
    const auto add = [&](const std::string& relative) {
        if (auto status = directory.status(relative); status && *status) {
            found.emplace_back(relative, **status);
        }
    };
    bool stats = false;
    for (const std::string& name : top) {
        stats = stats || name == "stats";
        if (stem_of(name) == std::optional<std::string_view>(kConfigFileName)) add(name);
    }
    if (!stats) return found;
    auto names = directory.list("stats");
    if (!names) return found;  // not a folder: a stray the scan reports
    for (const std::string& name : *names) {
        const auto stem = stem_of(name);
        if (stem && stem->size() == 1 && is_hex(*stem)) add("stats/" + name);
    }
    return found;
}

Result<CleanupReport> clean_directory(const CacheDirectory& directory,
                                      const CleanupRequest& request) {
    CleanupReport report;
    report.dry_run = request.dry_run;
    // Two cleaners would only repeat each other's work, and a writer must never wait for a
    // cleanup: whoever finds the lock taken leaves the directory to its holder.
    if (directory.read_only()) return directory.read_only_error();
    // Unless the holder is silent (stopped or hung: no heartbeat for FileLock::kSilentPeriods),
    // when its lock file is removed and a fresh one taken, or no budget would ever hold again.
    // That is safe because two cleaners at once are only wasteful:
    //   1. S holds the lock on file F and stops; B finds F's stamp stale and unlinks F.
    //   2. B creates F' and locks it; S, continued, still holds a lock on the unlinked F.
    //   3. Both clean: each removal is one unlink of one name, ENOENT counts as done, entries
    //      are replaced whole by rename, so a file is removed twice at worst, never half.
    //   4. Two breakers B1, B2 may both find F stale; B1 unlinks F and locks F', then B2 unlinks
    //      F' (it checked F a moment before) and locks F'': three cleaners, the same as in 3.
    //   5. A live holder whose clock lags by more than the limit looks silent: the same as in 3.
    auto cleanup_lock = directory.try_lock(kCleanupLockName, util::FileLock::IfSilent::kBreak);
    if (!cleanup_lock) {
        // Not a file (a FIFO or a folder at its name) would stop every cleanup for good: it is a
        // stray of its own, removed, and the lock taken afresh.
        auto status = directory.status(kCleanupLockName);
        if (status && *status && (*status)->kind != util::FileKind::kRegular &&
            directory.remove_tree(kCleanupLockName)) {
            ++report.strays_removed;
            cleanup_lock = directory.try_lock(kCleanupLockName, util::FileLock::IfSilent::kBreak);
        }
    }
    if (!cleanup_lock) return cleanup_lock.error();
    if (!*cleanup_lock) return report;
    report.ran = true;

    auto scanned = scan(directory, report);
    if (!scanned) return scanned.error();
    Scan& found = *scanned;
    const auto now = std::chrono::system_clock::now();

    // Oldest stamp first; the path breaks ties so that a pass is reproducible.
    std::sort(found.entries.begin(), found.entries.end(), [](const Found& a, const Found& b) {
        return std::tie(a.status.modified, a.path) < std::tie(b.status.modified, b.path);
    });
    report.files_before = found.entries.size();
    for (const Found& entry : found.entries) report.bytes_before += entry.status.size;

    // An entry hit after the scan can still be removed here, though it is now the newest: the
    // next miss recompiles it. Stamps are a heuristic; correctness never depends on them.
    const std::vector<bool> evict = choose_evictions(found.entries, request, now);
    std::vector<std::string> doomed;
    for (std::size_t i = 0; i < found.entries.size(); ++i) {
        if (evict[i]) doomed.push_back(found.entries[i].path);
    }
    const std::unordered_set<std::string> kept = request.dry_run
                                                     ? std::unordered_set<std::string>{}
                                                     : remove_files(directory, doomed, report);
    std::unordered_set<std::string> remaining;
    for (std::size_t i = 0; i < found.entries.size(); ++i) {
        const Found& entry = found.entries[i];
        if (evict[i] && !kept.contains(entry.path)) {
            ++report.entries_removed;
            report.bytes_removed += entry.status.size;
        } else {
            remaining.insert(entry.path);
        }
    }
    report.files_after = report.files_before - report.entries_removed;
    report.bytes_after = report.bytes_before - report.bytes_removed;

    for (const Found& temporary : found.temporaries) {
        if (!request.all_temporaries && now - temporary.status.modified <= kStaleTemporaryAge) {
            continue;
        }
        if (!request.dry_run) {
            if (auto removed = directory.remove(temporary.path); !removed) {
                note_failure(report, removed.error());
                continue;
            }
        }
        ++report.temps_swept;
    }

    // A lock file outlives its compile on purpose (removing it on release would let a process
    // that opened it just before lock a file nobody else can find). Once its entry is gone and
    // nobody holds it, it is litter. Holding its lock while unlinking keeps out whoever would
    // lock it now, but not a process that opened it a moment ago and locks it after we let go:
    // that process holds a lock on an unlinked file while the next one creates a new file and
    // locks that. Both then compile the same artifact; each writes it atomically, so the only
    // cost is a duplicate compile, never a torn or wrong entry.
    constexpr std::string_view kLockSuffix = ".lock";
    for (const Found& lock : found.locks) {
        const std::string entry = lock.path.substr(0, lock.path.size() - kLockSuffix.size());
        if (remaining.contains(entry)) continue;
        // Opening creates the file again if it vanished meanwhile; it is removed just below,
        // and in a dry run it is an empty lock file such as any compile would create.
        auto held = directory.try_lock(lock.path);
        if (!held) {
            note_failure(report, held.error());
            continue;
        }
        if (!*held) continue;  // a compile is under way
        if (!request.dry_run) {
            if (auto removed = directory.remove(lock.path); !removed) {
                note_failure(report, removed.error());
                continue;
            }
        }
        ++report.locks_removed;
    }
    for (const Found& stray : found.strays) {
        if (!request.dry_run) {
            // A folder at an entry's name goes whole; a file or link at a folder's name goes
            // alone, and stays if it became a folder since the scan (a writer made it meanwhile).
            const bool tree = stray.status.kind == util::FileKind::kDirectory;
            if (auto removed =
                    tree ? directory.remove_tree(stray.path) : directory.remove(stray.path);
                !removed) {
                note_failure(report, removed.error());
                continue;
            }
        }
        util::log_line(util::LogLevel::kInfo,
                       "disk cleanup: " + directory.path_of(stray.path) +
                           (request.dry_run ? " would be removed" : " removed") +
                           ": not what kcache keeps under that name");
        ++report.strays_removed;
    }
    // Stale ones only, even for a clear: a statistics update or a `kcache -o` at work must land,
    // and a clear is about entries.
    for (const auto& [relative, status] : other_temporaries(directory, found.top)) {
        if (now - status.modified <= kStaleTemporaryAge) continue;
        if (!request.dry_run) {
            auto removed = status.kind == util::FileKind::kDirectory
                               ? directory.remove_tree(relative)
                               : directory.remove(relative);
            if (!removed) {
                note_failure(report, removed.error());
                continue;
            }
        }
        ++report.temps_swept;
    }
    report.index_records_removed += sweep_key_index(
        directory, request.dry_run, now, [&](const Error& error) { note_failure(report, error); });
    return report;
}

}  // namespace kcache::store
