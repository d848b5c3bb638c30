// SPDX-License-Identifier: Apache-2.0
// KernelCache over the fake driver: hits and misses, statistics, errors, verification,
// configuration, the seed's calls, clear() and the exclusive guard.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "build/fingerprints.hpp"
#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "testing/scoped_env.hpp"
#include "util/epoch.hpp"
#include "util/fingerprint.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;
using namespace std::chrono_literals;

class KernelCacheTest : public ::testing::Test {
protected:
    void SetUp() override { reset_thread_stats(); }

    Result<KernelHandle> residual_add() {
        return cache.kernel(
            "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake)};
};

using test::ScopedEnv;

// --- hits and misses -----------------------------------------------------------------------

TEST_F(KernelCacheTest, MissCompilesThenHitReusesTheModule) {
    auto first = residual_add();
    auto second = residual_add();

    ASSERT_TRUE(first.ok()) << first.error().describe();
    ASSERT_TRUE(second.ok()) << second.error().describe();
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_EQ(first->module().source_digest(), second->module().source_digest());
}

TEST(KernelCacheTable, EveryKeyOfAThousandIsFoundAgainAsTheTableGrows) {
    // The map grows in place and by rebuilding; no entry may be lost on the way.
    auto fake = std::make_shared<fakes::FakeDriver>();
    KernelCache cache(test::fake_options(fake, 4096));
    const int count = 1000;
    // Built apart: GCC 12's -Wrestrict misfires on "k" + std::to_string(i) in a Release build.
    std::vector<std::string> keys;
    for (int i = 0; i < count; ++i) keys.push_back(std::string("key-") + std::to_string(i));
    for (int i = 0; i < count; ++i) {
        auto kernel = cache.kernel(
            keys[static_cast<std::size_t>(i)], [] { return test::residual_add_source(); },
            "residual_add");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        ASSERT_EQ(cache.size(), static_cast<std::size_t>(i + 1));
    }
    int generated = 0;  // a lost entry would be generated and loaded again
    for (int i = 0; i < count; ++i) {
        auto kernel = cache.kernel(
            keys[static_cast<std::size_t>(i)],
            [&] {
                ++generated;
                return test::residual_add_source();
            },
            "residual_add");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    }
    EXPECT_EQ(generated, 0);
    EXPECT_EQ(fake->loads(), count);
    EXPECT_EQ(cache.stats().hits, static_cast<std::uint64_t>(count));
}

TEST_F(KernelCacheTest, SourceGeneratorIsNotCalledOnAHit) {
    int calls = 0;
    auto generate = test::counting_residual_add(calls);

    ASSERT_TRUE(cache.kernel("residual_add:f32", generate, "residual_add").ok());
    ASSERT_TRUE(cache.kernel("residual_add:f32", generate, "residual_add").ok());
    ASSERT_TRUE(cache.module("residual_add:f32", generate).ok());

    EXPECT_EQ(calls, 1);
}

TEST_F(KernelCacheTest, HandleLaunchesThroughTheDriver) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());

    auto launched = test::launch_residual_add(*handle);

    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->launches_of("residual_add"), 1);
}

TEST_F(KernelCacheTest, ModuleHandleReportsKeyArchAndSourceDigest) {
    auto module = cache.module("residual_add:f32", [] { return test::residual_add_source(); });
    ASSERT_TRUE(module.ok());

    EXPECT_EQ(module->key(), "residual_add:f32");
    EXPECT_EQ(module->arch(), 90);
    EXPECT_EQ(module->source_digest(), build::source_digest(test::residual_add_source(), 90).hex());
}

TEST_F(KernelCacheTest, GeneratorMayReturnResultOfSource) {
    auto handle = cache.kernel(
        "scale", []() -> Result<Source> { return test::scale_source(); }, "scale_kernel");
    ASSERT_TRUE(handle.ok()) << handle.error().describe();
    EXPECT_EQ(handle->name(), "scale_kernel");
}

TEST_F(KernelCacheTest, LaunchCompilesOnMissAndLaunches) {
    test::ResidualAddArgs args;
    auto pointers = args.pointers();
    auto launched = cache.launch(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add",
        test::one_block(), pointers);
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(fake->launches(), 1);
}

