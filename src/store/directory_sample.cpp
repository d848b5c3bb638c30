// SPDX-License-Identifier: Apache-2.0
#include "store/directory_sample.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "store/disk_cleaner.hpp"

namespace kcache::store {

Result<DirectorySample> sample_directory(const CacheDirectory& directory, unsigned first,
                                         unsigned folders) {
    constexpr unsigned kEntryFolders = 256;
    folders = std::min(folders, kEntryFolders);
    DirectorySample sample;
    for (unsigned i = 0; i < folders; ++i) {
        char folder[3];
        std::snprintf(folder, sizeof folder, "%02x", (first + i) % kEntryFolders);
        auto folder_status = directory.status(folder);
        if (!folder_status) return folder_status.error();
        if (!*folder_status || (*folder_status)->kind != util::FileKind::kDirectory) continue;
        auto held = directory.folder(folder);
        if (!held) return held.error();
        auto names = held->list();
        if (!names) return names.error();
        for (const std::string& name : *names) {
            if (classify(name) != NameKind::kEntry) continue;
            auto status = held->status(name);
            if (!status) return status.error();
            if (!*status) continue;  // gone since the listing
            ++sample.sampled_files;
            sample.estimated_bytes += (*status)->size;
        }
    }
    if (folders != 0) {
        sample.estimated_files = sample.sampled_files * kEntryFolders / folders;
        sample.estimated_bytes = sample.estimated_bytes / folders * kEntryFolders;
    }
    auto lock = directory.status(kCleanupLockName);
    if (!lock) return lock.error();
    if (*lock) sample.last_cleanup = (*lock)->modified;
    return sample;
}

bool full_scan_due(const DirectorySample& sample, std::uint64_t max_bytes, std::uint64_t max_files,
                   std::chrono::system_clock::time_point now) {
    constexpr std::uint64_t kNearBudgetPercent = 80;
    const auto near = [](std::uint64_t budget, std::uint64_t estimate) {
        return budget != 0 && estimate >= share_of(budget, kNearBudgetPercent);
    };
    // A stamp in the future is no evidence of a recent cleanup.
    const bool recent = sample.last_cleanup && *sample.last_cleanup <= now &&
                        now - *sample.last_cleanup < kStaleTemporaryAge;
    return sample.sampled_files < kTrustedSampleFiles || !recent ||
           near(max_bytes, sample.estimated_bytes) || near(max_files, sample.estimated_files);
}

}  // namespace kcache::store
