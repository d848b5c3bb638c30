// SPDX-License-Identifier: Apache-2.0
// What a program that uses kcache as a library does, for the hostile-directory suite: the
// process-wide cache (KernelCache::global(), configured from the environment and kcache.conf)
// prebuilds one CUDA C++ file for an arch. Usage: kcache_hostile_probe FILE.cu ARCH
// Prints the origin ("compiled", "disk", ...) and exits 0, or prints the error and exits 1.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kcache/kernel_cache.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s FILE.cu ARCH\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    const std::string code = text.str();
    auto origin = kcache::KernelCache::global().prebuild(
        argv[1], [&] { return kcache::Source::cuda(code); }, std::atoi(argv[2]));
    if (!origin) {
        std::fprintf(stderr, "prebuild: %s\n", origin.error().describe().c_str());
        return 1;
    }
    std::printf("origin %d\n", static_cast<int>(*origin));
    return 0;
}
