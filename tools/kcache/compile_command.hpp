// `kcache compile FILE...`: fills the cache with .cu and .ptx files compiled for an arch, without
// a GPU, so that no kernel is compiled in production.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kcache::tool {

struct CompileOptions {
    std::vector<std::string> files;
    std::string arch;                   // "sm_90", "sm_90a", "90"; empty: the local GPU's
    std::size_t jobs = 0;               // 0: the machine's cores
    std::vector<std::string> defines;   // -D values
    std::vector<std::string> includes;  // -I values
    std::vector<std::string> options;   // further NVRTC options
    std::vector<std::string> name_expressions;
    std::string directory;
    std::string worker_command;  // this program, for CUDA C++ worker processes
};

int run_compile(const CompileOptions& options);

}  // namespace kcache::tool