TEST_F(KernelCacheTest, EachArchGetsItsOwnEntryAndCompile) {
    std::optional<Result<KernelHandle>> sm80;
    {
        FakeDriver::ScopedContext context(80);
        sm80.emplace(residual_add());
    }
    auto sm90 = residual_add();

    ASSERT_TRUE(sm80->ok() && sm90.ok());
    EXPECT_EQ((*sm80)->module().arch(), 80);
    EXPECT_EQ(sm90->module().arch(), 90);
    EXPECT_EQ(fake->loads(), 2);
    EXPECT_EQ(cache.size(), 2u);
}

TEST_F(KernelCacheTest, SameArchOnAnotherThreadHitsTheSameEntry) {
    ASSERT_TRUE(residual_add().ok());
    bool other_ok = false;
    std::thread other([&] { other_ok = residual_add().ok(); });
    other.join();
    EXPECT_TRUE(other_ok);
    EXPECT_EQ(fake->loads(), 1);
}

// --- per-thread statistics (the seed's reset / work / read pattern) ---------------------------

TEST_F(KernelCacheTest, ThreadStatsCountThisThreadsMissesAndHits) {
    reset_thread_stats();
    ASSERT_TRUE(residual_add().ok());  // miss
    ASSERT_TRUE(residual_add().ok());  // hit
    ASSERT_TRUE(residual_add().ok());  // hit

    const ThreadStats stats = thread_stats();
    EXPECT_EQ(stats.misses, 1u);
    EXPECT_EQ(stats.hits, 2u);
}

TEST_F(KernelCacheTest, ResetThreadStatsZeroesTheWindow) {
    ASSERT_TRUE(residual_add().ok());
    ASSERT_TRUE(residual_add().ok());

    reset_thread_stats();

    EXPECT_EQ(thread_stats().hits, 0u);
    EXPECT_EQ(thread_stats().misses, 0u);
}

TEST_F(KernelCacheTest, AnotherThreadsLookupsDoNotShowInThisThreadsStats) {
    ASSERT_TRUE(residual_add().ok());  // this thread: one miss
    reset_thread_stats();
    ASSERT_TRUE(residual_add().ok());  // this thread: one hit

    std::thread neighbour([&] {
        reset_thread_stats();
        for (int i = 0; i < 50; ++i) (void)residual_add();  // hits, counted there
        (void)cache.kernel(
            "scale", [] { return test::scale_source(); }, "scale_kernel");  // miss
    });
    neighbour.join();

    EXPECT_EQ(thread_stats().hits, 1u) << "another thread's hits landed in this window";
    EXPECT_EQ(thread_stats().misses, 0u) << "another thread's miss landed in this window";
}

TEST_F(KernelCacheTest, ThreadStatsCountLookupsOfEveryCache) {
    auto other_fake = std::make_shared<FakeDriver>();
    KernelCache other_cache(test::fake_options(other_fake));

    ASSERT_TRUE(residual_add().ok());
    ASSERT_TRUE(
        other_cache
            .kernel(
                "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add")
            .ok());

    EXPECT_EQ(thread_stats().misses, 2u);
}

TEST_F(KernelCacheTest, ClearResetsTheCallingThreadsStats) {
    ASSERT_TRUE(residual_add().ok());
    ASSERT_TRUE(residual_add().ok());

    cache.clear();

    EXPECT_EQ(thread_stats().hits, 0u);
    EXPECT_EQ(thread_stats().misses, 0u);
}

TEST_F(KernelCacheTest, ClearOnAnotherThreadLeavesThisThreadsStats) {
    ASSERT_TRUE(residual_add().ok());  // miss
    ASSERT_TRUE(residual_add().ok());  // hit

    std::thread clearer([&] { cache.clear(); });
    clearer.join();

    EXPECT_EQ(thread_stats().misses, 1u);
    EXPECT_EQ(thread_stats().hits, 1u);
}

// --- process-wide statistics ----------------------------------------------------------------

