// SPDX-License-Identifier: Apache-2.0
/* The C API's caches without a GPU: options and the environment, prebuilds of PTX and CUDA C++
 * into the disk tier (nvJitLink and NVRTC run on the host), statistics, clear, the exclusive
 * guard, the global cache and the version. Each test is a function `static int Name(void)`;
 * tests.cmake registers one ctest test per such function. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#ifndef KCACHE_EXPECTED_VERSION
#error "build with -DKCACHE_EXPECTED_VERSION=\"<kcache's version>\""
#endif

/* A kernel nvJitLink compiles for any arch kcache takes: x[tid] *= factor. */
static const char kScalePtx[] =
    ".version 7.8\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry scale(.param .u64 scale_x, .param .f32 scale_factor)\n"
    "{\n"
    "    .reg .b32 %r<2>;\n"
    "    .reg .f32 %f<3>;\n"
    "    .reg .b64 %rd<5>;\n"
    "    ld.param.u64 %rd1, [scale_x];\n"
    "    ld.param.f32 %f1, [scale_factor];\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    mul.wide.u32 %rd3, %r1, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    ld.global.f32 %f2, [%rd4];\n"
    "    mul.f32 %f2, %f2, %f1;\n"
    "    st.global.f32 [%rd4], %f2;\n"
    "    ret;\n"
    "}\n";

static kcache_status make_scale_ptx(void* user_data, kcache_source_builder* source) {
    int* calls = (int*)user_data;
    if (calls != NULL) ++*calls;
    return kcache_source_set_ptx(source, kScalePtx, KCACHE_NUL_TERMINATED);
}

/* CUDA C++ with an option and a header, whose value the option picks. */
static kcache_status make_offset_cuda(void* user_data, kcache_source_builder* source) {
    const char* define = (const char*)user_data;
    static const char code[] =
        "#include \"offset.h\"\n"
        "extern \"C\" __global__ void offset(float* x) { x[threadIdx.x] += OFFSET; }\n";
    kcache_status status = kcache_source_set_cuda(source, code, sizeof code - 1);
    if (status == KCACHE_OK) status = kcache_source_add_option(source, define);
    if (status == KCACHE_OK) {
        status = kcache_source_add_header(source, "offset.h", "#define OFFSET (N * 2.0f)\n",
                                          KCACHE_NUL_TERMINATED);
    }
    return status;
}

/* A cache whose disk tier is `directory`; NULL on failure. */
static kcache_cache* cache_on(const char* directory) {
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_options_init(&options);
    options.disk_directory = directory;
    if (kcache_cache_create(&options, &cache) != KCACHE_OK) return NULL;
    return cache;
}

static int get_stats(const kcache_cache* cache, kcache_stats* stats) {
    memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
    return kcache_cache_stats(cache, stats) == KCACHE_OK;
}

/* nvJitLink is needed to prebuild PTX; without it these tests cannot say anything. */
static int prebuild_is_unsupported(kcache_status status) {
    if (status != KCACHE_UNSUPPORTED) return 0;
    fprintf(stderr, "skipped: %s\n", kcache_last_error_message());
    return 1;
}

static int VersionIsTheOneThisSuiteWasBuiltFor(void) {
    CHECK(strcmp(kcache_version(), KCACHE_EXPECTED_VERSION) == 0);
    return 0;
}

static int OptionsInitGivesTheCppDefaults(void) {
    kcache_options options;
    memset(&options, 0xab, sizeof options);
    kcache_options_init(&options);
    CHECK(options.struct_size == sizeof options);
    CHECK(options.max_entries == 1024);
    CHECK(options.verify == 0);
    CHECK(options.host_compile == 1);
    CHECK(options.memory_bytes == 256u << 20);
    CHECK(options.disk_directory == NULL);
    CHECK(options.read_only == 0);
    CHECK(options.remote == NULL);
    CHECK(options.compile_workers == 0);
    CHECK(options.disk_max_bytes == (uint64_t)4 << 30);
    CHECK(options.disk_max_files == 0);
    CHECK(options.bundle_warm_ups == 1);
    return 0;
}

