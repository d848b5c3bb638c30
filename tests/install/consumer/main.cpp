// SPDX-License-Identifier: Apache-2.0
// A user's program: one lookup through the installed library, with no GPU needed. Exits 1 when
// the version the package declares is not the one its header says.
#include <cstdio>
#include <cstring>
#include <kcache/kcache.hpp>
#include <kcache/version.hpp>
#include <string>

#ifndef KCACHE_PACKAGE_VERSION
#error "build with -DKCACHE_PACKAGE_VERSION=\"<the version the package declares>\""
#endif

namespace {

constexpr const char* kNoop = R"(.version 7.8
.target sm_80
.address_size 64
.visible .entry noop() { ret; }
)";

}  // namespace

int main() {
    const std::string parts = std::to_string(KCACHE_VERSION_MAJOR) + "." +
                              std::to_string(KCACHE_VERSION_MINOR) + "." +
                              std::to_string(KCACHE_VERSION_PATCH);
    if (std::strcmp(KCACHE_VERSION, KCACHE_PACKAGE_VERSION) != 0 || parts != KCACHE_VERSION) {
        std::printf("version mismatch: header %s (%s), package %s\n", KCACHE_VERSION, parts.c_str(),
                    KCACHE_PACKAGE_VERSION);
        return 1;
    }
    std::printf("kcache %s\n", kcache::kVersion);

    kcache::CacheOptions options;
    options.host_compile = false;  // the driver's JIT or nothing: no compiler needed here
    kcache::KernelCache cache(options);
    auto kernel = cache.kernel(
        "consumer:noop", [] { return kcache::Source::ptx(kNoop); }, "noop");
    std::printf("lookup: %s\n", kernel ? "ok" : kernel.error().describe().c_str());
    const kcache::CacheStats stats = cache.stats();
    std::printf("stats: hits=%llu misses=%llu\n", static_cast<unsigned long long>(stats.hits),
                static_cast<unsigned long long>(stats.misses));
    return 0;
}