TEST_F(KernelCacheTest, StatsCountHitsMissesCompilesAndEntries) {
    ASSERT_TRUE(residual_add().ok());  // miss + compile
    ASSERT_TRUE(residual_add().ok());  // hit
    ASSERT_TRUE(residual_add().ok());  // hit
    ASSERT_TRUE(cache
                    .kernel(
                        "scale", [] { return test::scale_source(); }, "scale_kernel")
                    .ok());

    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.hits, 2u);
    EXPECT_EQ(stats.misses, 2u);
    EXPECT_EQ(stats.compiles, 2u);
    EXPECT_EQ(stats.compile_failures, 0u);
    EXPECT_EQ(stats.entries, 2u);
    EXPECT_EQ(stats.loaded_libraries, 2u);
    EXPECT_EQ(stats.waits, 0u);
    EXPECT_EQ(stats.evictions, 0u);
}

TEST_F(KernelCacheTest, StatsRecordCompileTime) {
    fake->set_load_delay(20ms);
    ASSERT_TRUE(residual_add().ok());
    EXPECT_GE(cache.stats().compile_ns, 20'000'000u);
}

TEST_F(KernelCacheTest, StatsCountCompileFailures) {
    fake->fail_next_loads(1);
    ASSERT_FALSE(residual_add().ok());
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compile_failures, 1u);
    EXPECT_EQ(stats.compiles, 0u);
    EXPECT_EQ(stats.entries, 0u);
}

// --- errors -----------------------------------------------------------------------------------

TEST_F(KernelCacheTest, FailedCompileReturnsCompileFailedWithJitLog) {
    auto handle = cache.kernel(
        "broken", [] { return test::broken_source(); }, "residual_add");

    ASSERT_FALSE(handle.ok());
    EXPECT_EQ(handle.error().code(), Errc::kCompileFailed);
    EXPECT_NE(handle.error().log().find("FAKE_JIT_ERROR"), std::string::npos)
        << handle.error().describe();
    EXPECT_NE(handle.error().message().find("broken"), std::string::npos)
        << "the message should name the key: " << handle.error().message();
}

TEST_F(KernelCacheTest, FailedCompileIsNotCached) {
    fake->fail_next_loads(1);
    auto failed = residual_add();
    ASSERT_FALSE(failed.ok());
    ASSERT_EQ(cache.size(), 0u);

    auto retried = residual_add();

    ASSERT_TRUE(retried.ok()) << retried.error().describe();
    EXPECT_EQ(fake->load_attempts(), 2);
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(cache.size(), 1u);
}

TEST_F(KernelCacheTest, GeneratorErrorGivesSourceFailedAndCachesNothing) {
    auto handle = cache.kernel(
        "softmax:0",
        []() -> Result<Source> { return Error(Errc::kInvalidArgument, "cols must be >= 1"); },
        "softmax_rows");

    ASSERT_FALSE(handle.ok());
    EXPECT_EQ(handle.error().code(), Errc::kSourceFailed);
    EXPECT_NE(handle.error().message().find("cols must be >= 1"), std::string::npos)
        << handle.error().message();
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(fake->load_attempts(), 0);
}

TEST_F(KernelCacheTest, GeneratorReturningNoBytesIsInvalidArgument) {
    auto handle = cache.kernel(
        "empty", [] { return Source::ptx(""); }, "anything");
    ASSERT_FALSE(handle.ok());
    EXPECT_EQ(handle.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(fake->load_attempts(), 0);
}

TEST_F(KernelCacheTest, EmptyKeyIsInvalidArgument) {
    int calls = 0;
    auto handle = cache.kernel("", test::counting_residual_add(calls), "residual_add");

    ASSERT_FALSE(handle.ok());
    EXPECT_EQ(handle.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(cache.size(), 0u);
}

TEST_F(KernelCacheTest, UnknownKernelNameIsKernelNotFoundAndModuleStaysCached) {
    auto missing = cache.kernel(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_ad");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code(), Errc::kKernelNotFound);
    EXPECT_NE(missing.error().message().find("residual_ad"), std::string::npos);
    EXPECT_EQ(cache.size(), 1u);

    auto found = residual_add();

    ASSERT_TRUE(found.ok());
    EXPECT_EQ(fake->loads(), 1) << "the module was compiled again after a bad kernel name";
}

TEST_F(KernelCacheTest, KernelNotFoundLeavesNoReferenceBehind) {
    ASSERT_FALSE(
        cache
            .kernel(
                "residual_add:f32", [] { return test::residual_add_source(); }, "no_such_kernel")
            .ok());

    cache.clear();
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 1) << "a failed kernel lookup kept the module referenced";
    EXPECT_EQ(fake->live_libraries(), 0);
}

TEST_F(KernelCacheTest, NoContextIsReported) {
    auto no_context = std::make_shared<FakeDriver>(0);
    KernelCache uncontexted(test::fake_options(no_context));
    int calls = 0;

    auto handle =
        uncontexted.kernel("residual_add:f32", test::counting_residual_add(calls), "residual_add");

    ASSERT_FALSE(handle.ok());
    EXPECT_EQ(handle.error().code(), Errc::kNoContext);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(no_context->load_attempts(), 0);
}

// --- verification -----------------------------------------------------------------------------

class VerifyTest : public ::testing::Test {
protected:
    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake, 1024, /*verify=*/true)};
};

