// SPDX-License-Identifier: Apache-2.0
/* The C API's errors without a GPU: status names, NULL arguments, compile failures with the
 * compiler's log, lookups on a machine with no GPU, a generator's own failures, warm-up's
 * per-item statuses, and the per-thread last error. Each test is a function `static int
 * Name(void)`; tests.cmake registers one ctest test per such function. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "check.h"

static const char kNoopPtx[] =
    ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry noop() { ret; }\n";

static kcache_status make_noop(void* user_data, kcache_source_builder* source) {
    int* calls = (int*)user_data;
    if (calls != NULL) ++*calls;
    return kcache_source_set_ptx(source, kNoopPtx, KCACHE_NUL_TERMINATED);
}

/* PTX that nvJitLink rejects: an instruction that does not exist. */
static kcache_status make_bad_ptx(void* user_data, kcache_source_builder* source) {
    (void)user_data;
    return kcache_source_set_ptx(source,
                                 ".version 7.8\n.target sm_80\n.address_size 64\n"
                                 ".visible .entry broken() { frobnicate.u32 %r1; ret; }\n",
                                 KCACHE_NUL_TERMINATED);
}

static kcache_status make_refusal(void* user_data, kcache_source_builder* source) {
    (void)user_data;
    kcache_source_set_error(source, "no variant for 7 warps");
    return KCACHE_INVALID_ARGUMENT;
}

static kcache_status make_nothing(void* user_data, kcache_source_builder* source) {
    (void)user_data;
    (void)source;
    return KCACHE_OK;
}

/* Ignores its setter's failure and says OK. */
static kcache_status make_careless(void* user_data, kcache_source_builder* source) {
    (void)user_data;
    (void)kcache_source_set_ptx(source, NULL, 0);
    return KCACHE_OK;
}

static kcache_cache* memory_cache(void) {
    kcache_options options;
    kcache_cache* cache = NULL;
    kcache_options_init(&options);
    return kcache_cache_create(&options, &cache) == KCACHE_OK ? cache : NULL;
}

static int is_no_gpu(kcache_status status) {
    return status == KCACHE_NO_DRIVER || status == KCACHE_NO_CONTEXT;
}

static int StatusNamesAreKcachesWords(void) {
    CHECK(strcmp(kcache_status_name(KCACHE_OK), "ok") == 0);
    CHECK(strcmp(kcache_status_name(KCACHE_NO_DRIVER), "no-driver") == 0);
    CHECK(strcmp(kcache_status_name(KCACHE_COMPILE_FAILED), "compile-failed") == 0);
    CHECK(strcmp(kcache_status_name(KCACHE_ARTIFACT_GONE), "artifact-gone") == 0);
    CHECK(strcmp(kcache_status_name(KCACHE_OUT_OF_MEMORY), "out-of-memory") == 0);
    CHECK(strcmp(kcache_status_name(KCACHE_INTERNAL_ERROR), "internal-error") == 0);
    CHECK(strcmp(kcache_status_name((kcache_status)99), "unknown") == 0);
    CHECK(strcmp(kcache_provenance_name(KCACHE_PROVENANCE_COMPILED), "compiled") == 0);
    CHECK(strcmp(kcache_provenance_name(KCACHE_PROVENANCE_REMOTE_TIER), "remote tier") == 0);
    CHECK(strcmp(kcache_provenance_name((kcache_provenance)42), "unknown") == 0);
    return 0;
}