static int APrebuildOfPtxFillsTheDiskTierAndIsCountedOnce(void) {
    char dir[256];
    kcache_cache* cache;
    kcache_provenance provenance = KCACHE_PROVENANCE_BINARY;
    kcache_stats stats;
    int calls = 0;
    kcache_status status;
    CHECK(c_test_temp_dir(dir) == 0);
    cache = cache_on(dir);
    CHECK(cache != NULL);

    status = kcache_cache_prebuild(cache, "scale:f32", make_scale_ptx, &calls, 90, &provenance);
    if (prebuild_is_unsupported(status)) return C_TEST_SKIP;
    CHECK_STATUS(KCACHE_OK, status);
    CHECK(provenance == KCACHE_PROVENANCE_COMPILED);
    CHECK_STATUS(KCACHE_OK, kcache_cache_prebuild(cache, "scale:f32", make_scale_ptx, &calls, 90,
                                                  &provenance));
    CHECK(provenance == KCACHE_PROVENANCE_MEMORY_TIER);
    CHECK(c_test_count_entries(dir) == 1);

    CHECK(get_stats(cache, &stats));
    CHECK(stats.struct_size == sizeof stats);
    CHECK(stats.prebuilds == 2);
    CHECK(stats.prebuild_compiles == 1);
    CHECK(stats.compiles == 1);
    CHECK(stats.disk_writes == 1);
    CHECK(stats.disk_enabled == 1);
    CHECK(stats.hits + stats.misses == 0); /* a prebuild is no lookup */
    CHECK(stats.entries == 0);             /* nor is anything loaded */
    CHECK(kcache_cache_size(cache) == 0);
    kcache_cache_destroy(cache);

    /* A new cache on the same directory finds it on disk. */
    cache = cache_on(dir);
    CHECK(cache != NULL);
    CHECK_STATUS(KCACHE_OK, kcache_cache_prebuild(cache, "scale:f32", make_scale_ptx, &calls, 90,
                                                  &provenance));
    CHECK(provenance == KCACHE_PROVENANCE_DISK_TIER);
    CHECK(strcmp(kcache_provenance_name(provenance), "disk tier") == 0);
    kcache_cache_destroy(cache);
    CHECK(c_test_count_entries(dir) == 1);
    c_test_remove_dir(dir);
    return 0;
}

static int APrebuildOfCudaCppKeepsItsOptionInTheFingerprint(void) {
    char dir[256];
    kcache_cache* cache;
    kcache_provenance provenance = KCACHE_PROVENANCE_BINARY;
    kcache_status status;
    CHECK(c_test_temp_dir(dir) == 0);
    cache = cache_on(dir);
    CHECK(cache != NULL);
    status = kcache_cache_prebuild(cache, "offset:1", make_offset_cuda, "-DN=1", 80, &provenance);
    if (prebuild_is_unsupported(status)) return C_TEST_SKIP;
    CHECK_STATUS(KCACHE_OK, status);
    CHECK(provenance == KCACHE_PROVENANCE_COMPILED);
    /* Another option is another artifact, even under the same key. */
    CHECK_STATUS(KCACHE_OK, kcache_cache_prebuild(cache, "offset:1", make_offset_cuda, "-DN=2", 80,
                                                  &provenance));
    CHECK(provenance == KCACHE_PROVENANCE_COMPILED);
    CHECK(c_test_count_entries(dir) == 2);
    kcache_cache_destroy(cache);
    c_test_remove_dir(dir);
    return 0;
}

static int ACacheFromTheEnvironmentUsesKcacheDir(void) {
    char dir[256];
    kcache_cache* cache = NULL;
    kcache_stats stats;
    kcache_status status;
    CHECK(c_test_temp_dir(dir) == 0);
    CHECK(setenv("KCACHE_DIR", dir, 1) == 0);
    CHECK_STATUS(KCACHE_OK, kcache_cache_create_from_env(&cache));
    CHECK(cache != NULL);
    status = kcache_cache_prebuild(cache, "scale:f32", make_scale_ptx, NULL, 90, NULL);
    if (prebuild_is_unsupported(status)) return C_TEST_SKIP;
    CHECK_STATUS(KCACHE_OK, status);
    CHECK(get_stats(cache, &stats));
    CHECK(stats.disk_enabled == 1);
    CHECK(c_test_count_entries(dir) == 1);
    kcache_cache_destroy(cache);
    c_test_remove_dir(dir);
    unsetenv("KCACHE_DIR");
    return 0;
}

