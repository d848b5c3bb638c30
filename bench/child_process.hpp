// SPDX-License-Identifier: Apache-2.0
// Runs this benchmark program again as a child process, for measurements that need a new process
// (a warm start is a new process's first loads; the driver reads its cache settings at cuInit).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kcache::bench {

// This program with `args`, its environment plus `environment` (NAME, VALUE pairs, replacing
// ones already set). The child's standard output if it exited 0; nullopt otherwise.
std::optional<std::string> run_self(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& environment = {});

struct QuietRun {
    int status = 0;     // the exit status
    double cpu_ms = 0;  // user and system time, its own and its children's
};
// Another program (`program`, a path) with `args` and `environment` added, its standard output
// and error sent to /dev/null; nullopt when it could not be run or did not exit. For timing a
// command whose output is not wanted (`kcache ls` of a large directory).
std::optional<QuietRun> run_quiet(
    const std::string& program, const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& environment = {});

}  // namespace kcache::bench
