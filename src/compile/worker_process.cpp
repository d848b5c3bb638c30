// SPDX-License-Identifier: Apache-2.0
// What starting and ending a compile worker process needs (compile/worker_process.hpp).
#include "compile/worker_process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace kcache::compile::process {

Result<Pipe> make_pipe() {
    int fds[2] = {-1, -1};
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        return Error(Errc::kIoError, std::string("pipe2: ") + std::strerror(errno));
    }
    Pipe pipe{util::UniqueFd(fds[0]), util::UniqueFd(fds[1])};
    for (util::UniqueFd* end : {&pipe.read, &pipe.write}) {
        if (end->get() > STDERR_FILENO) continue;
        util::UniqueFd moved(::fcntl(end->get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1));
        if (!moved) return Error(Errc::kIoError, std::string("fcntl: ") + std::strerror(errno));
        *end = std::move(moved);
    }
    return pipe;
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    }
    return "ended with wait status " + std::to_string(status);
}

std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
    std::vector<std::string> out;
    auto overridden = [&](const char* entry) {
        for (const auto& [name, value] : overrides) {
            if (!value.empty() && std::strncmp(entry, name.c_str(), name.size()) == 0 &&
                entry[name.size()] == '=') {
                return true;
            }
        }
        return false;
    };
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        if (!overridden(*entry)) out.emplace_back(*entry);
    }
    for (const auto& [name, value] : overrides) {
        if (!value.empty()) out.emplace_back(name).append("=").append(value);
    }
    return out;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (auto& text : strings) out.push_back(text.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace kcache::compile::process