TEST_F(VerifyTest, KeyReusedForDifferentSourceIsKeyConflictNamingTheKey) {
    ASSERT_TRUE(
        cache
            .kernel(
                "elementwise:16", [] { return test::residual_add_source(); }, "residual_add")
            .ok());

    auto conflict = cache.kernel(
        "elementwise:16", [] { return test::scale_source(); }, "scale_kernel");

    ASSERT_FALSE(conflict.ok());
    EXPECT_EQ(conflict.error().code(), Errc::kKeyConflict);
    EXPECT_NE(conflict.error().message().find("elementwise:16"), std::string::npos)
        << conflict.error().message();
    EXPECT_EQ(cache.stats().verify_failures, 1u);
}

TEST_F(VerifyTest, ConflictLeavesTheCachedEntryUnchanged) {
    auto original = cache.module("elementwise:16", [] { return test::residual_add_source(); });
    ASSERT_TRUE(original.ok());
    const std::string fingerprint = original->source_digest();
    ASSERT_FALSE(cache.module("elementwise:16", [] { return test::scale_source(); }).ok());

    auto again = cache.kernel(
        "elementwise:16", [] { return test::residual_add_source(); }, "residual_add");

    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(again->module().source_digest(), fingerprint);
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(cache.size(), 1u);
}

TEST_F(VerifyTest, KeyConflictLeavesNoReferenceBehind) {
    ASSERT_TRUE(cache.module("elementwise:16", [] { return test::residual_add_source(); }).ok());
    ASSERT_FALSE(cache.module("elementwise:16", [] { return test::scale_source(); }).ok());

    cache.clear();
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 1) << "the conflicting lookup kept the cached module referenced";
    EXPECT_EQ(fake->live_libraries(), 0);
}

TEST_F(VerifyTest, SameSourceOnHitPasses) {
    auto generate = [] { return test::residual_add_source(); };
    ASSERT_TRUE(cache.kernel("residual_add:f32", generate, "residual_add").ok());
    auto hit = cache.kernel("residual_add:f32", generate, "residual_add");
    ASSERT_TRUE(hit.ok()) << hit.error().describe();
    EXPECT_EQ(cache.stats().verify_failures, 0u);
    EXPECT_EQ(fake->loads(), 1);
}

// The seed's behaviour, kept when verify is off: the first source registered under a key wins
// and a later, different source under the same key is silently ignored.
TEST_F(KernelCacheTest, WithoutVerifyKeyReuseSilentlyReturnsTheCachedModule) {
    auto original = cache.module("elementwise:16", [] { return test::residual_add_source(); });
    ASSERT_TRUE(original.ok());

    auto reused = cache.module("elementwise:16", [] { return test::scale_source(); });

    ASSERT_TRUE(reused.ok());
    EXPECT_EQ(reused->source_digest(), original->source_digest());
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(cache.stats().verify_failures, 0u);
    // ... so the kernel the new source would have had is simply not there.
    auto scale = cache.kernel(
        "elementwise:16", [] { return test::scale_source(); }, "scale_kernel");
    ASSERT_FALSE(scale.ok());
    EXPECT_EQ(scale.error().code(), Errc::kKernelNotFound);
}

// --- configuration from the environment -----------------------------------------------------

