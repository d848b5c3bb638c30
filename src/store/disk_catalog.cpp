#include "store/disk_catalog.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "store/disk_cleaner.hpp"

namespace kcache::store {
namespace {

// The birth time where the file system records one (statx); nullopt elsewhere.
std::optional<std::chrono::system_clock::time_point> birth_time(const std::string& path) {
    struct statx info {};
    if (statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME, &info) != 0 ||
        (info.stx_mask & STATX_BTIME) == 0) {
        return std::nullopt;
    }
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(info.stx_btime.tv_sec) +
            std::chrono::nanoseconds(info.stx_btime.tv_nsec)));
}

CatalogEntry describe(const std::string& path, std::string fingerprint, util::Files& files) {
    CatalogEntry entry;
    entry.fingerprint = std::move(fingerprint);
    entry.path = path;
    entry.created = birth_time(path);
    if (auto status = files.status(path); status && *status) {
        entry.size = (*status)->size;
        entry.last_used = (*status)->modified;
    }
    auto bytes = files.read(path);
    if (!bytes) {
        entry.problem = bytes.error().message();
    } else if (!*bytes) {
        entry.problem = "vanished while listed";
    } else if (auto decoded = decode(**bytes); !decoded) {
        entry.problem = decoded.error().message();
    } else {
        entry.kind = decoded->kind;
        entry.key = std::move(decoded->key);
    }
    return entry;
}

// (path, fingerprint) of every entry file, sorted by fingerprint.
Result<std::vector<std::pair<std::string, std::string>>> entry_files(const std::string& directory,
                                                                     util::Files& files) {
    auto folders = files.list_directory(directory);
    if (!folders) return folders.error();
    std::vector<std::pair<std::string, std::string>> found;
    for (const auto& folder : *folders) {
        if (!is_entry_folder(folder)) continue;
        std::string folder_path = directory;
        folder_path += '/';
        folder_path += folder;
        auto names = files.list_directory(folder_path);
        if (!names) continue;  // vanished or unreadable: nothing of ours to list there
        for (const auto& name : *names) {
            if (!name.ends_with(".kc")) continue;
            const std::string stem = name.substr(0, name.size() - 3);
            if (!is_hex(stem)) continue;
            std::string path = folder_path;
            path += '/';
            path += name;
            found.emplace_back(std::move(path), folder + stem);
        }
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    return found;
}

}  // namespace

Result<std::vector<CatalogEntry>> list_entries(const std::string& directory, util::Files& files) {
    auto found = entry_files(directory, files);
    if (!found) return found.error();
    std::vector<CatalogEntry> entries;
    entries.reserve(found->size());
    for (auto& [path, fingerprint] : *found) {
        entries.push_back(describe(path, std::move(fingerprint), files));
    }
    return entries;
}

Result<CatalogEntry> find_entry(const std::string& directory, const std::string& fingerprint,
                                util::Files& files) {
    if (fingerprint.size() < 4 || !is_hex(fingerprint)) {
        return Error(Errc::kInvalidArgument,
                     "'" + fingerprint + "' is not a fingerprint (4 to 32 lowercase hex digits)");
    }
    auto found = entry_files(directory, files);
    if (!found) return found.error();
    std::vector<std::pair<std::string, std::string>> matches;
    for (auto& item : *found) {
        if (item.second.starts_with(fingerprint)) matches.push_back(item);
    }
    if (matches.empty()) {
        return Error(Errc::kIoError, "no entry " + fingerprint + " in " + directory);
    }
    if (matches.size() > 1) {
        return Error(Errc::kInvalidArgument, "'" + fingerprint + "' matches " +
                                                 std::to_string(matches.size()) +
                                                 " entries; give more digits");
    }
    return describe(matches[0].first, matches[0].second, files);
}

Result<DirectorySize> measure_directory(const std::string& directory, util::Files& files) {
    auto found = entry_files(directory, files);
    if (!found) return found.error();
    DirectorySize size;
    for (const auto& [path, fingerprint] : *found) {
        if (auto status = files.status(path); status && *status) {
            ++size.entries;
            size.bytes += (*status)->size;
        }
    }
    return size;
}

Result<VerifyReport> verify_entries(const std::string& directory, bool repair, util::Files& files) {
    auto found = entry_files(directory, files);
    if (!found) return found.error();
    VerifyReport report;
    for (const auto& [path, fingerprint] : *found) {
        auto bytes = files.read(path);
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
        std::string line = path;
        line += ": ";
        line += problem;
        report.problems.push_back(std::move(line));
        if (repair && bytes) {  // an unreadable file is not ours to delete blindly
            if (files.remove(path)) ++report.removed;
        }
    }
    return report;
}

}  // namespace kcache::store
