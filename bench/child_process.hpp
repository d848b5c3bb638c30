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

}  // namespace kcache::bench
