// SPDX-License-Identifier: Apache-2.0
// An exclusive advisory lock on a file (flock), across processes on one machine. Used so that N
// processes missing one artifact compile it once; a lock that cannot be had in time is given up
// on (the caller compiles privately), never turned into a failure.
//
// flock frees the lock of a dead process; a stopped, hung or remote holder keeps it. So a holder
// says who it is in the lock file ("pid 123 host node7") and shows that it lives: one thread per
// process refreshes the modification time of every lock file the process holds each
// heartbeat_period(). A waiter that sees no heartbeat for kSilentPeriods stops waiting at once,
// and says so; a wait of more than a second is logged once, naming the holder.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "kcache/result.hpp"
#include "util/unique_fd.hpp"

namespace kcache::util {

class FileLock {
public:
    // What a holder's lock file says about it; pid 0 when it says nothing readable.
    struct Holder {
        long pid = 0;
        std::string host;
        std::string describe() const;  // "pid 123 on node7"
    };

    // Creates the lock file if needed and waits up to `patience` for the lock, or until its
    // holder has been silent for kSilentPeriods. nullopt if the file cannot be opened (or is not
    // a regular file), the lock is not taken in time, or its holder is silent.
    static std::optional<FileLock> acquire(const std::string& path,
                                           std::chrono::milliseconds patience);
    // The same for `relative_name` below the held folder `directory_fd`, opened without following
    // a link (O_NOFOLLOW); a FIFO, a link or anything but a regular file there is refused.
    static std::optional<FileLock> acquire(int directory_fd, const std::string& relative_name,
                                           std::chrono::milliseconds patience);

    // What try_acquire does when the holder is silent (stopped or hung): kBreak removes its lock
    // file and takes a fresh one, for work that is safe to run twice at once (see the caller).
    enum class IfSilent { kKeep, kBreak };
    // One attempt, never waiting: for work that another process doing it makes unnecessary
    // (cleaning the directory). nullopt if another holder has the lock; kIoError if the lock
    // file cannot be opened, which is a different answer: nobody may be doing the work.
    static Result<std::optional<FileLock>> try_acquire(const std::string& path,
                                                       IfSilent if_silent = IfSilent::kKeep);
    static Result<std::optional<FileLock>> try_acquire(int directory_fd,
                                                       const std::string& relative_name,
                                                       IfSilent if_silent = IfSilent::kKeep);

    // How often a holder's lock files are stamped, and after how many missed stamps a holder
    // counts as silent.
    static constexpr int kSilentPeriods = 5;
    static std::chrono::milliseconds heartbeat_period() noexcept;
    // For tests: a shorter period (inherited by forked children).
    static void set_heartbeat_period(std::chrono::milliseconds period) noexcept;

    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    ~FileLock();  // releases the lock

    struct Access;  // defined in file_lock.cpp only: lets its helpers make a holder

private:
    explicit FileLock(UniqueFd fd);  // the holder of `fd`'s lock: says so in the file, stamps it
    void release() noexcept;
    UniqueFd fd_;
};

}  // namespace kcache::util