TEST(CacheOptionsFromEnv, ReadsMaxEntriesAndVerify) {
    ScopedEnv max_entries("KCACHE_MAX_ENTRIES", "7");
    ScopedEnv verify("KCACHE_VERIFY", "yes");

    auto options = CacheOptions::from_env();

    ASSERT_TRUE(options.ok()) << options.error().describe();
    EXPECT_EQ(options->max_entries, 7u);
    EXPECT_TRUE(options->verify);
}

TEST(CacheOptionsFromEnv, ReadsTheDiskBudgets) {
    ScopedEnv size("KCACHE_MAX_SIZE", "500Mi");
    ScopedEnv files("KCACHE_MAX_FILES", "300");
    auto options = CacheOptions::from_env();
    ASSERT_TRUE(options.ok()) << options.error().describe();
    EXPECT_EQ(options->disk_max_bytes, 500ull << 20);
    EXPECT_EQ(options->disk_max_files, 300u);
}

TEST(CacheOptionsFromEnv, RejectsABadSizeNamingTheVariable) {
    ScopedEnv size("KCACHE_MAX_SIZE", "lots");
    auto options = CacheOptions::from_env();
    ASSERT_FALSE(options.ok());
    EXPECT_NE(options.error().message().find("KCACHE_MAX_SIZE"), std::string::npos);
}

TEST(CacheOptionsFromEnv, UsesDefaultsWhenUnset) {
    ScopedEnv max_entries("KCACHE_MAX_ENTRIES", nullptr);
    ScopedEnv verify("KCACHE_VERIFY", nullptr);

    auto options = CacheOptions::from_env();

    ASSERT_TRUE(options.ok());
    EXPECT_EQ(options->max_entries, CacheOptions{}.max_entries);
    EXPECT_EQ(options->verify, CacheOptions{}.verify);
}

TEST(CacheOptionsFromEnv, VerifyOffIsFalse) {
    ScopedEnv verify("KCACHE_VERIFY", "OFF");
    auto options = CacheOptions::from_env();
    ASSERT_TRUE(options.ok());
    EXPECT_FALSE(options->verify);
}

TEST(CacheOptionsFromEnv, RejectsNonNumericMaxEntries) {
    ScopedEnv max_entries("KCACHE_MAX_ENTRIES", "12abc");
    auto options = CacheOptions::from_env();
    ASSERT_FALSE(options.ok());
    EXPECT_EQ(options.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(options.error().message().find("KCACHE_MAX_ENTRIES"), std::string::npos);
}

TEST(CacheOptionsFromEnv, RejectsNegativeMaxEntries) {
    ScopedEnv max_entries("KCACHE_MAX_ENTRIES", "-3");
    auto options = CacheOptions::from_env();
    ASSERT_FALSE(options.ok());
    EXPECT_EQ(options.error().code(), Errc::kInvalidArgument);
}

TEST(CacheOptionsFromEnv, RejectsUnknownVerifyValue) {
    ScopedEnv verify("KCACHE_VERIFY", "maybe");
    auto options = CacheOptions::from_env();
    ASSERT_FALSE(options.ok());
    EXPECT_EQ(options.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(options.error().message().find("KCACHE_VERIFY"), std::string::npos);
}

// --- the seed's calls ---------------------------------------------------------------------------

TEST_F(KernelCacheTest, GetOrCompileCompilesOnceAndReturnsTheSameModule) {
    const std::string ptx = examples::gelu_ptx();
    auto first = cache.get_or_compile("gelu:16", ptx);
    auto second = cache.get_or_compile("gelu:16", ptx);

    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first->source_digest(), second->source_digest());
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_TRUE(second->kernel("gelu").ok());
}

TEST_F(KernelCacheTest, CompileLockLaunchLaunchesThroughTheDriver) {
    const std::string ptx = examples::residual_add_ptx();
    test::ResidualAddArgs args;
    auto pointers = args.pointers();

    auto first = cache.compile_lock_launch("residual_add:1024", ptx, "residual_add",
                                           test::one_block(), pointers);
    auto second = cache.compile_lock_launch("residual_add:1024", ptx, "residual_add",
                                            test::one_block(), pointers);

    ASSERT_TRUE(first.ok()) << first.error().describe();
    ASSERT_TRUE(second.ok()) << second.error().describe();
    EXPECT_EQ(fake->launches_of("residual_add"), 2);
    EXPECT_EQ(fake->loads(), 1);
}

// --- clear()
// --------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, ClearEmptiesTheCacheAndNextLookupCompilesAgain) {
    ASSERT_TRUE(residual_add().ok());

    cache.clear();
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.stats().entries, 0u);

    ASSERT_TRUE(residual_add().ok());
    EXPECT_EQ(fake->loads(), 2);
}

