// SPDX-License-Identifier: Apache-2.0
#include "util/file_lock.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "util/files.hpp"
#include "util/log.hpp"

namespace kcache::util {

struct FileLock::Access {
    static FileLock make(UniqueFd fd) { return FileLock(std::move(fd)); }
};

namespace {

// A wait longer than this is logged, once per lock.
constexpr auto kLoggedWait = std::chrono::seconds(1);

std::atomic<std::int64_t> heartbeat_ms{1000};

std::chrono::milliseconds period() {
    return std::chrono::milliseconds(heartbeat_ms.load(std::memory_order_relaxed));
}

// Stamps the lock files this process holds: one thread, running only while some lock is held.
// Never destroyed, so that the thread cannot outlive its state at exit.
class Heartbeat {
public:
    static Heartbeat& instance() {
        static Heartbeat* const heartbeat = new Heartbeat;
        return *heartbeat;
    }

    // Never throws: a lock whose heartbeat cannot start (no memory, no thread left) is still
    // held, and only looks silent to others after kSilentPeriods, as a stopped holder would.
    void add(int fd) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        try {
            fds_.push_back(fd);
            if (!running_) {
                std::thread([this] { run(); }).detach();
                running_ = true;  // only once a thread runs: a later lock tries again otherwise
            }
        } catch (...) {
            // Kept without a heartbeat (see above); the thread is tried again by the next add.
        }
    }

    // Before the descriptor is closed, so that a stamp never lands on a reused number.
    void remove(int fd) {
        std::lock_guard<std::mutex> lock(mutex_);
        fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
    }

private:
    Heartbeat() {
        // A forked child has none of the parent's threads: it holds no lock of its own yet, and
        // its first one must start a thread of its own.
        pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                       [] {
                           Heartbeat& self = instance();
                           self.fds_.clear();
                           self.running_ = false;
                           self.mutex_.unlock();
                       });
    }

    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!fds_.empty()) {
            wake_.wait_for(lock, period());
            for (int fd : fds_)
                std::ignore = futimens(fd, nullptr);  // a stamp missed is a late one
        }
        running_ = false;
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<int> fds_;  // guarded by mutex_
    bool running_ = false;  // guarded by mutex_
};

// Where a lock file is: a name below a held folder, or a path (AT_FDCWD).
struct Place {
    int directory_fd;
    const std::string& name;
};

// The lock file, opened for locking: created if missing, never through a link (O_NOFOLLOW) and
// never blocking on a FIFO (O_NONBLOCK); anything but a regular file is refused (EINVAL).
UniqueFd open_lock_file(const Place& place) {
    UniqueFd fd(openat(place.directory_fd, place.name.c_str(),
                       O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600));
    if (!fd) return fd;
    struct stat status {};
    if (fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode)) {
        fd.reset();
        errno = EINVAL;
    }
    return fd;
}

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) return "?";
    return name;
}

// Says who holds the lock now and starts its heartbeat. The record is rewritten whole by each
// holder; a waiter reading it mid-write finds it unreadable for a moment, never someone else.
void become_holder(int fd) noexcept {
    try {
        static const std::string host = host_name();
        const std::string record = "pid " + std::to_string(getpid()) + " host " + host + "\n";
        std::ignore = ftruncate(fd, 0);
        std::ignore = pwrite(fd, record.data(), record.size(), 0);
    } catch (...) {
        // No memory for the record: the lock is held all the same, its holder unnamed.
    }
    std::ignore = futimens(fd, nullptr);
    Heartbeat::instance().add(fd);
}

FileLock::Holder parse_holder(std::string_view text) {
    FileLock::Holder holder;
    if (!text.starts_with("pid ")) return holder;
    text.remove_prefix(4);
    long pid = 0;
    std::size_t digits = 0;
    while (digits < text.size() && digits < 10 && text[digits] >= '0' && text[digits] <= '9') {
        pid = pid * 10 + (text[digits++] - '0');
    }
    text.remove_prefix(digits);
    if (digits == 0 || !text.starts_with(" host ")) return holder;
    text.remove_prefix(6);
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return holder;
    holder.pid = pid;
    for (char c : text.substr(0, end)) holder.host += (c >= 0x21 && c <= 0x7e) ? c : '?';
    return holder;
}

// What the lock file at `place` says now, read through a fresh descriptor: opening again is what
// makes NFS fetch the attributes anew (close-to-open), where fstat of an old one reads a cache.
struct Look {
    bool same_file = false;  // the name still leads to the file `fd` locks
    std::chrono::system_clock::time_point stamp;
    FileLock::Holder holder;
};

