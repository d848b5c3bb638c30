// SPDX-License-Identifier: Apache-2.0
// What a WorkerPool needs to start and end its worker processes: their pipes, their environment,
// the words for how one ended.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kcache/result.hpp"
#include "util/unique_fd.hpp"

namespace kcache::compile::process {

// The variables that name the exact compiler library a process uses.
inline constexpr const char* kNvrtcOverride = "KCACHE_NVRTC_LIBRARY";
inline constexpr const char* kNvJitLinkOverride = "KCACHE_NVJITLINK_LIBRARY";

// A pipe whose ends are both close-on-exec from birth (another thread may spawn meanwhile: a
// worker that inherits another worker's stdin never sees end of file) and above 0-2, so that the
// child's dup2 onto 0 and 1 always makes a fresh descriptor without close-on-exec.
struct Pipe {
    util::UniqueFd read;
    util::UniqueFd write;
};
Result<Pipe> make_pipe();

// "exited with status 1", "killed by signal 11 (Segmentation fault)".
std::string describe_status(int status);

// The child's environment: ours, with KCACHE_NVRTC_LIBRARY and KCACHE_NVJITLINK_LIBRARY set to
// the files this process's fingerprints name, so that the worker cannot pick another compiler
// (this process may have found one already loaded, which the worker would not have). `overrides`
// pairs a variable with its value; an empty value leaves ours as it is.
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// argv/envp for posix_spawn: pointers into `strings`, then a null.
std::vector<char*> pointers_to(std::vector<std::string>& strings);

}  // namespace kcache::compile::process
