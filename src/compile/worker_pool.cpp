// SPDX-License-Identifier: Apache-2.0
// Worker processes for compiles (CUDA C++, PTX): spawning, reuse, replacement of a dead worker and
// reaping (compile/worker_pool.hpp).
#include "compile/worker_pool.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "compile/worker_process.hpp"
#include "compile/worker_protocol.hpp"
#include "driver/compiler_libraries.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::compile {

using process::child_environment;
using process::describe_status;
using process::kNvJitLinkOverride;
using process::kNvrtcOverride;
using process::make_pipe;
using process::Pipe;
using process::pointers_to;

std::string default_worker_command() {
    // getenv, not util::env_string: set but empty is an answer here ("no workers").
    if (const char* named = std::getenv("KCACHE_COMPILE_WORKER"); named != nullptr) return named;
    std::error_code error;
    auto self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return {};
    auto beside = self.parent_path() / "kcache";
    return ::access(beside.c_str(), X_OK) == 0 ? beside.string() : std::string();
}

Result<std::unique_ptr<WorkerPool>> WorkerPool::start(std::string worker_command_path,
                                                      std::vector<std::string> worker_args,
                                                      std::size_t workers,
                                                      std::chrono::milliseconds startup_timeout) {
    if (worker_command_path.empty()) {
        return Error(Errc::kInvalidArgument, "compile worker pool: no worker command");
    }
    if (workers == 0) {
        return Error(Errc::kInvalidArgument, "compile worker pool: zero workers");
    }
    // A path is checked now, for an error at configuration time; a bare name is looked up in
    // PATH by posix_spawnp when the first worker starts.
    if (worker_command_path.find('/') != std::string::npos &&
        ::access(worker_command_path.c_str(), X_OK) != 0) {
        return Error(Errc::kIoError, "compile worker command " + worker_command_path +
                                         " is not executable: " + std::strerror(errno));
    }
    return std::unique_ptr<WorkerPool>(new WorkerPool(
        std::move(worker_command_path), std::move(worker_args), workers, startup_timeout));
}

WorkerPool::WorkerPool(std::string command, std::vector<std::string> args, std::size_t workers,
                       std::chrono::milliseconds startup_timeout)
    : command_(std::move(command)),
      args_(std::move(args)),
      slots_(workers),
      startup_timeout_(startup_timeout),
      free_slots_(workers),
      owner_(::getpid()) {
    // The identities are file reads; no compiler is loaded in this process for the pool.
    if (const auto& identity = cuda_compiler_identity(); identity) compiler_identity_ = *identity;
    if (const auto& found = driver::nvrtc_identity(); found) compiler_path_ = found->path;
    if (const auto& identity = ptx_compiler_identity(); identity)
        ptx_compiler_identity_ = *identity;
    if (const auto& found = driver::nvjitlink_identity(); found) ptx_compiler_path_ = found->path;
}

WorkerPool::~WorkerPool() {
    std::vector<Worker> workers;
    {
        std::lock_guard lock(mutex_);
        workers.swap(idle_);
    }
    // Every input first, so that the workers exit in parallel, then reap each one.
    for (auto& worker : workers) worker.to_worker.reset();
    for (auto& worker : workers) {
        Ending ending = retire(worker);
        util::log_line(util::LogLevel::kDebug,
                       "compile worker pid " + std::to_string(worker.pid) + " " + ending.how);
    }
}

std::string WorkerPool::describe_command() const {
    std::string out = "'" + command_;
    for (const auto& arg : args_) out += " " + arg;
    return out + "'";
}

std::vector<pid_t> WorkerPool::worker_pids() const {
    std::lock_guard lock(mutex_);
    return live_pids_;
}

std::optional<WorkerPool::Worker> WorkerPool::acquire_idle() {
    std::lock_guard lock(mutex_);
    if (idle_.empty()) return std::nullopt;
    Worker worker = std::move(idle_.back());
    idle_.pop_back();
    return worker;
}

Result<WorkerPool::Worker> WorkerPool::acquire() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !idle_.empty() || free_slots_ > 0; });
    if (!idle_.empty()) {
        // The most recently used one: its NVRTC is loaded and its caches are warm.
        Worker worker = std::move(idle_.back());
        idle_.pop_back();
        return worker;
    }
    --free_slots_;
    lock.unlock();  // starting a process takes milliseconds; others may use idle workers meanwhile
    auto worker = spawn();
    if (!worker) give_back_slot();
    return worker;
}

void WorkerPool::release(Worker worker) {
    {
        std::lock_guard lock(mutex_);
        idle_.push_back(std::move(worker));
    }
    changed_.notify_one();
}

