// SPDX-License-Identifier: Apache-2.0
// Pipe framing of the compile worker protocol (compile/worker_frame.hpp): whole frames written
// without SIGPIPE, frames read with a deadline and no trust in a declared length.
#include "compile/worker_frame.hpp"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

#include "compile/worker_wire.hpp"
#include "util/try.hpp"

namespace kcache::compile {

using wire::get_le;
using wire::protocol_error;

namespace {

constexpr char kMagic[4] = {'K', 'C', 'W', 'P'};

// Writing to a pipe whose reader has gone raises SIGPIPE, whose default action kills the whole
// process: a crashed worker must cost one request, not the program. The choices:
// - signal(SIGPIPE, SIG_IGN) changes a process-wide setting that belongs to the application;
// - send(MSG_NOSIGNAL) works on sockets only, and the worker's stdin/stdout are pipes;
// - F_SETNOSIGPIPE exists on macOS only.
// So SIGPIPE is blocked for the writing thread alone while it writes; the signal a failed write
// raises is then pending on that thread and is taken with a zero-timeout sigtimedwait before the
// old mask returns, unless one was already pending before (not ours to take). Two extra system
// calls per frame, against a compile that takes far longer.
class SigpipeBlocked {
public:
    SigpipeBlocked() {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigemptyset(&pending);
        already_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
        blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
    }
    ~SigpipeBlocked() {
        if (blocked_) (void)pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeBlocked(const SigpipeBlocked&) = delete;
    SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

    // After a write failed with EPIPE.
    void take_our_signal() {
        if (!blocked_ || already_pending_) return;
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
    }

private:
    sigset_t pipe_;
    sigset_t old_;
    bool blocked_ = false;
    bool already_pending_ = false;
};

Error errno_error(const char* what, int fd, int error_number) {
    return Error(Errc::kIoError, std::string("compile worker pipe: ") + what + " fd " +
                                     std::to_string(fd) + ": " + std::strerror(error_number));
}

Result<void> write_all(int fd, std::string_view bytes, SigpipeBlocked& sigpipe) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            int error_number = errno;
            if (error_number == EINTR) continue;
            if (error_number == EPIPE) sigpipe.take_our_signal();
            return errno_error("write to", fd, error_number);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return ok();
}

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Waits until `fd` is readable or the deadline passes; no deadline: returns at once, and the
// read blocks.
Result<void> wait_readable(int fd, const Deadline& deadline) {
    if (!deadline) return ok();
    for (;;) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline -
                                                                 std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return Error(Errc::kIoError, "compile worker pipe: nothing arrived on fd " +
                                             std::to_string(fd) + " in time");
        }
        pollfd poll_fd{fd, POLLIN, 0};
        int ready =
            ::poll(&poll_fd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60000)));
        if (ready > 0) return ok();  // readable, or hung up: the read says which
        if (ready < 0 && errno != EINTR) return errno_error("poll", fd, errno);
    }
}

// Reads exactly `size` bytes; returns how many arrived before end of file (short only at EOF).
Result<std::size_t> read_fully(int fd, char* out, std::size_t size, const Deadline& deadline) {
    std::size_t done = 0;
    while (done < size) {
        TRY(wait_readable(fd, deadline));
        ssize_t n = ::read(fd, out + done, size - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno_error("read from", fd, errno);
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    return done;
}

Result<std::optional<std::string>> read_frame_until(int fd, const Deadline& deadline) {
    char header[kFrameHeaderSize];
    TRY_ASSIGN(const std::size_t got, read_fully(fd, header, sizeof header, deadline));
    if (got == 0) return std::optional<std::string>();
    if (got < sizeof header) {
        return protocol_error("end of file inside a frame header (" + std::to_string(got) + " of " +
                              std::to_string(sizeof header) + " bytes)");
    }
    if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
        return protocol_error("bad frame magic (not a kcache compile worker stream)");
    }
    auto version = static_cast<std::uint32_t>(get_le(header + 4, 4));
    if (version != kWorkerProtocolVersion) {
        return protocol_error("protocol version " + std::to_string(version) + ", expected " +
                              std::to_string(kWorkerProtocolVersion) +
                              " (worker and library from different kcache builds?)");
    }
    std::uint64_t size = get_le(header + 8, 8);
    if (size > kMaxFramePayload) {
        return protocol_error("frame of " + std::to_string(size) + " bytes exceeds the limit of " +
                              std::to_string(kMaxFramePayload));
    }
    // Grown as bytes arrive, so that a lying length costs at most one chunk beyond what came.
    constexpr std::size_t kChunk = std::size_t{1} << 20;
    std::string payload;
    while (payload.size() < size) {
        std::size_t old_size = payload.size();
        std::size_t step = std::min<std::uint64_t>(kChunk, size - old_size);
        payload.resize(old_size + step);
        TRY_ASSIGN(const std::size_t read,
                   read_fully(fd, payload.data() + old_size, step, deadline));
        if (read < step) {
            return protocol_error("end of file inside a frame (" + std::to_string(old_size + read) +
                                  " of " + std::to_string(size) + " payload bytes)");
        }
    }
    return std::optional<std::string>(std::move(payload));
}

}  // namespace

Result<void> write_frame(int fd, std::string_view payload) {
    if (payload.size() > kMaxFramePayload) {
        return protocol_error("frame of " + std::to_string(payload.size()) +
                              " bytes exceeds the limit of " + std::to_string(kMaxFramePayload));
    }
    std::string header(kMagic, sizeof kMagic);
    wire::put_u32(header, kWorkerProtocolVersion);
    wire::put_u64(header, payload.size());
    SigpipeBlocked sigpipe;
    if (auto written = write_all(fd, header, sigpipe); !written) return written;
    return write_all(fd, payload, sigpipe);
}

Result<std::optional<std::string>> read_frame(int fd) {
    return read_frame_until(fd, std::nullopt);
}

Result<std::optional<std::string>> read_frame(int fd, std::chrono::milliseconds timeout) {
    return read_frame_until(fd, std::chrono::steady_clock::now() + timeout);
}

}  // namespace kcache::compile
