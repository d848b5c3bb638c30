// SPDX-License-Identifier: Apache-2.0
/* A C user's program: one lookup through the installed library's C API, with no GPU needed.
 * Prints what main.cpp prints, so that the install test checks both alike. Exits 1 when the
 * library's version is not the one the package declares. */
#include <kcache/kcache.h>
#include <stdio.h>
#include <string.h>

#ifndef KCACHE_PACKAGE_VERSION
#error "build with -DKCACHE_PACKAGE_VERSION=\"<the version the package declares>\""
#endif

static kcache_status make_noop(void* user_data, kcache_source_builder* source) {
    (void)user_data;
    return kcache_source_set_ptx(source,
                                 ".version 7.8\n.target sm_80\n.address_size 64\n"
                                 ".visible .entry noop() { ret; }\n",
                                 KCACHE_NUL_TERMINATED);
}

int main(void) {
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_kernel* kernel = NULL;
    kcache_stats stats;
    kcache_status status;
    if (strcmp(kcache_version(), KCACHE_PACKAGE_VERSION) != 0) {
        printf("version mismatch: library %s, package %s\n", kcache_version(),
               KCACHE_PACKAGE_VERSION);
        return 1;
    }
    printf("kcache %s\n", kcache_version());

    kcache_options_init(&options);
    options.host_compile = 0; /* the driver's JIT or nothing: no compiler needed here */
    if (kcache_cache_create(&options, &cache) != KCACHE_OK) {
        printf("cache: %s\n", kcache_last_error_message());
        return 1;
    }
    status = kcache_cache_get_kernel(cache, "consumer:noop", make_noop, NULL, "noop", &kernel);
    printf("lookup: %s\n", status == KCACHE_OK ? "ok" : kcache_last_error_message());
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    if (kcache_cache_stats(cache, &stats) != KCACHE_OK) return 1;
    printf("stats: hits=%llu misses=%llu\n", (unsigned long long)stats.hits,
           (unsigned long long)stats.misses);
    kcache_kernel_release(kernel);
    kcache_cache_destroy(cache);
    return 0;
}