static int NullArgumentsAreInvalidArgumentsNamingTheCall(void) {
    kcache_cache* cache = memory_cache();
    kcache_cache* other = (kcache_cache*)&cache;
    kcache_kernel* kernel = (kcache_kernel*)&cache;
    kcache_module* module = (kcache_module*)&cache;
    const uint32_t one[3] = {1, 1, 1};
    size_t size = 4;
    void* arg = &size;
    CHECK(cache != NULL);

    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_create(NULL, &other));
    CHECK(other == NULL);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_create_from_env(NULL));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_kernel(NULL, "k", make_noop, NULL, "noop", &kernel));
    CHECK(kernel == NULL);
    CHECK_CONTAINS(kcache_last_error_message(), "kcache_cache_get_kernel: cache is NULL");
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_kernel(cache, NULL, make_noop, NULL, "noop", &kernel));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_kernel(cache, "k", NULL, NULL, "noop", &kernel));
    CHECK_CONTAINS(kcache_last_error_message(), "make");
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_kernel(cache, "k", make_noop, NULL, NULL, &kernel));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_kernel(cache, "k", make_noop, NULL, "noop", NULL));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_get_module(cache, "k", make_noop, NULL, NULL));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_get_or_compile(cache, "k", NULL, &module));
    CHECK(module == NULL);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_module_get_kernel(NULL, "noop", &kernel));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_kernel_clone(NULL, &kernel));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_prebuild(cache, "k", NULL, NULL, 90, NULL));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_stats(cache, NULL));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_launch(NULL, one, one, 0, NULL, NULL, 0));
    CHECK_CONTAINS(kcache_last_error_message(), "kcache_launch: kernel is NULL");
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_launch_sized(NULL, one, one, 0, NULL, &arg, &size, 1));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_compile_lock_launch(cache, "k", kNoopPtx, "noop", NULL, one, 0, NULL,
                                                  NULL, 0));
    CHECK_CONTAINS(kcache_last_error_message(), "grid or block is NULL");
    CHECK_STATUS(
        KCACHE_INVALID_ARGUMENT,
        kcache_cache_compile_lock_launch(cache, "k", kNoopPtx, "noop", one, one, 0, NULL, NULL, 2));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_source_set_ptx(NULL, kNoopPtx, 3));
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_exclusive_clear(NULL));

    /* Queries and releases of NULL are harmless. */
    CHECK(strcmp(kcache_kernel_name(NULL), "") == 0);
    CHECK(kcache_kernel_param_count(NULL) == -1);
    CHECK(strcmp(kcache_module_key(NULL), "") == 0);
    CHECK(kcache_module_arch(NULL) == 0);
    CHECK(strcmp(kcache_module_fingerprint(NULL), "") == 0);
    CHECK(kcache_cache_size(NULL) == 0);
    kcache_kernel_release(NULL);
    kcache_module_release(NULL);
    kcache_cache_destroy(NULL);
    kcache_cache_destroy(cache);
    return 0;
}

static int BadPtxIsACompileErrorCarryingTheCompilersLog(void) {
    kcache_cache* cache = memory_cache();
    kcache_stats stats;
    kcache_status status;
    CHECK(cache != NULL);
    status = kcache_cache_prebuild(cache, "broken:1", make_bad_ptx, NULL, 90, NULL);
    if (status == KCACHE_UNSUPPORTED) {
        fprintf(stderr, "skipped: %s\n", kcache_last_error_message());
        return C_TEST_SKIP;
    }
    CHECK_STATUS(KCACHE_COMPILE_FAILED, status);
    CHECK(kcache_last_error_status() == KCACHE_COMPILE_FAILED);
    CHECK(strncmp(kcache_last_error_message(), "compile-failed: ", 16) == 0);
    CHECK_CONTAINS(kcache_last_error_message(), "key 'broken:1'");
    /* The compiler's log names what it did not understand, and the message carries it. */
    CHECK_CONTAINS(kcache_last_error_log(), "frobnicate");
    CHECK_CONTAINS(kcache_last_error_message(), kcache_last_error_log());
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    CHECK_STATUS(KCACHE_OK, kcache_cache_stats(cache, &stats));
    CHECK(stats.compile_failures == 1);
    CHECK(stats.compiles == 0);
    /* The last error outlives the successful call. */
    CHECK(kcache_last_error_status() == KCACHE_COMPILE_FAILED);
    kcache_cache_destroy(cache);
    return 0;
}

