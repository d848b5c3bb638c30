// SPDX-License-Identifier: Apache-2.0
#include "bench/child_process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

extern char** environ;

namespace kcache::bench {

std::optional<std::string> run_self(
    const std::vector<std::string>& args,
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
    std::vector<char*> envp;
    envp.reserve(variables.size() + 1);
    for (auto& variable : variables) envp.push_back(variable.data());
    envp.push_back(nullptr);

    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::string> argv_text = {self};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(argv_text.size() + 1);
    for (auto& arg : argv_text) argv.push_back(arg.data());
    argv.push_back(nullptr);

    int fds[2];
    if (pipe(fds) != 0) return std::nullopt;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t child = 0;
    const int rc = posix_spawn(&child, self.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    std::string out;
    char buffer[512];
    for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) {
        out.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    if (rc != 0) return std::nullopt;
    int status = 0;
    if (waitpid(child, &status, 0) != child) return std::nullopt;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return out;
}

}  // namespace kcache::bench