void WorkerPool::give_back_slot() {
    {
        std::lock_guard lock(mutex_);
        ++free_slots_;
    }
    changed_.notify_one();
}

Result<WorkerPool::Worker> WorkerPool::spawn() {
    TRY_ASSIGN(Pipe to_child, make_pipe());
    TRY_ASSIGN(Pipe from_child, make_pipe());

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child.read.get(), STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child.write.get(), STDOUT_FILENO);
    // stderr is inherited: the worker's log lines (KCACHE_LOG) go where ours go. Nothing else
    // is: the application's descriptors without O_CLOEXEC (sockets, files) stay out of a
    // process that lives as long as the pool.
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    // The calling thread's mask would be inherited; a worker with SIGTERM blocked, say, because
    // the caller's thread blocks it, could not be stopped.
    sigset_t no_signals;
    sigemptyset(&no_signals);
    posix_spawnattr_setsigmask(&attributes, &no_signals);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);

    std::vector<std::string> argv_strings = {command_};
    argv_strings.insert(argv_strings.end(), args_.begin(), args_.end());
    std::vector<std::string> env_strings = child_environment(
        {{kNvrtcOverride, compiler_path_}, {kNvJitLinkOverride, ptx_compiler_path_}});
    auto argv = pointers_to(argv_strings);
    auto envp = pointers_to(env_strings);

    Worker worker;
    int rc = posix_spawnp(&worker.pid, command_.c_str(), &actions, &attributes, argv.data(),
                          envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    to_child.read.reset();
    from_child.write.reset();
    if (rc != 0) {
        return Error(Errc::kIoError, "cannot start compile worker " + describe_command() + ": " +
                                         std::strerror(rc));
    }
    worker.to_worker = std::move(to_child.write);
    worker.from_worker = std::move(from_child.read);
    {
        std::lock_guard lock(mutex_);
        live_pids_.push_back(worker.pid);
    }

    // The hello proves that the command is a worker of this protocol version, within a deadline:
    // a wrong command that reads forever (cat) or sleeps must fail, not hang the compile.
    auto refuse = [&](const std::string& why) {
        Ending ending = retire(worker);
        return Error(Errc::kIoError, "compile worker " + describe_command() + " (pid " +
                                         std::to_string(worker.pid) + ") " + why + "; it " +
                                         ending.how);
    };
    auto frame = read_frame(worker.from_worker.get(), startup_timeout_);
    if (!frame) {
        return refuse("gave no valid hello within " + std::to_string(startup_timeout_.count()) +
                      " ms: " + frame.error().message());
    }
    if (!frame->has_value()) return refuse("closed its output without a hello");
    auto hello = decode_hello(**frame);
    if (!hello) return refuse("gave no valid hello: " + hello.error().message());
    if (!compiler_identity_.empty() && hello->compiler_identity != compiler_identity_) {
        return refuse("compiles with '" + hello->compiler_identity + "', this process with '" +
                      compiler_identity_ + "'");
    }
    if (!ptx_compiler_identity_.empty() && hello->ptx_compiler_identity != ptx_compiler_identity_) {
        return refuse("links PTX with '" + hello->ptx_compiler_identity + "', this process with '" +
                      ptx_compiler_identity_ + "'");
    }
    util::log_line(util::LogLevel::kDebug,
                   "compile worker pid " + std::to_string(worker.pid) + " started");
    return worker;
}

Result<Result<Compiled>> WorkerPool::exchange(const Worker& worker, const std::string& request) {
    if (auto sent = write_frame(worker.to_worker.get(), request); !sent) {
        return Error(Errc::kIoError, "sending the request: " + sent.error().message());
    }
    // Bounded: a worker that hangs must not hang its caller (and every process waiting on the
    // same fingerprint's lock) for ever. Heavy-header compiles take minutes at worst.
    auto frame = read_frame(worker.from_worker.get(), kCompileTimeout);
    if (!frame) return Error(Errc::kIoError, "reading the answer: " + frame.error().message());
    if (!frame->has_value()) return Error(Errc::kIoError, "no answer (end of file)");
    TRY_ASSIGN(CompileResponse response, decode_response(**frame));
    return Result<Result<Compiled>>(std::move(response));
}