static int ABadSettingInTheEnvironmentIsAnInvalidArgumentNamingIt(void) {
    kcache_cache* cache = (kcache_cache*)&cache; /* not NULL: the call must clear it */
    CHECK(setenv("KCACHE_DISK", "0", 1) == 0);
    CHECK(setenv("KCACHE_COMPILE_WORKERS", "several", 1) == 0);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_create_from_env(&cache));
    CHECK(cache == NULL);
    CHECK(kcache_last_error_status() == KCACHE_INVALID_ARGUMENT);
    CHECK_CONTAINS(kcache_last_error_message(), "invalid-argument: ");
    CHECK_CONTAINS(kcache_last_error_message(), "KCACHE_COMPILE_WORKERS");
    unsetenv("KCACHE_COMPILE_WORKERS");
    unsetenv("KCACHE_DISK");
    return 0;
}

static int OptionsBeyondTheirLimitsAreRefused(void) {
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_options_init(&options);
    options.compile_workers = 100000;
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_create(&options, &cache));
    CHECK(cache == NULL);
    CHECK_CONTAINS(kcache_last_error_message(), "compile_workers");

    kcache_options_init(&options);
    options.struct_size = 0; /* not filled by kcache_options_init */
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_create(&options, &cache));
    CHECK_CONTAINS(kcache_last_error_message(), "struct_size");
    return 0;
}

static int AnOlderSmallerOptionsStructIsReadOnlyAsFarAsItReaches(void) {
    char dir[256];
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_stats stats;
    CHECK(c_test_temp_dir(dir) == 0);
    kcache_options_init(&options);
    options.disk_directory = dir;
    /* A caller built when the struct ended before disk_directory: that field is not read. */
    options.struct_size = offsetof(kcache_options, disk_directory);
    CHECK_STATUS(KCACHE_OK, kcache_cache_create(&options, &cache));
    CHECK(get_stats(cache, &stats));
    CHECK(stats.disk_enabled == 0);
    kcache_cache_destroy(cache);

    options.struct_size = sizeof options;
    CHECK_STATUS(KCACHE_OK, kcache_cache_create(&options, &cache));
    CHECK(get_stats(cache, &stats));
    CHECK(stats.disk_enabled == 1);
    kcache_cache_destroy(cache);
    c_test_remove_dir(dir);
    return 0;
}

static int StatsFillOnlyTheFieldsTheCallersStructHas(void) {
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_stats stats;
    kcache_status status;
    kcache_options_init(&options);
    CHECK_STATUS(KCACHE_OK, kcache_cache_create(&options, &cache));
    status = kcache_cache_prebuild(cache, "scale:f32", make_scale_ptx, NULL, 90, NULL);
    if (prebuild_is_unsupported(status)) return C_TEST_SKIP;
    CHECK_STATUS(KCACHE_OK, status);

    memset(&stats, 0xff, sizeof stats);
    stats.struct_size = offsetof(kcache_stats, prebuild_compiles);
    CHECK_STATUS(KCACHE_OK, kcache_cache_stats(cache, &stats));
    CHECK(stats.struct_size == offsetof(kcache_stats, prebuild_compiles));
    CHECK(stats.compiles == 1);
    CHECK(stats.prebuilds == 1);
    CHECK(stats.prebuild_compiles == UINT64_MAX); /* beyond the caller's struct: untouched */
    CHECK(stats.remote_enabled == -1);

    stats.struct_size = 3; /* too small to hold struct_size itself */
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_stats(cache, &stats));
    kcache_cache_destroy(cache);
    return 0;
}

static int ClearOfAnEmptyCacheSucceedsAndResetsTheThreadsCounters(void) {
    kcache_options options;
    kcache_cache* cache = NULL;
    uint64_t hits = 1, misses = 1;
    kcache_options_init(&options);
    CHECK_STATUS(KCACHE_OK, kcache_cache_create(&options, &cache));
    CHECK_STATUS(KCACHE_OK, kcache_cache_clear(cache));
    CHECK(kcache_cache_size(cache) == 0);
    kcache_thread_stats(&hits, &misses);
    CHECK(hits == 0 && misses == 0);
    kcache_thread_stats(NULL, NULL); /* either may be NULL */
    kcache_reset_thread_stats();
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_clear(NULL));
    kcache_cache_destroy(cache);
    return 0;
}

/* ---- The exclusive guard: another thread's clear waits for its release. */

struct clearer {
    kcache_cache* cache;
    pthread_mutex_t mutex;
    pthread_cond_t changed;
    int started;
    int cleared;
    kcache_status status;
};

static void* clear_in_thread(void* argument) {
    struct clearer* c = (struct clearer*)argument;
    kcache_status status;
    pthread_mutex_lock(&c->mutex);
    c->started = 1;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mutex);
    status = kcache_cache_clear(c->cache);
    pthread_mutex_lock(&c->mutex);
    c->cleared = 1;
    c->status = status;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mutex);
    return NULL;
}