Look look(const Place& place, int fd) {
    Look seen;
    const UniqueFd fresh(openat(place.directory_fd, place.name.c_str(),
                                O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
    if (!fresh) return seen;
    struct stat now {};
    struct stat held {};
    if (fstat(fresh.get(), &now) == 0 && fstat(fd, &held) == 0 && S_ISREG(now.st_mode) &&
        now.st_dev == held.st_dev && now.st_ino == held.st_ino) {
        seen.same_file = true;
        seen.stamp = time_of(now.st_mtim);
        char text[320];
        const ssize_t got = pread(fresh.get(), text, sizeof(text), 0);
        if (got > 0) seen.holder = parse_holder(std::string_view(text, static_cast<size_t>(got)));
    }
    return seen;
}

std::chrono::milliseconds silence_limit() {
    return period() * FileLock::kSilentPeriods;
}

// Silent: no stamp for kSilentPeriods by this machine's clock. A stamp from the future (a remote
// holder's clock ahead) reads as fresh; one behind by more than the limit makes a live holder
// look silent, which costs a duplicate compile or cleaner, never a wrong entry.
bool silent(const Look& seen) {
    return seen.same_file && std::chrono::system_clock::now() - seen.stamp > silence_limit();
}

std::string seconds(std::chrono::steady_clock::duration waited) {
    const auto tenths = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() / 100;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

std::optional<FileLock> wait_for(const Place& place, std::chrono::milliseconds patience,
                                 UniqueFd fd) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + patience;
    // Polling rather than a blocking flock: a blocking wait cannot be bounded, and a stuck
    // holder must not stall every launch behind it.
    auto pause = std::chrono::microseconds(200);
    auto next_look = start;
    bool said = false;
    Look seen;
    // The stamp as last seen, and when it last moved by this machine's steady clock: a holder
    // whose clock is ahead stamps "from the future", and stopping still shows as no movement.
    std::chrono::system_clock::time_point last_stamp;
    auto last_move = start;
    for (;;) {
        if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
            if (said) {
                log_line(LogLevel::kInfo, "got the lock " + place.name + " after " +
                                              seconds(std::chrono::steady_clock::now() - start));
            }
            return FileLock::Access::make(std::move(fd));
        }
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_look) {
            next_look = now + period() / 4;
            seen = look(place, fd.get());
            if (!seen.same_file) {
                // Removed or replaced (a cleaner broke or swept it): wait on the file the name
                // leads to now, else this lock would be on a file nobody else can find.
                UniqueFd reopened = open_lock_file(place);
                if (!reopened) break;
                fd = std::move(reopened);
                last_move = now;
                continue;
            }
            if (seen.stamp != last_stamp) {
                last_stamp = seen.stamp;
                last_move = now;
            }
            if (silent(seen) || now - last_move > silence_limit()) {
                // Once per holder: a stopped process holding many locks is one problem.
                warn_once("silent lock holder " + seen.holder.describe(),
                          "not waiting for the lock " + place.name + ": its holder, " +
                              seen.holder.describe() + ", has not stamped it for " +
                              seconds(silence_limit()) + " (stopped or hung?)");
                break;
            }
        }
        if (!said && now - start >= kLoggedWait) {
            said = true;
            log_line(LogLevel::kWarn, "waiting for the lock " + place.name + ", held by " +
                                          seen.holder.describe() + " (at most " +
                                          seconds(deadline - start) + ")");
        }
        if (now >= deadline) {
            log_line(LogLevel::kWarn, "gave up on the lock " + place.name + " after " +
                                          seconds(now - start) + "; " + seen.holder.describe() +
                                          " still holds it and stamps it");
            break;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    return std::nullopt;
}

}  // namespace

std::string FileLock::Holder::describe() const {
    if (pid == 0) return "an unknown process";
    return "pid " + std::to_string(pid) + " on " + host;
}

std::chrono::milliseconds FileLock::heartbeat_period() noexcept {
    return period();
}

void FileLock::set_heartbeat_period(std::chrono::milliseconds period) noexcept {
    heartbeat_ms.store(std::max<std::int64_t>(1, period.count()), std::memory_order_relaxed);
}

FileLock::FileLock(UniqueFd fd) : fd_(std::move(fd)) {
    become_holder(fd_.get());
}

namespace {

std::optional<FileLock> acquire_at(const Place& place, std::chrono::milliseconds patience) {
    UniqueFd fd = open_lock_file(place);
    if (!fd) return std::nullopt;
    return wait_for(place, patience, std::move(fd));
}

Result<std::optional<FileLock>> try_acquire_at(const Place& place, FileLock::IfSilent if_silent) {
    UniqueFd fd = open_lock_file(place);
    if (!fd) return io_error("open", place.name, errno);
    for (int attempt = 0;; ++attempt) {
        if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
            return std::optional<FileLock>(FileLock::Access::make(std::move(fd)));
        }
        if (errno == EINTR) continue;
        const int saved = errno;
        if (saved != EWOULDBLOCK) return io_error("lock", place.name, saved);
        const Look seen = look(place, fd.get());
        if (if_silent == FileLock::IfSilent::kKeep || attempt > 0 || !silent(seen)) break;
        // The holder is silent: its file goes, and whoever comes next (this process, just below)
        // creates and locks a fresh one. Why that is safe is the caller's to say.
        log_line(LogLevel::kWarn, "breaking the lock " + place.name + ": its holder, " +
                                      seen.holder.describe() + ", has not stamped it for " +
                                      seconds(silence_limit()) + " (stopped or hung?)");
        if (unlinkat(place.directory_fd, place.name.c_str(), 0) != 0 && errno != ENOENT) break;
        fd = open_lock_file(place);
        if (!fd) return io_error("open", place.name, errno);
    }
    return std::optional<FileLock>();
}

}  // namespace

std::optional<FileLock> FileLock::acquire(const std::string& path,
                                          std::chrono::milliseconds patience) {
    return acquire_at(Place{AT_FDCWD, path}, patience);
}

std::optional<FileLock> FileLock::acquire(int directory_fd, const std::string& relative_name,
                                          std::chrono::milliseconds patience) {
    return acquire_at(Place{directory_fd, relative_name}, patience);
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::string& path, IfSilent if_silent) {
    return try_acquire_at(Place{AT_FDCWD, path}, if_silent);
}

Result<std::optional<FileLock>> FileLock::try_acquire(int directory_fd,
                                                      const std::string& relative_name,
                                                      IfSilent if_silent) {
    return try_acquire_at(Place{directory_fd, relative_name}, if_silent);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::move(other.fd_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
    if (this != &other) {
        release();
        fd_ = std::move(other.fd_);
    }
    return *this;
}

FileLock::~FileLock() {
    release();
}

void FileLock::release() noexcept {
    if (fd_) {
        Heartbeat::instance().remove(fd_.get());
        flock(fd_.get(), LOCK_UN);
        fd_.reset();
    }
}

}  // namespace kcache::util