WorkerPool::Ending WorkerPool::retire(Worker& worker) {
    worker.to_worker.reset();
    worker.from_worker.reset();
    {
        std::lock_guard lock(mutex_);
        live_pids_.erase(std::remove(live_pids_.begin(), live_pids_.end(), worker.pid),
                         live_pids_.end());
    }
    // A worker exits by itself at end of input; one that has just crashed may still be exiting.
    // Either is given a moment before SIGKILL, so that the message says how it really ended.
    constexpr auto kGrace = std::chrono::milliseconds(500);
    const auto deadline = std::chrono::steady_clock::now() + kGrace;
    int status = 0;
    for (;;) {
        pid_t reaped = ::waitpid(worker.pid, &status, WNOHANG);
        if (reaped == worker.pid) return Ending{describe_status(status), WIFSIGNALED(status)};
        if (reaped < 0 && errno != EINTR) {
            // ECHILD: the application reaps children itself (SIGCHLD ignored, or a handler).
            return Ending{"was reaped elsewhere", false};
        }
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (void)::kill(worker.pid, SIGKILL);
    while (::waitpid(worker.pid, &status, 0) < 0) {
        if (errno != EINTR) return Ending{"was killed and reaped elsewhere", false};
    }
    return Ending{"did not exit and was killed", false};
}

std::optional<Error> WorkerPool::too_large(const std::string& request, const std::string& what) {
    // Refused before sending, not by write_frame: a failed send would count against a healthy
    // worker.
    if (request.size() <= kMaxFramePayload) return std::nullopt;
    return Error(Errc::kInvalidArgument, what + ": the program is larger than a worker takes (" +
                                             std::to_string(request.size()) + " bytes)");
}

Result<Compiled> WorkerPool::compile_cuda(const CudaProgram& program, const Target& target) {
    const std::string request = encode_request(CompileRequest{program, target});
    const std::string what = program.name + " for " + target.name();
    if (auto refused = too_large(request, what)) return std::move(*refused);
    auto worker = acquire();
    if (!worker) return std::move(worker).error();
    return run(std::move(*worker), request, what);
}

std::optional<Result<Compiled>> WorkerPool::link_ptx_if_idle(const std::string& ptx,
                                                             const Target& target) {
    // Without an nvJitLink of its own this process could not tell a worker's from the one its
    // fingerprints name.
    if (ptx_compiler_identity_.empty()) return std::nullopt;
    std::optional<Worker> worker = acquire_idle();
    if (!worker) return std::nullopt;  // the common case: no copy of the PTX made for nothing
    const std::string request = encode_link_request(LinkRequest{ptx, target});
    const std::string what = "PTX for " + target.name();
    if (too_large(request, what)) {
        release(std::move(*worker));
        return std::nullopt;  // this process links it instead
    }
    auto answer = exchange(*worker, request);
    if (answer) {
        release(std::move(*worker));
        return std::move(*answer);
    }
    // No retry on a fresh worker, as compile_cuda makes: its start would be on this link's
    // critical path. The slot is freed for the next CUDA C++ compile to start one in.
    Ending ending = retire(*worker);
    give_back_slot();
    util::log_line(util::LogLevel::kInfo, "compile worker " + describe_command() + " failed on " +
                                              what + " (pid " + std::to_string(worker->pid) + ": " +
                                              answer.error().message() + "; it " + ending.how +
                                              "); linking in this process");
    return std::nullopt;
}

Result<Compiled> WorkerPool::run(Worker worker, const std::string& request,
                                 const std::string& what) {
    auto first = exchange(worker, request);
    if (first) {
        release(std::move(worker));
        return std::move(*first);
    }
    Ending first_ending = retire(worker);
    std::string first_failure = "pid " + std::to_string(worker.pid) + ": " +
                                first.error().message() + "; it " + first_ending.how;
    util::log_line(util::LogLevel::kInfo, "compile worker " + describe_command() + " failed on " +
                                              what + " (" + first_failure + "), retrying");

    // Once more on a fresh process, in the slot this call still holds: an idle worker may be as
    // dead as the first (all killed together), a fresh one is not.
    auto fresh = spawn();
    if (!fresh) {
        give_back_slot();
        return Error(Errc::kIoError, "compile worker " + describe_command() + " failed on " + what +
                                         " (" + first_failure +
                                         "); no replacement: " + fresh.error().message());
    }
    auto second = exchange(*fresh, request);
    if (second) {
        release(std::move(*fresh));
        return std::move(*second);
    }
    Ending second_ending = retire(*fresh);
    give_back_slot();
    std::string second_failure = "pid " + std::to_string(fresh->pid) + ": " +
                                 second.error().message() + "; it " + second_ending.how;
    // Two workers crashing on the same request: the compiler crashes on this source.
    Errc code =
        first_ending.crashed && second_ending.crashed ? Errc::kCompileFailed : Errc::kIoError;
    return Error(code, "compile worker " + describe_command() + " failed twice on " + what + " (" +
                           first_failure + "; then " + second_failure + ")");
}

}  // namespace kcache::compile