static int TheExclusiveGuardHoldsOffAnotherThreadsClear(void) {
    kcache_options options;
    struct clearer c;
    kcache_exclusive* guard = NULL;
    pthread_t thread;
    const struct timespec pause = {0, 200 * 1000 * 1000};
    int cleared_while_held;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mutex, NULL);
    pthread_cond_init(&c.changed, NULL);
    kcache_options_init(&options);
    CHECK_STATUS(KCACHE_OK, kcache_cache_create(&options, &c.cache));
    CHECK_STATUS(KCACHE_OK, kcache_cache_exclusive(c.cache, &guard));
    CHECK(guard != NULL);

    CHECK(pthread_create(&thread, NULL, clear_in_thread, &c) == 0);
    pthread_mutex_lock(&c.mutex);
    while (!c.started) pthread_cond_wait(&c.changed, &c.mutex);
    pthread_mutex_unlock(&c.mutex);
    /* The other thread is in its clear, or about to be: give it time to finish if it could. */
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&c.mutex);
    cleared_while_held = c.cleared;
    pthread_mutex_unlock(&c.mutex);
    /* The holder itself can still clear. */
    CHECK_STATUS(KCACHE_OK, kcache_exclusive_clear(guard));
    kcache_exclusive_release(guard);

    pthread_mutex_lock(&c.mutex);
    while (!c.cleared) pthread_cond_wait(&c.changed, &c.mutex);
    pthread_mutex_unlock(&c.mutex);
    pthread_join(thread, NULL);
    CHECK(cleared_while_held == 0);
    CHECK(c.status == KCACHE_OK);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_exclusive(NULL, &guard));
    CHECK(guard == NULL);
    kcache_exclusive_release(NULL);
    kcache_cache_destroy(c.cache);
    return 0;
}

static int TheGlobalCacheIsOneBorrowedHandle(void) {
    kcache_cache* first = NULL;
    kcache_cache* second = NULL;
    kcache_stats stats;
    CHECK(setenv("KCACHE_DISK", "0", 1) == 0); /* the global cache must not touch $HOME here */
    CHECK_STATUS(KCACHE_OK, kcache_cache_global(&first));
    CHECK_STATUS(KCACHE_OK, kcache_cache_global(&second));
    CHECK(first != NULL && first == second);
    kcache_cache_destroy(first); /* ignored: it is borrowed */
    CHECK(get_stats(second, &stats));
    CHECK(stats.disk_enabled == 0);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_global(NULL));
    return 0;
}

int main(int argc, char** argv) {
    static const struct c_test tests[] = {
        {"VersionIsTheOneThisSuiteWasBuiltFor", VersionIsTheOneThisSuiteWasBuiltFor},
        {"OptionsInitGivesTheCppDefaults", OptionsInitGivesTheCppDefaults},
        {"APrebuildOfPtxFillsTheDiskTierAndIsCountedOnce",
         APrebuildOfPtxFillsTheDiskTierAndIsCountedOnce},
        {"APrebuildOfCudaCppKeepsItsOptionInTheFingerprint",
         APrebuildOfCudaCppKeepsItsOptionInTheFingerprint},
        {"ACacheFromTheEnvironmentUsesKcacheDir", ACacheFromTheEnvironmentUsesKcacheDir},
        {"ABadSettingInTheEnvironmentIsAnInvalidArgumentNamingIt",
         ABadSettingInTheEnvironmentIsAnInvalidArgumentNamingIt},
        {"OptionsBeyondTheirLimitsAreRefused", OptionsBeyondTheirLimitsAreRefused},
        {"AnOlderSmallerOptionsStructIsReadOnlyAsFarAsItReaches",
         AnOlderSmallerOptionsStructIsReadOnlyAsFarAsItReaches},
        {"StatsFillOnlyTheFieldsTheCallersStructHas", StatsFillOnlyTheFieldsTheCallersStructHas},
        {"ClearOfAnEmptyCacheSucceedsAndResetsTheThreadsCounters",
         ClearOfAnEmptyCacheSucceedsAndResetsTheThreadsCounters},
        {"TheExclusiveGuardHoldsOffAnotherThreadsClear",
         TheExclusiveGuardHoldsOffAnotherThreadsClear},
        {"TheGlobalCacheIsOneBorrowedHandle", TheGlobalCacheIsOneBorrowedHandle},
    };
    return c_test_main(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
