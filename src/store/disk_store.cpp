#include "store/disk_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::store {

Result<std::string> default_directory() {
    if (auto dir = util::env_string("KCACHE_DIR")) return *dir;
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
    if (auto made = files.make_directories(directory, 0700); !made) return made.error();
    struct stat info {};
    if (lstat(directory.c_str(), &info) != 0) return util::io_error("stat", directory, errno);
    if (!S_ISDIR(info.st_mode)) {
        return Error(Errc::kIoError, "cache directory " + directory + " is not a directory");
    }
    if (info.st_uid != geteuid() && !options.allow_shared_directory) {
        return Error(Errc::kIoError, "refusing cache directory " + directory +
                                         ": it belongs to another user (uid " +
                                         std::to_string(info.st_uid) +
                                         "), who could plant kernels in it");
    }
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !options.allow_shared_directory) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", info.st_mode & 07777);
        return Error(Errc::kIoError, "refusing cache directory " + directory +
                                         ": it is group- or world-writable "
                                         "(mode " +
                                         mode +
                                         "), so another user could plant kernels in it; run "
                                         "`chmod go-w " +
                                         directory + "` or allow a shared directory explicitly");
    }
    return std::unique_ptr<DiskStore>(new DiskStore(std::move(directory), files));
}

std::string DiskStore::path_of(const util::Fingerprint& fingerprint) const {
    const std::string hex = fingerprint.hex();
    return directory_ + "/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".kc";
}

std::optional<util::FileLock> DiskStore::lock(const util::Fingerprint& fingerprint,
                                              std::chrono::milliseconds patience) {
    const std::string path = path_of(fingerprint);
    if (!files_.make_directories(path.substr(0, path.rfind('/')), 0700)) return std::nullopt;
    return util::FileLock::acquire(path + ".lock", patience);
}

std::optional<StoredEntry> DiskStore::get(const util::Fingerprint& fingerprint) {
    const std::string path = path_of(fingerprint);
    auto bytes = files_.read(path);
    if (!bytes) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo, "disk read failed: " + bytes.error().message());
    }
    if (!bytes || !*bytes) {
        misses_.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    auto entry = decode(**bytes);
    if (!entry) {
        corrupt_.fetch_add(1, std::memory_order_relaxed);
        misses_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo, path + ": " + entry.error().message() + "; removed");
        if (auto removed = files_.remove(path); !removed) {
            errors_.fetch_add(1, std::memory_order_relaxed);
        }
        return std::nullopt;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    return std::move(entry).value();
}

Result<void> DiskStore::put(const util::Fingerprint& fingerprint, const StoredEntry& entry) {
    const std::string path = path_of(fingerprint);
    const std::string folder = path.substr(0, path.rfind('/'));
    auto written = files_.make_directories(folder, 0700);
    if (written) written = files_.write_atomic(path, encode(entry));
    if (!written) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo, "disk write failed: " + written.error().message());
        return written;
    }
    writes_.fetch_add(1, std::memory_order_relaxed);
    return ok();
}

DiskStats DiskStore::stats() const {
    return {hits_.load(std::memory_order_relaxed), misses_.load(std::memory_order_relaxed),
            writes_.load(std::memory_order_relaxed), errors_.load(std::memory_order_relaxed),
            corrupt_.load(std::memory_order_relaxed)};
}

}  // namespace kcache::store
