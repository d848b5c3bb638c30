// An exclusive advisory lock on a file (flock), across processes on one machine. Used so that N
// processes missing one artifact compile it once; a lock that cannot be had in time is given up
// on (the caller compiles privately), never turned into a failure.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "kcache/result.hpp"

namespace kcache::util {

class FileLock {
public:
    // Creates the lock file if needed and waits up to `patience` for the lock. nullopt if the
    // file cannot be opened or the lock not taken in time.
    static std::optional<FileLock> acquire(const std::string& path,
                                           std::chrono::milliseconds patience);
    // One attempt, never waiting: for work that another process doing it makes unnecessary
    // (cleaning the directory). nullopt if another holder has the lock; kIoError if the lock
    // file cannot be opened, which is a different answer: nobody may be doing the work.
    static Result<std::optional<FileLock>> try_acquire(const std::string& path);
    // The same for the file `name` in the directory `directory_fd`, opened without following a
    // link and refused unless it is a regular file: a FIFO or a link planted at a lock's name
    // can neither stall the caller nor redirect it.
    static std::optional<FileLock> acquire_at(int directory_fd, const std::string& name,
                                              std::chrono::milliseconds patience);
    static Result<std::optional<FileLock>> try_acquire_at(int directory_fd,
                                                          const std::string& name);
    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    ~FileLock();  // releases the lock

private:
    explicit FileLock(int fd) : fd_(fd) {}
    static std::optional<FileLock> wait_for(int fd, std::chrono::milliseconds patience);
    static Result<std::optional<FileLock>> try_once(int fd, const std::string& shown);
    void release() noexcept;
    int fd_ = -1;
};

}  // namespace kcache::util
