// SPDX-License-Identifier: Apache-2.0
#include "bench/child_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "compile/worker_process.hpp"

extern char** environ;

namespace kcache::bench {
namespace {

// This process's environment with `environment` added, replacing variables of the same name.
std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& environment) {
    std::vector<std::string> variables;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        bool replaced = false;
        for (const auto& [name, value] : environment) {
            replaced = replaced || (std::strncmp(*entry, name.c_str(), name.size()) == 0 &&
                                    (*entry)[name.size()] == '=');
        }
        if (!replaced) variables.emplace_back(*entry);
    }
    for (const auto& [name, value] : environment) {
        variables.push_back(std::string(name).append("=").append(value));
    }
    return variables;
}

// Spawns `program` (argv[0] included in `argv_text`) with `actions`; the child's id, or -1.
pid_t spawn(const std::string& program, std::vector<std::string> argv_text,
            const std::vector<std::pair<std::string, std::string>>& environment,
            const posix_spawn_file_actions_t& actions) {
    std::vector<std::string> variables = environment_with(environment);
    std::vector<char*> envp = compile::process::pointers_to(variables);
    std::vector<char*> argv = compile::process::pointers_to(argv_text);
    pid_t child = 0;
    if (posix_spawn(&child, program.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) {
        return -1;
    }
    return child;
}

// The child's exit status; nullopt when it did not exit (a signal) or could not be waited for.
std::optional<int> exit_status(pid_t child) {
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return std::nullopt;
    return WEXITSTATUS(status);
}

}  // namespace

std::optional<std::string> run_self(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& environment) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::string> argv_text = {self};
    argv_text.insert(argv_text.end(), args.begin(), args.end());

    int fds[2];
    if (pipe(fds) != 0) return std::nullopt;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    const pid_t child = spawn(self, std::move(argv_text), environment, actions);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    std::string out;
    char buffer[512];
    for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) {
        out.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    if (child < 0) return std::nullopt;
    if (exit_status(child) != 0) return std::nullopt;
    return out;
}

std::optional<QuietRun> run_quiet(
    const std::string& program, const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& environment) {
    std::vector<std::string> argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    const pid_t child = spawn(program, std::move(argv_text), environment, actions);
    posix_spawn_file_actions_destroy(&actions);
    if (child < 0) return std::nullopt;
    int status = 0;
    struct rusage usage {};
    if (wait4(child, &status, 0, &usage) != child || !WIFEXITED(status)) return std::nullopt;
    const auto ms = [](const timeval& time) {
        return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
    };
    return QuietRun{WEXITSTATUS(status), ms(usage.ru_utime) + ms(usage.ru_stime)};
}

}  // namespace kcache::bench