TEST_F(KernelCacheTest, ClearKeepsALiveHandleLaunchable) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());

    cache.clear();

    auto launched = test::launch_residual_add(*handle);
    EXPECT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->live_libraries(), 1);
    EXPECT_EQ(fake->unloads(), 0);
    EXPECT_EQ(fake->use_after_unload(), 0);
    EXPECT_EQ(cache.stats().loaded_libraries, 1u);
}

TEST_F(KernelCacheTest, LibraryOutlivingClearIsUnloadedWhenItsLastHandleGoes) {
    auto result = residual_add();
    ASSERT_TRUE(result.ok());
    std::optional<KernelHandle> handle(std::move(result).value());
    cache.clear();
    ASSERT_EQ(fake->unloads(), 0);

    handle.reset();
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->live_libraries(), 0);
    EXPECT_EQ(fake->use_after_unload(), 0);
    EXPECT_EQ(cache.stats().loaded_libraries, 0u);
}

TEST_F(KernelCacheTest, ClearWithNoHandlesUnloadsAtOnce) {
    ASSERT_TRUE(residual_add().ok());  // the handle dies at the end of the statement

    cache.clear();
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->live_libraries(), 0);
}

TEST(KernelCacheLifetime, HandleOutlivesItsCache) {
    auto fake = std::make_shared<FakeDriver>();
    auto cache = std::make_unique<KernelCache>(test::fake_options(fake));
    auto result = cache->kernel(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");
    ASSERT_TRUE(result.ok());
    std::optional<KernelHandle> handle(std::move(result).value());

    cache.reset();
    EXPECT_EQ(fake->live_libraries(), 1);
    EXPECT_TRUE(test::launch_residual_add(*handle).ok());

    handle.reset();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->live_libraries(), 0);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

// --- the exclusive guard (the seed's kernel_cache_exclusive)
// --------------------------------------

TEST_F(KernelCacheTest, ExclusiveGuardHoldsOffClearFromAnotherThread) {
    ASSERT_TRUE(residual_add().ok());
    std::optional<ExclusiveGuard> guard(cache.exclusive());

    std::latch clearer_started(1);
    std::promise<void> cleared;
    std::future<void> clear_done = cleared.get_future();
    std::thread clearer([&] {
        clearer_started.count_down();
        cache.clear();
        cleared.set_value();
    });
    clearer_started.wait();

    // The seed's test_clear_cannot_interleave_with_exclusive_holder, with a bounded wait.
    EXPECT_EQ(clear_done.wait_for(100ms), std::future_status::timeout)
        << "clear() completed while another caller held exclusivity";
    EXPECT_EQ(cache.size(), 1u);

    guard.reset();
    EXPECT_EQ(clear_done.wait_for(10s), std::future_status::ready)
        << "clear() never completed after exclusivity was released";
    clearer.join();
    EXPECT_EQ(cache.size(), 0u);
}

TEST_F(KernelCacheTest, ExclusiveGuardClearEmptiesWhileHeld) {
    auto guard = cache.exclusive();
    ASSERT_TRUE(residual_add().ok());
    ASSERT_EQ(cache.size(), 1u);

    guard.clear();

    EXPECT_EQ(cache.size(), 0u);
    ASSERT_TRUE(residual_add().ok());  // lookups still work under the guard
    EXPECT_EQ(fake->loads(), 2);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST(GeneratorExceptions, ThrowingGeneratorIsSourceFailedAndTheKeyStaysUsable) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto thrown = cache.kernel(
        "softmax:32", []() -> Source { throw std::runtime_error("generator exploded"); },
        "softmax_rows");
    ASSERT_FALSE(thrown.ok());
    EXPECT_EQ(thrown.error().code(), Errc::kSourceFailed);
    EXPECT_NE(thrown.error().message().find("generator exploded"), std::string::npos);
    // The abandoned flight was landed: the next caller compiles instead of waiting forever.
    auto retried = cache.kernel(
        "softmax:32", [] { return Source::ptx(examples::softmax_rows_ptx(32)); }, "softmax_rows");
    ASSERT_TRUE(retried.ok()) << retried.error().describe();
    EXPECT_EQ(fake->loads(), 1);
}

TEST(ThreadExit, HandleReleasedFromAThreadLocalDestructorUnloadsCleanly) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    {
        KernelCache cache(test::fake_options(fake));
        std::thread worker([&] {
            // Constructed before this thread's first pin, so destroyed after the thread's epoch
            // record was given back: the release must not reuse that record.
            thread_local KernelHandle kept;
            auto handle = cache.kernel(
                "softmax:32", [] { return Source::ptx(examples::softmax_rows_ptx(32)); },
                "softmax_rows");
            ASSERT_TRUE(handle.ok());
            kept = std::move(handle).value();
        });
        worker.join();
        cache.clear();
    }
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// With lazy module loading the driver JITs PTX at the first kernel lookup, not at load.
Source lazily_failing_source() {
    return Source::ptx(examples::residual_add_ptx() + "\n// FAKE_LAZY_JIT_ERROR\n");
}

TEST(DeferredJitFailure, IsReturnedWithItsLogAndNotCached) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto kernel = cache.kernel("residual_add:8", lazily_failing_source, "residual_add");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kCompileFailed);
    EXPECT_NE(kernel.error().log().find("FAKE_LAZY_JIT_ERROR"), std::string::npos);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.stats().compile_failures, 1u);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->live_libraries(), 0);
}

