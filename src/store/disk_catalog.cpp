// SPDX-License-Identifier: Apache-2.0
#include "store/disk_catalog.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "store/disk_cleaner.hpp"
#include "util/elf_symbols.hpp"

namespace kcache::store {
namespace {

// The birth time where the file system records one (statx, the entry's own name not followed);
// nullopt elsewhere.
std::optional<std::chrono::system_clock::time_point> birth_time(const CacheFolder& folder,
                                                                const std::string& name) {
    struct statx info {};
    if (statx(folder.held().fd(), name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME, &info) != 0 ||
        (info.stx_mask & STATX_BTIME) == 0) {
        return std::nullopt;
    }
    return util::time_of(timespec{info.stx_btime.tv_sec, info.stx_btime.tv_nsec});
}

// The entry `name` in `folder`.
CatalogEntry describe(const CacheFolder& folder, const std::string& name, std::string fingerprint) {
    CatalogEntry entry;
    entry.fingerprint = std::move(fingerprint);
    entry.path = folder.path_of(name);
    entry.created = birth_time(folder, name);
    if (auto status = folder.status(name); status && *status) {
        entry.size = (*status)->size;
        entry.last_used = (*status)->modified;
    }
    auto bytes = folder.read(name, kMaxEntryBytes);
    if (!bytes) {
        entry.problem = bytes.error().message();
    } else if (!*bytes) {
        entry.problem = "vanished while listed";
    } else if (auto decoded = decode(**bytes); !decoded) {
        entry.problem = decoded.error().message();
    } else {
        entry.kind = decoded->kind;
        entry.key = std::move(decoded->key);
        entry.kernels = entry.key.kernel_names;
        if (entry.kernels.empty() && entry.kind == PayloadKind::kCubin) {
            entry.kernels = cubin_kernel_names(decoded->payload);
        }
    }
    return entry;
}

// An entry whose folder could not be held: gone since the listing, or why not.
CatalogEntry in_unheld_folder(const CacheDirectory& directory, const std::string& relative,
                              std::string fingerprint, const Error& why) {
    CatalogEntry entry;
    entry.fingerprint = std::move(fingerprint);
    entry.path = directory.path_of(relative);
    auto there = directory.status(relative.substr(0, 2));
    entry.problem = there && !*there ? "vanished while listed" : why.message();
    return entry;
}

// The entry at `relative` ("ab/cdef….kc"), its folder held for this one.
CatalogEntry describe(const CacheDirectory& directory, const std::string& relative,
                      std::string fingerprint) {
    auto folder = directory.folder(relative.substr(0, 2));
    if (!folder)
        return in_unheld_folder(directory, relative, std::move(fingerprint), folder.error());
    return describe(*folder, relative.substr(3), std::move(fingerprint));
}

// (relative path, fingerprint) of every name in an entry's format, sorted by fingerprint; what
// is at the name may be anything (a FIFO, a folder): describe() and verify say what.
Result<std::vector<std::pair<std::string, std::string>>> entry_files(
    const CacheDirectory& directory) {
    auto folders = directory.list();
    if (!folders) return folders.error();
    std::vector<std::pair<std::string, std::string>> found;
    for (const auto& folder : *folders) {
        if (!is_entry_folder(folder)) continue;
        auto names = directory.list(folder);
        if (!names) continue;  // vanished, unreadable or not a folder: nothing of ours to list
        const std::string prefix = folder + "/";
        for (const auto& name : *names) {
            if (classify(name) != NameKind::kEntry) continue;
            found.emplace_back(prefix + name, folder + name.substr(0, name.size() - 3));
        }
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    return found;
}

}  // namespace

std::vector<std::string> cubin_kernel_names(std::string_view cubin) {
    // CUDA's ELF ABI marks a kernel's function symbol with STO_CUDA_ENTRY in st_other; device
    // functions that were not inlined are functions too, without it.
    constexpr std::uint8_t kStoCudaEntry = 0x10;
    auto symbols = util::elf_symbols(cubin);
    if (!symbols) return {};
    std::vector<std::string> names;
    for (auto& symbol : *symbols) {
        if (symbol.type == STT_FUNC && (symbol.other & kStoCudaEntry) != 0) {
            names.push_back(std::move(symbol.name));
        }
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

Result<std::vector<CatalogEntry>> list_entries(const CacheDirectory& directory) {
    auto found = entry_files(directory);
    if (!found) return found.error();
    std::vector<CatalogEntry> entries;
    entries.reserve(found->size());
    // Sorted by fingerprint, so a folder's entries come together: each folder is held once.
    std::string current;
    std::optional<Result<CacheFolder>> held;  // current's, or why it could not be held
    for (auto& [relative, fingerprint] : *found) {
        const std::string_view folder_name = std::string_view(relative).substr(0, 2);
        if (!held || current != folder_name) {
            current = folder_name;
            held.emplace(directory.folder(folder_name));
        }
        entries.push_back(
            *held ? describe(**held, relative.substr(3), std::move(fingerprint))
                  : in_unheld_folder(directory, relative, std::move(fingerprint), held->error()));
    }
    return entries;
}

Result<void> check_fingerprint_prefix(const std::string& fingerprint) {
    if (fingerprint.size() < 4 || fingerprint.size() > 32 || !is_hex(fingerprint)) {
        return Error(Errc::kInvalidArgument,
                     "'" + fingerprint + "' is not a fingerprint (4 to 32 lowercase hex digits)");
    }
    return ok();
}

Result<CatalogEntry> find_entry(const CacheDirectory& directory, const std::string& fingerprint) {
    if (auto checked = check_fingerprint_prefix(fingerprint); !checked) return checked.error();
    auto found = entry_files(directory);
    if (!found) return found.error();
    std::vector<std::pair<std::string, std::string>> matches;
    for (auto& item : *found) {
        if (item.second.starts_with(fingerprint)) matches.push_back(item);
    }
    if (matches.empty()) {
        return Error(Errc::kIoError, "no entry " + fingerprint + " in " + directory.path());
    }
    if (matches.size() > 1) {
        return Error(Errc::kInvalidArgument, "'" + fingerprint + "' matches " +
                                                 std::to_string(matches.size()) +
                                                 " entries; give more digits");
    }
    return describe(directory, matches[0].first, matches[0].second);
}

Result<DirectorySize> measure_directory(const CacheDirectory& directory) {
    auto folders = directory.list();
    if (!folders) return folders.error();
    DirectorySize size;
    for (const auto& [relative, status] : other_temporaries(directory, *folders)) {
        ++size.temporaries;
        size.temporary_bytes += status.size;
    }
    for (const auto& folder_name : *folders) {
        if (!is_entry_folder(folder_name)) continue;
        // Held for the pass: a stat a name, not a walk from the top for each.
        auto folder = directory.folder(folder_name);
        auto names = folder ? folder->list() : Result<std::vector<std::string>>(folder.error());
        if (!names) {
            ++size.strays;  // a link or a file at an entry folder's name
            continue;
        }
        for (const auto& name : *names) {
            const NameKind kind = classify(name);
            if (kind != NameKind::kEntry && kind != NameKind::kTemporary) continue;
            auto status = folder->status(name);
            if (!status || !*status) continue;
            if ((*status)->kind != util::FileKind::kRegular) {
                ++size.strays;
            } else if (kind == NameKind::kEntry) {
                ++size.entries;
                size.bytes += (*status)->size;
            } else {
                ++size.temporaries;
                size.temporary_bytes += (*status)->size;
            }
        }
    }
    return size;
}

Result<VerifyReport> verify_entries(const CacheDirectory& directory, bool repair,
                                    const VerifyObserver& checking) {
    auto found = entry_files(directory);
    if (!found) return found.error();
    VerifyReport report;
    for (std::size_t index = 0; index < found->size(); ++index) {
        const auto& relative = (*found)[index].first;
        if (checking) checking(directory.path_of(relative), index, found->size());
        auto bytes = directory.read(relative, kMaxEntryBytes);
        if (bytes && !*bytes) continue;  // removed by someone else meanwhile: nothing to check
        ++report.checked;
        std::string problem;
        if (!bytes) {
            problem = bytes.error().message();
        } else if (auto decoded = decode(**bytes); !decoded) {
            problem = decoded.error().message();
        }
        if (problem.empty()) continue;
        ++report.bad;
        report.problems.push_back(directory.path_of(relative) + ": " + problem);
        // What could not be read for another reason than its shape (permissions, I/O) is not
        // known to be bad, so it is not removed blindly.
        const bool known_bad = bytes || bytes.error().code() == Errc::kCorruptEntry;
        if (repair && known_bad && directory.remove_tree(relative)) ++report.removed;
    }
    return report;
}

}  // namespace kcache::store
