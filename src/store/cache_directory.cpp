// SPDX-License-Identifier: Apache-2.0
// Accepting the cache directory, and every file operation below it through the held descriptor.
#include "store/cache_directory.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <utility>

namespace kcache::store {
namespace {

std::string octal(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

// mkdir -p of the user's own path, links in its parents followed as the user set them.
Result<void> make_path(const std::string& path) {
    for (std::size_t pos = 1; pos <= path.size(); ++pos) {
        if (pos != path.size() && path[pos] != '/') continue;
        const std::string prefix = path.substr(0, pos);
        if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
            return util::io_error("mkdir", prefix, errno);
        }
    }
    return ok();
}

// How many links the directory's path may pass through at its end (`~/.cache/kcache` -> a bigger
// disk, and perhaps another hop there).
constexpr int kMaxLinks = 8;

// The directory `path` names, followed through links at its end that the user or root owns: a
// link anyone else owns is refused at any hop, since whoever owns a link can point it anywhere
// (a purged /scratch/kcache made again by someone else as a link into the user's home, say).
Result<std::string> through_own_links(std::string path, uid_t user) {
    for (int hop = 0; hop <= kMaxLinks; ++hop) {
        struct stat named {};
        if (lstat(path.c_str(), &named) != 0) return util::io_error("stat", path, errno);
        if (!S_ISLNK(named.st_mode)) return path;
        if (named.st_uid != user && named.st_uid != 0) {
            return Error(Errc::kIoError,
                         "it is, or leads through, a symbolic link owned by another "
                         "user (" +
                             path + ", uid " + std::to_string(named.st_uid) + ")");
        }
        char target[4096];
        const ssize_t length = readlink(path.c_str(), target, sizeof target);
        if (length < 0) return util::io_error("readlink", path, errno);
        if (static_cast<std::size_t>(length) == sizeof target) {
            return Error(Errc::kIoError, "readlink " + path + ": target too long");
        }
        std::string next(target, static_cast<std::size_t>(length));
        if (next.empty()) return Error(Errc::kIoError, "readlink " + path + ": empty link");
        if (next.front() != '/') next.insert(0, path, 0, path.rfind('/') + 1);
        while (next.size() > 1 && next.back() == '/') next.pop_back();
        path = std::move(next);
    }
    return Error(Errc::kIoError, "more than " + std::to_string(kMaxLinks) + " symbolic links");
}

}  // namespace

std::optional<std::string> refusal(const std::string& path, uid_t owner, mode_t mode,
                                   const DirectoryPolicy& policy, uid_t user) {
    const bool owner_ok = owner == user || (policy.read_only && owner == 0) || policy.allow_shared;
    if (!owner_ok) {
        std::string why = "refusing cache directory " + path +
                          ": it belongs to another user (uid " + std::to_string(owner) +
                          "), who could plant kernels in it";
        if (owner == 0) {
            why += "; to read a cache that root prepared, use read-only mode (KCACHE_READ_ONLY=1)";
        }
        return why;
    }
    if ((mode & (S_IWGRP | S_IWOTH)) != 0 && !policy.allow_shared) {
        return "refusing cache directory " + path + ": it is group- or world-writable (mode " +
               octal(mode) + "), so another user could plant kernels in it; run `chmod go-w " +
               path + "` or allow a shared directory explicitly (KCACHE_ALLOW_SHARED_DIR=1)";
    }
    return std::nullopt;
}

Result<std::shared_ptr<CacheDirectory>> CacheDirectory::open(std::string path,
                                                             DirectoryPolicy policy,
                                                             util::Files& files) {
    if (path.empty()) return Error(Errc::kInvalidArgument, "no cache directory given");
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    // Absolute, so that a later chdir() of the program cannot point check_replaced elsewhere.
    if (path.front() != '/') {
        std::error_code error;
        const std::filesystem::path absolute = std::filesystem::absolute(path, error);
        if (error) return util::io_error("resolve", path, error.value());
        path = absolute.string();
    }
    struct stat named {};
    if (lstat(path.c_str(), &named) != 0) {
        if (errno != ENOENT) return util::io_error("stat", path, errno);
        if (policy.read_only || !policy.create) {
            return Error(Errc::kIoError, "no cache directory at " + path);
        }
        if (auto made = make_path(path); !made) return made.error();
        if (lstat(path.c_str(), &named) != 0) return util::io_error("stat", path, errno);
    }
    const uid_t user = geteuid();
    auto resolved = through_own_links(path, user);
    if (!resolved) {
        return Error(Errc::kIoError,
                     "refusing cache directory " + path + ": " + resolved.error().message());
    }
    // Opened without following a link: one swapped in after the walk above is refused here.
    auto opened = files.open_directory(*resolved);
    if (!opened) {
        return Error(Errc::kIoError, "cache directory " + path +
                                         " is not a directory: " + opened.error().message());
    }
    // The checks are made on what is held, so the directory cannot change between them and use.
    struct stat info {};
    if (fstat(opened->fd(), &info) != 0) return util::io_error("stat", path, errno);
    if (!S_ISDIR(info.st_mode)) {
        return Error(Errc::kIoError, "cache directory " + path + " is not a directory");
    }
    if (auto why = refusal(path, info.st_uid, info.st_mode, policy, user)) {
        return Error(Errc::kIoError, std::move(*why));
    }
    // Held under the path as given: messages name it, and check_replaced() looks it up again.
    auto held = std::make_unique<util::OpenDirectory>(path, opened->release());
    return std::shared_ptr<CacheDirectory>(
        new CacheDirectory(std::move(path), policy, files, std::move(held)));
}

CacheDirectory::CacheDirectory(std::string path, DirectoryPolicy policy, util::Files& files,
                               std::unique_ptr<util::OpenDirectory> held)
    : path_(std::move(path)),
      policy_(policy),
      writers_{geteuid(), policy.read_only},
      files_(files),
      current_(held.get()) {
    held_.push_back(std::move(held));
}

Error CacheDirectory::read_only_error() const {
    return Error(Errc::kIoError, "read-only cache directory " + path_ + ": nothing is written");
}

Result<std::optional<std::string>> CacheDirectory::read(std::string_view relative,
                                                        std::uint64_t max_bytes,
                                                        std::chrono::seconds stamp_after) const {
    // A read-only cache keeps its stamps as they are: it may not change the files.
    return files_.read(held(), relative, max_bytes,
                       policy_.read_only ? util::kNeverStamp : stamp_after, writers());
}

Result<void> CacheDirectory::write_atomic(std::string_view relative, std::string_view bytes,
                                          util::Durability durability) const {
    if (policy_.read_only) return read_only_error();
    const util::OpenDirectory& dir = held();
    if (const std::size_t slash = relative.rfind('/'); slash != std::string_view::npos) {
        if (auto made = files_.make_directories(dir, relative.substr(0, slash), 0700); !made) {
            return made;
        }
    }
    return files_.write_atomic(dir, relative, bytes, durability);
}

Result<void> CacheDirectory::remove(std::string_view relative) const {
    if (policy_.read_only) return read_only_error();
    return files_.remove(held(), relative);
}

Result<void> CacheDirectory::remove_tree(std::string_view relative) const {
    if (policy_.read_only) return read_only_error();
    return files_.remove_tree(held(), relative);
}

Result<void> CacheDirectory::make_directories(std::string_view relative) const {
    if (policy_.read_only) return read_only_error();
    return files_.make_directories(held(), relative, 0700);
}

Result<std::vector<std::string>> CacheDirectory::list(std::string_view relative) const {
    return files_.list_directory(held(), relative);
}

Result<std::optional<util::FileStatus>> CacheDirectory::status(std::string_view relative) const {
    return files_.status(held(), relative);
}

namespace {

// A folder's calls take one path part: nothing that climbs out or walks further down.
std::optional<Error> not_a_name(const CacheFolder& folder, std::string_view name) {
    if (!name.empty() && name != "." && name != ".." &&
        name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos) {
        return std::nullopt;
    }
    std::string message = "'";
    message.append(name).append("' is not a file name in ").append(folder.held().path());
    return Error(Errc::kInvalidArgument, std::move(message));
}

}  // namespace

Result<CacheFolder> CacheDirectory::folder(std::string_view relative) const {
    if (!util::is_relative_below(relative)) {
        std::string message = "'";
        message.append(relative).append("' is not a folder below ").append(path_);
        return Error(Errc::kInvalidArgument, std::move(message));
    }
    auto held_folder = files_.open_below(held(), relative);
    if (!held_folder) return held_folder.error();
    return CacheFolder(*this, std::string(relative), std::move(*held_folder));
}

std::string CacheFolder::relative_of(std::string_view name) const {
    std::string out = relative_;
    out.append("/").append(name);
    return out;
}

Result<std::vector<std::string>> CacheFolder::list() const {
    return directory_->files().list_directory(held_, {});
}

Result<std::optional<util::FileStatus>> CacheFolder::status(std::string_view name) const {
    if (auto refused = not_a_name(*this, name)) return *refused;
    return directory_->files().status(held_, name);
}

Result<std::optional<std::string>> CacheFolder::read(std::string_view name,
                                                     std::uint64_t max_bytes) const {
    if (auto refused = not_a_name(*this, name)) return *refused;
    return directory_->files().read(held_, name, max_bytes, util::kNeverStamp,
                                    directory_->writers());
}

Result<void> CacheFolder::remove(std::string_view name) const {
    if (directory_->read_only()) return directory_->read_only_error();
    if (auto refused = not_a_name(*this, name)) return *refused;
    return directory_->files().remove(held_, name);
}

Result<util::OpenDirectory> CacheDirectory::parent_of(std::string_view relative,
                                                      std::string& name) const {
    if (!util::is_relative_below(relative)) {
        // Appended, not concatenated: GCC 12 at -O3 warns falsely (-Wrestrict) on "'" + string.
        std::string message = "'";
        message.append(relative).append("' is not below ").append(path_);
        return Error(Errc::kInvalidArgument, std::move(message));
    }
    const std::size_t slash = relative.rfind('/');
    name = std::string(slash == std::string_view::npos ? relative : relative.substr(slash + 1));
    const std::string_view folder =
        slash == std::string_view::npos ? std::string_view() : relative.substr(0, slash);
    if (!folder.empty()) {
        if (auto made = files_.make_directories(held(), folder, 0700); !made) return made.error();
    }
    return files_.open_below(held(), folder);
}

std::optional<util::FileLock> CacheDirectory::lock(std::string_view relative,
                                                   std::chrono::milliseconds patience) const {
    if (policy_.read_only) return std::nullopt;
    std::string name;
    auto parent = parent_of(relative, name);
    if (!parent) return std::nullopt;
    return util::FileLock::acquire(parent->fd(), name, patience);
}

Result<std::optional<util::FileLock>> CacheDirectory::try_lock(
    std::string_view relative, util::FileLock::IfSilent if_silent) const {
    if (policy_.read_only) return read_only_error();
    std::string name;
    auto parent = parent_of(relative, name);
    if (!parent) return parent.error();
    auto locked = util::FileLock::try_acquire(parent->fd(), name, if_silent);
    if (!locked)
        return Error(locked.error().code(), path_of(relative) + ": " + locked.error().message());
    return locked;
}

bool CacheDirectory::check_replaced(bool make) {
    if (held().still_at_its_path()) return false;
    auto again =
        open(path_, DirectoryPolicy{policy_.allow_shared, policy_.read_only, make}, files_);
    if (!again) return false;  // nothing acceptable there now: keep the one held
    std::lock_guard lock(replaced_mutex_);
    // The new object's held directory moves here; the old one stays open for readers holding it.
    auto& fresh = (*again)->held_.front();
    held_.push_back(std::move(fresh));
    current_.store(held_.back().get(), std::memory_order_release);
    return true;
}

}  // namespace kcache::store