TEST(DeferredJitFailure, NextLookupCompilesAgain) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    ASSERT_FALSE(cache.kernel("residual_add:8", lazily_failing_source, "residual_add").ok());
    ASSERT_FALSE(cache.kernel("residual_add:8", lazily_failing_source, "residual_add").ok());
    EXPECT_EQ(fake->load_attempts(), 2);
}

TEST(DeferredJitFailure, ModuleFoundBrokenThroughModuleHandleIsDroppedAtNextLookup) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto module = cache.module("residual_add:8", lazily_failing_source);
    ASSERT_TRUE(module.ok());  // loading itself succeeds: the JIT is deferred
    EXPECT_FALSE(module->kernel("residual_add").ok());
    auto again = cache.module("residual_add:8", lazily_failing_source);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(fake->load_attempts(), 2);  // the broken module was not reused
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST(UniformArch, HitsAskTheDriverNothingWhenEveryDeviceSharesAnArch) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    fake->set_uniform_arch(90);
    fake->count_arch_queries(true);
    KernelCache cache(test::fake_options(fake));
    ASSERT_TRUE(cache.kernel("residual_add", test::residual_add_source, "residual_add").ok());
    const int after_miss = fake->arch_queries();
    EXPECT_EQ(after_miss, 1);
    for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(cache.kernel("residual_add", test::residual_add_source, "residual_add").ok());
    }
    EXPECT_EQ(fake->arch_queries(), after_miss);
}

TEST(UniformArch, WithoutItEveryLookupAsksForTheCurrentArch) {
    auto fake = std::make_shared<fakes::FakeDriver>();
    fake->count_arch_queries(true);
    KernelCache cache(test::fake_options(fake));
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(cache.kernel("residual_add", test::residual_add_source, "residual_add").ok());
    }
    EXPECT_EQ(fake->arch_queries(), 5);
}

TEST(UniformArch, AMissStillNeedsACurrentContext) {
    auto fake = std::make_shared<fakes::FakeDriver>(0);  // no context on any thread
    fake->set_uniform_arch(90);
    KernelCache cache(test::fake_options(fake));
    auto kernel = cache.kernel("residual_add", test::residual_add_source, "residual_add");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kNoContext);
    EXPECT_EQ(fake->load_attempts(), 0);
}

}  // namespace
}  // namespace kcache
