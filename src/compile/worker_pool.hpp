// SPDX-License-Identifier: Apache-2.0
// Compiles CUDA C++ and links PTX in worker processes (`kcache compile-worker`): NVRTC serializes
// compiles in one process and nvJitLink slows down beside itself there; processes do neither
// (docs/performance.md).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"
#include "util/unique_fd.hpp"

namespace kcache::compile {

// KCACHE_COMPILE_WORKER when set (set but empty: no workers), else a `kcache` executable beside
// this program (/proc/self/exe) if there is one, else empty: no workers, compile in-process.
// The command is run with the argument "compile-worker".
std::string default_worker_command();

// A fixed number of worker slots. A worker is started on first need, kept for reuse (loading
// NVRTC is slow) and ended by the destructor, which must not run while a
// compile_cuda call is in flight.
class WorkerPool {
public:
    // `worker_args` follow the command (e.g. {"compile-worker"}). kInvalidArgument for zero
    // workers or an empty command, kIoError for a command path that is not executable. No process
    // is started here.
    static Result<std::unique_ptr<WorkerPool>> start(
        std::string worker_command_path, std::vector<std::string> worker_args, std::size_t workers,
        std::chrono::milliseconds startup_timeout = std::chrono::seconds(10));

    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Thread-safe; blocks while every worker is busy. The worker's compile_cuda result, errors
    // included (kCompileFailed with NVRTC's log), unchanged. A worker that dies or answers
    // garbage is replaced and the request retried once on a fresh worker; a second failure is
    // kCompileFailed when the worker died during the compile both times (the compiler crashes on
    // this source), else kIoError; either names the worker command.
    Result<Compiled> compile_cuda(const CudaProgram& program, const Target& target);
    // The same for PTX, on a worker that is started and idle now: the worker's link_ptx result
    // (kCompileFailed with nvJitLink's log), or nullopt when there is no such worker, when this
    // process has no nvJitLink identity, or when the worker failed (it is retired; nothing is
    // started or waited for): the caller then links in this process. A worker's start (a
    // process, its compiler loaded: tens of ms) costs more than what a PTX link gains from
    // running outside this process, so PTX only fills workers that CUDA C++ compiles started.
    std::optional<Result<Compiled>> link_ptx_if_idle(const std::string& ptx, const Target& target);

    // False in a process forked from the one that started the pool: the workers' pipes are then
    // shared with the parent, and an answer could reach the wrong process. Compile in-process.
    bool usable_here() const { return ::getpid() == owner_; }

    // The processes alive now, idle or busy: for tests and diagnostics.
    std::vector<pid_t> worker_pids() const;
    std::size_t size() const { return slots_; }
    const std::string& command() const { return command_; }

private:
    struct Worker {
        pid_t pid = -1;
        util::UniqueFd to_worker;    // its stdin
        util::UniqueFd from_worker;  // its stdout
    };
    // How a retired worker ended, for messages and for telling a compiler crash from the rest.
    struct Ending {
        std::string how;       // "exited with status 1", "killed by signal 11 (Segmentation fault)"
        bool crashed = false;  // killed by a signal that the pool did not send
    };

    WorkerPool(std::string command, std::vector<std::string> args, std::size_t workers,
               std::chrono::milliseconds startup_timeout);

    // An idle worker, or a slot to start one in (then spawns it, outside the lock).
    Result<Worker> acquire();
    // An idle worker if there is one now; nothing is started or waited for.
    std::optional<Worker> acquire_idle();
    void release(Worker worker);
    // Spawns a worker for a slot this thread holds and waits for its hello. On failure the
    // process, if any, is ended; the slot stays held.
    Result<Worker> spawn();
    // One encoded request on `worker`, retried once on a fresh one (compile_cuda's contract);
    // `what` names it in messages.
    Result<Compiled> run(Worker worker, const std::string& request, const std::string& what);
    // An error for a request a worker cannot take (over kMaxFramePayload), else nothing.
    static std::optional<Error> too_large(const std::string& request, const std::string& what);
    // Sends one request and reads its response. An error here is the worker's failure (died,
    // garbage); the compile's own result, error or not, is the inner value.
    Result<Result<Compiled>> exchange(const Worker& worker, const std::string& request);
    // Ends a worker: closes its pipes, gives it a moment to exit, kills it if it still runs,
    // reaps it. The slot stays held.
    Ending retire(Worker& worker);
    void give_back_slot();
    std::string describe_command() const;

    const std::string command_;
    const std::vector<std::string> args_;
    const std::size_t slots_;
    const std::chrono::milliseconds startup_timeout_;
    static constexpr std::chrono::minutes kCompileTimeout{10};
    // NVRTC and nvJitLink of this process, as its fingerprints name them; empty when it has
    // none. A worker that reports another is refused. Set once in the constructor.
    std::string compiler_identity_;
    std::string ptx_compiler_identity_;
    // Passed to workers as KCACHE_NVRTC_LIBRARY and KCACHE_NVJITLINK_LIBRARY, so that they agree.
    std::string compiler_path_;
    std::string ptx_compiler_path_;

    mutable std::mutex mutex_;
    std::condition_variable changed_;  // with mutex_: a worker became idle or a slot free
    std::vector<Worker> idle_;         // guarded by mutex_: started workers awaiting a request
    std::size_t free_slots_ = 0;       // guarded by mutex_: slots with no process and no owner
    std::vector<pid_t> live_pids_;     // guarded by mutex_: every started, unreaped worker
    const pid_t owner_;                // the process that started the pool
};

}  // namespace kcache::compile