static int AnArchNoCompilerTakesIsRefusedBeforeTheGeneratorRuns(void) {
    kcache_cache* cache = memory_cache();
    int calls = 0;
    CHECK(cache != NULL);
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_prebuild(cache, "noop", make_noop, &calls, 20, NULL));
    CHECK(calls == 0);
    kcache_cache_destroy(cache);
    return 0;
}

static int ALookupWithoutAGpuSaysWhyAndRunsNoGenerator(void) {
    kcache_cache* cache = memory_cache();
    kcache_kernel* kernel = (kcache_kernel*)&cache;
    kcache_module* module = (kcache_module*)&cache;
    const uint32_t one[3] = {1, 1, 1};
    kcache_status status;
    int calls = 0;
    CHECK(cache != NULL);

    status = kcache_cache_get_kernel(cache, "noop", make_noop, &calls, "noop", &kernel);
    CHECK(is_no_gpu(status));
    CHECK(kernel == NULL);
    CHECK(calls == 0);
    CHECK(kcache_last_error_status() == status);
    CHECK_CONTAINS(kcache_last_error_message(), kcache_status_name(status));
    if (status == KCACHE_NO_DRIVER) CHECK_CONTAINS(kcache_last_error_message(), "no CUDA driver");

    CHECK(is_no_gpu(kcache_cache_get_module(cache, "noop", make_noop, &calls, &module)));
    CHECK(module == NULL);
    CHECK(is_no_gpu(kcache_cache_get_or_compile(cache, "noop", kNoopPtx, &module)));
    CHECK(is_no_gpu(kcache_cache_compile_lock_launch(cache, "noop", kNoopPtx, "noop", one, one, 0,
                                                     NULL, NULL, 0)));
    CHECK(calls == 0);
    CHECK(kcache_cache_size(cache) == 0);
    kcache_cache_destroy(cache);
    return 0;
}

static int AGeneratorsOwnErrorIsThePrebuildsError(void) {
    kcache_cache* cache = memory_cache();
    CHECK(cache != NULL);
    CHECK_STATUS(KCACHE_SOURCE_FAILED,
                 kcache_cache_prebuild(cache, "warps:7", make_refusal, NULL, 90, NULL));
    CHECK_CONTAINS(kcache_last_error_message(), "source-failed: key 'warps:7'");
    CHECK_CONTAINS(kcache_last_error_message(), "no variant for 7 warps");
    CHECK_CONTAINS(kcache_last_error_message(), "invalid-argument"); /* what it returned */
    kcache_cache_destroy(cache);
    return 0;
}

static int AGeneratorThatSetsNoSourceFailsTheLookup(void) {
    kcache_cache* cache = memory_cache();
    CHECK(cache != NULL);
    CHECK_STATUS(KCACHE_SOURCE_FAILED,
                 kcache_cache_prebuild(cache, "empty", make_nothing, NULL, 90, NULL));
    CHECK_CONTAINS(kcache_last_error_message(), "set no source");
    kcache_cache_destroy(cache);
    return 0;
}

static int AFailedSetterFailsTheLookupThoughTheGeneratorSaysOk(void) {
    kcache_cache* cache = memory_cache();
    CHECK(cache != NULL);
    CHECK_STATUS(KCACHE_SOURCE_FAILED,
                 kcache_cache_prebuild(cache, "careless", make_careless, NULL, 90, NULL));
    CHECK_CONTAINS(kcache_last_error_message(), "kcache_source_set_ptx: bytes are NULL");
    kcache_cache_destroy(cache);
    return 0;
}

