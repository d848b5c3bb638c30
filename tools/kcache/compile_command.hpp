// SPDX-License-Identifier: Apache-2.0
// `kcache compile FILE...`: fills the cache with .cu and .ptx files compiled for an arch, without
// a GPU, so that no kernel is compiled in production.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kcache/kernel_cache.hpp"

namespace kcache::tool {

struct CompileOptions {
    std::vector<std::string> files;
    std::string arch;                   // "sm_90", "sm_90a", "90"; empty: the local GPU's
    std::size_t jobs = 0;               // 0: the machine's cores
    std::vector<std::string> defines;   // -D values
    std::vector<std::string> includes;  // -I values
    // Headers read from disk outside the CUDA toolkit are compiled, not fingerprinted.
    bool allow_disk_headers = false;
    std::vector<std::string> options;  // further NVRTC options
    std::vector<std::string> name_expressions;
};

// `cache` is the library's configuration for the directory (to_cache_options), its worker
// command set; -j replaces its compile_workers. Exit 1 names every file that was not stored.
int run_compile(const CompileOptions& options, CacheOptions cache);

}  // namespace kcache::tool