static int WarmUpWithoutAGpuGivesEachItemItsStatus(void) {
    kcache_cache* cache = memory_cache();
    kcache_warm_up_item items[2];
    kcache_status status;
    int calls = 0;
    CHECK(cache != NULL);
    memset(items, 0, sizeof items);
    items[0].key = "noop:a";
    items[0].make = make_noop;
    items[0].user_data = &calls;
    items[0].kernel_name = "noop";
    items[0].status = KCACHE_OK;
    items[1] = items[0];
    items[1].key = "noop:b";
    status = kcache_cache_warm_up(cache, items, 2, sizeof items[0], 2);
    CHECK(is_no_gpu(status));
    CHECK(items[0].status == status && items[1].status == status);
    CHECK(items[0].kernel == NULL && items[1].kernel == NULL);
    CHECK(calls == 0);
    CHECK_CONTAINS(kcache_last_error_message(), "2 of 2 items failed");

    /* An item without a key fails the call before anything runs. */
    items[1].key = NULL;
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT,
                 kcache_cache_warm_up(cache, items, 2, sizeof items[0], 2));
    CHECK_CONTAINS(kcache_last_error_message(), "item 1");
    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_warm_up(cache, items, 2, 8, 2));
    /* No items: nothing to do. */
    CHECK_STATUS(KCACHE_OK, kcache_cache_warm_up(cache, NULL, 0, sizeof items[0], 2));
    kcache_cache_destroy(cache);
    return 0;
}

/* ---- The last error belongs to its thread. */

static void* fail_once(void* argument) {
    (void)argument;
    (void)kcache_cache_clear(NULL);
    return NULL;
}

static int TheLastErrorIsPerThread(void) {
    pthread_t thread;
    kcache_cache* cache = memory_cache();
    CHECK(cache != NULL);
    /* Nothing failed on this thread yet. */
    CHECK(kcache_last_error_status() == KCACHE_OK);
    CHECK(strcmp(kcache_last_error_message(), "") == 0);
    CHECK(pthread_create(&thread, NULL, fail_once, NULL) == 0);
    CHECK(pthread_join(thread, NULL) == 0);
    CHECK(kcache_last_error_status() == KCACHE_OK);
    CHECK(strcmp(kcache_last_error_message(), "") == 0);

    CHECK_STATUS(KCACHE_INVALID_ARGUMENT, kcache_cache_stats(NULL, NULL));
    CHECK_STATUS(KCACHE_OK, kcache_cache_clear(cache));
    CHECK(kcache_last_error_status() == KCACHE_INVALID_ARGUMENT);
    CHECK_CONTAINS(kcache_last_error_message(), "kcache_cache_stats");
    kcache_cache_destroy(cache);
    return 0;
}

int main(int argc, char** argv) {
    static const struct c_test tests[] = {
        /* First: it needs a thread on which nothing failed yet. */
        {"TheLastErrorIsPerThread", TheLastErrorIsPerThread},
        {"StatusNamesAreKcachesWords", StatusNamesAreKcachesWords},
        {"NullArgumentsAreInvalidArgumentsNamingTheCall",
         NullArgumentsAreInvalidArgumentsNamingTheCall},
        {"BadPtxIsACompileErrorCarryingTheCompilersLog",
         BadPtxIsACompileErrorCarryingTheCompilersLog},
        {"AnArchNoCompilerTakesIsRefusedBeforeTheGeneratorRuns",
         AnArchNoCompilerTakesIsRefusedBeforeTheGeneratorRuns},
        {"ALookupWithoutAGpuSaysWhyAndRunsNoGenerator",
         ALookupWithoutAGpuSaysWhyAndRunsNoGenerator},
        {"AGeneratorsOwnErrorIsThePrebuildsError", AGeneratorsOwnErrorIsThePrebuildsError},
        {"AGeneratorThatSetsNoSourceFailsTheLookup", AGeneratorThatSetsNoSourceFailsTheLookup},
        {"AFailedSetterFailsTheLookupThoughTheGeneratorSaysOk",
         AFailedSetterFailsTheLookupThoughTheGeneratorSaysOk},
        {"WarmUpWithoutAGpuGivesEachItemItsStatus", WarmUpWithoutAGpuGivesEachItemItsStatus},
    };
    return c_test_main(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
