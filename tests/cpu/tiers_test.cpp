// SPDX-License-Identifier: Apache-2.0
// A miss through the artifact tiers: PTX compiled on the host by the real nvJitLink, kept in
// memory and on disk, and a new cache on the same directory (a new process) compiling nothing.
// The fake driver loads the real cubins (it finds their kernels by section name).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>

#include "driver/compiler_api.hpp"
#include "host_compile_test.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "util/fingerprint.hpp"

namespace kcache {
namespace {

namespace fs = std::filesystem;

class TiersTest : public test::HostCompileTest {
protected:
    static Source gelu() { return Source::ptx(examples::gelu_ptx()); }
    // gelu(out, in, n), for a launch the fake driver takes; the values do not matter to it.
    std::span<void* const> gelu_args() { return gelu_args_; }

    // gelu:16 as a new process finds it: compiled and stored by another cache, then loaded from
    // the disk by `cache`, whose bytes the fake driver lets go (as the real one does with one
    // device).
    Result<KernelHandle> disk_hit(KernelCache& cache) {
        { KernelCache(options()).kernel("gelu:16", gelu, "gelu").value(); }
        return cache.kernel("gelu:16", gelu, "gelu");
    }
    // The disk tier's one entry file.
    std::string entry_file() const {
        const auto files = test::entry_files(dir_);
        EXPECT_EQ(files.size(), 1u);
        return files.empty() ? std::string() : files[0].string();
    }
    // Rewrites the one entry, changed by `change`, as a valid entry; its payload.
    template <class Change>
    std::string rewrite_entry(Change change) const {
        const std::string file = entry_file();
        auto entry = store::decode(test::read_file(file));
        EXPECT_TRUE(entry.ok()) << entry.error().describe();
        if (!entry) return {};
        change(*entry);
        test::write_file(file, store::encode(*entry));
        return entry->payload;
    }
    // The bytes the one library loaded with a way back gets, as a second context would ask.
    Result<std::string> read_back() {
        auto again = fake_->load_again();
        EXPECT_EQ(again.size(), 1u);
        if (again.size() != 1) return Error(Errc::kInvalidArgument, "not one library to ask");
        return std::move(again[0]);
    }

    std::uint64_t out_ = 0, in_ = 0;
    std::uint32_t n_ = 0;
    std::array<void*, 3> gelu_args_ = {&out_, &in_, &n_};
};

TEST_F(TiersTest, FirstMissCompilesOnTheHostAndWritesTheDisk) {
    KernelCache cache(options());
    auto kernel = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_TRUE(stats.disk_enabled);
    EXPECT_EQ(stats.disk_writes, 1u);
    EXPECT_GT(stats.compile_ns, 0u);
    EXPECT_EQ(fake_->loads(), 1);
}

TEST_F(TiersTest, ANewCacheOnTheSameDirectoryCompilesNothing) {
    {
        KernelCache first(options());
        ASSERT_TRUE(first.kernel("gelu:16", gelu, "gelu").ok());
    }
    KernelCache second(options());  // what a new process sees
    auto kernel = second.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(second.stats().compiles, 0u);
    EXPECT_EQ(second.stats().disk_hits, 1u);
    EXPECT_EQ(second.stats().misses, 1u);  // a miss of the in-process map, served by the disk
}

// The fingerprint a handle gives is the artifact's, the name `kcache ls` shows (ab/cdef....kc),
// whether the module was compiled here or read from the disk; the source digest is another hash.
TEST_F(TiersTest, AModulesFingerprintNamesItsEntryOnDisk) {
    std::string compiled;
    {
        KernelCache first(options());
        auto kernel = first.kernel("gelu:16", gelu, "gelu");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        compiled = kernel->module().fingerprint();
        EXPECT_NE(kernel->module().source_digest(), compiled);
    }
    const std::filesystem::path file = entry_file();
    const std::string named = file.parent_path().filename().string() + file.stem().string();
    EXPECT_EQ(compiled, named);
    KernelCache second(options());
    auto kernel = second.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(second.stats().disk_hits, 1u);
    EXPECT_EQ(kernel->module().fingerprint(), named);
}

// A module no tier holds (the driver's JIT of PTX) has no artifact fingerprint.
TEST_F(TiersTest, DriverJitModuleHasNoFingerprint) {
    CacheOptions jit = options();
    jit.host_compile = false;
    KernelCache cache(jit);
    auto kernel = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(kernel->module().fingerprint(), "");
    EXPECT_EQ(kernel->module().source_digest().size(), 32u);
}

// A PTX kernel's parameter sizes are recorded in its entry when it is compiled, and a disk hit
// takes them from there rather than reading the PTX again: an entry rewritten (checksum and all)
// to record two parameters for gelu's three makes the new process's handle count two.
// Verification asks the driver instead.
TEST_F(TiersTest, ADiskHitTakesItsParameterSizesFromTheEntry) {
    {
        KernelCache fill(options());
        ASSERT_TRUE(fill.kernel(
                            "gelu:16", [] { return gelu(); }, "gelu")
                        .ok());
    }
    const auto files = test::entry_files(dir_);
    ASSERT_EQ(files.size(), 1u);
    auto stored = store::decode(test::read_file(files[0]));
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->key.param_sizes, "gelu=8,8,4");
    stored->key.param_sizes = "gelu=8,8";
    test::write_file(files[0], store::encode(*stored));

    KernelCache cache(options());
    auto handle = cache.kernel(
        "gelu:16", [] { return gelu(); }, "gelu");
    ASSERT_TRUE(handle.ok()) << handle.error().describe();
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(handle->param_count(), 2);

    // warm_up's workers read them from the entry too.
    KernelCache warm(options());
    std::vector<WarmUpItem> items = {
        {"gelu:16", []() -> Result<Source> { return gelu(); }, "gelu"}};
    auto warmed = warm.warm_up(items, 2);
    ASSERT_TRUE(warmed[0].ok());
    EXPECT_EQ(warmed[0]->param_count(), 2);

    CacheOptions verify = options();
    verify.verify = true;
    KernelCache checked(verify);
    auto asked = checked.kernel(
        "gelu:16", [] { return gelu(); }, "gelu");
    ASSERT_TRUE(asked.ok());
    EXPECT_NE(asked->param_count(), 2) << "verification does not take the entry's word";
}

TEST_F(TiersTest, ADiskHitIsLoadedInPlaceFromTheStoredEntry) {
    { KernelCache(options()).kernel("gelu:16", gelu, "gelu").value(); }
    const int loads_before = fake_->loads();
    const int in_place_before = fake_->in_place_loads();
    KernelCache cache(options());
    auto kernel = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(fake_->loads(), loads_before + 1);
    EXPECT_EQ(fake_->in_place_loads(), in_place_before + 1)
        << "the tier's bytes, not a copy, went to the driver";
}

// What this process compiles loads from the entry the memory tier holds: one copy of the cubin,
// shared by the tier and the loaded code (and by a later hit under another key).
TEST_F(TiersTest, AHostCompileIsLoadedInPlaceFromTheMemoryTiersEntry) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(fake_->loads(), 1);
    EXPECT_EQ(fake_->in_place_loads(), 1) << "the compiled cubin was handed over as a copy";
    ASSERT_TRUE(cache.kernel("gelu:4096", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().memory_hits, 1u);
    EXPECT_EQ(fake_->kept_images(), 2);
    EXPECT_EQ(fake_->kept_owners(), 1) << "the compile and the hit hold different copies";
}

TEST_F(TiersTest, AHostCompileNoTierKeepsIsLoadedInPlaceToo) {
    CacheOptions o = options();
    o.disk_directory.clear();
    o.memory_bytes = 0;
    KernelCache cache(o);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(fake_->in_place_loads(), 1);
    EXPECT_EQ(fake_->kept_images(), 1);
}

// The driver may let a disk hit's bytes go once loaded (the fake does, as the real driver does in
// a process of one device); another context then gets them back through the tiers, checked.
TEST_F(TiersTest, ADiskHitsBytesGoAndComeBackForAnotherContext) {
    KernelCache cache(options());
    auto kernel = disk_hit(cache);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(fake_->kept_images(), 0) << "the disk hit's bytes were kept";
    auto stored = store::decode(test::read_file(entry_file()));
    ASSERT_TRUE(stored.ok()) << stored.error().describe();
    auto again = read_back();
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(*again, stored->payload);
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.read_backs, 1u);
    EXPECT_EQ(stats.disk_hits, 1u) << "a read-back is no lookup";
    EXPECT_EQ(stats.disk_misses, 0u);
}

TEST_F(TiersTest, BytesThatLeftTheDiskAreArtifactGoneForAnotherContext) {
    KernelCache cache(options());
    auto kernel = disk_hit(cache);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    test::remove_entries(dir_);
    auto again = read_back();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), Errc::kArtifactGone);
    EXPECT_NE(again.error().message().find("no longer"), std::string::npos)
        << again.error().message();
}

// An entry written again meanwhile under the same fingerprint (by a process that asked for the
// same source under another key, which the entry records too) is the same kernels: it serves.
TEST_F(TiersTest, AnEntryWrittenAgainUnderAnotherKeyStillServesAReadBack) {
    KernelCache cache(options());
    auto kernel = disk_hit(cache);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::string payload =
        rewrite_entry([](store::Artifact& entry) { entry.key.caller_key = "gelu:other"; });
    auto again = read_back();
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(*again, payload);
}

// An intact entry under the same file name but built from other inputs (its key material says
// so) is not the code that was loaded: no read-back.
TEST_F(TiersTest, AnEntryOfOtherInputsUnderTheSameNameIsNotReadBack) {
    KernelCache cache(options());
    auto kernel = disk_hit(cache);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    rewrite_entry([](store::Artifact& entry) { entry.key.options = "-DOTHER=1"; });
    auto again = read_back();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), Errc::kArtifactGone);
    EXPECT_NE(again.error().message().find("other inputs"), std::string::npos)
        << again.error().message();
}

// A corrupt entry is never read back: it is removed and counted, and the code is gone.
TEST_F(TiersTest, ACorruptEntryIsArtifactGoneForAnotherContext) {
    KernelCache cache(options());
    auto kernel = disk_hit(cache);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::string file = entry_file();
    std::string bytes = test::read_file(file);
    bytes[bytes.size() / 2] ^= 0x20;
    test::write_file(file, bytes);
    auto again = read_back();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), Errc::kArtifactGone);
    EXPECT_EQ(cache.stats().disk_corrupt, 1u);
    EXPECT_EQ(cache.stats().read_backs, 0u);
}

// Loaded code outlives its cache through handles; it does not keep the tiers alive for this.
TEST_F(TiersTest, AReadBackAfterTheCacheIsGoneIsArtifactGone) {
    KernelHandle kernel;
    {
        KernelCache cache(options());
        kernel = disk_hit(cache).value();
    }
    auto again = read_back();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), Errc::kArtifactGone);
}

// A launch that finds the code gone (in another context) is an error, and the next lookup of the
// key drops the module and builds it again rather than handing out the same broken one.
TEST_F(TiersTest, ALaunchThatFindsTheCodeGoneMakesTheNextLookupBuildAgain) {
    KernelCache cache(options());
    auto kernel = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const int loads = fake_->loads();
    LaunchConfig config;
    fake_->lose_images_for_next_launches(1);
    auto launched = kernel->launch(config, gelu_args());
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArtifactGone);
    auto rebuilt = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().describe();
    EXPECT_EQ(fake_->loads(), loads + 1) << "the broken module was handed out again";
    EXPECT_TRUE(rebuilt->launch(config, gelu_args()).ok());
    EXPECT_EQ(cache.stats().compiles, 1u);  // from the memory tier, not compiled again
    EXPECT_EQ(cache.stats().code_gone, 1u);
}

// A lookup whose first resolve of a kernel finds the code's bytes gone (another context) drops
// the module and builds it again there and then: the caller gets a kernel, not kArtifactGone.
TEST_F(TiersTest, ALookupThatFindsTheCodeGoneBuildsAgainAtOnce) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.module("gelu:16", gelu).ok());  // loaded, no kernel resolved yet
    const int loads = fake_->loads();
    fake_->lose_images_for_next_lookups(1);
    auto kernel = cache.kernel("gelu:16", gelu, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(fake_->loads(), loads + 1);
    EXPECT_TRUE(kernel->launch(LaunchConfig{}, gelu_args()).ok());
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.compile_failures, 0u) << "code gone is no compile failure";
    EXPECT_EQ(stats.code_gone, 1u);
}

// KernelCache::launch looks up again once when the launch finds the code gone.
TEST_F(TiersTest, ALaunchByKeyThatFindsTheCodeGoneBuildsAgainAndLaunches) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    const int loads = fake_->loads();
    fake_->lose_images_for_next_launches(1);
    auto launched = cache.launch("gelu:16", gelu, "gelu", LaunchConfig{}, gelu_args());
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake_->loads(), loads + 1);
    EXPECT_EQ(fake_->launches_of("gelu"), 1);
    EXPECT_EQ(cache.stats().compile_failures, 0u);
    EXPECT_EQ(cache.stats().code_gone, 1u);
}

// A memory hit's bytes are the tier's own: the driver holds them, and needs no way back.
TEST_F(TiersTest, AMemoryHitIsLoadedFromTheTiersOwnBytes) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    ASSERT_TRUE(cache.kernel("gelu:4096", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().memory_hits, 1u);
    EXPECT_EQ(fake_->kept_images(), 2);  // the compile's and the hit's: the tier's entry
    EXPECT_TRUE(fake_->load_again().empty());
}

TEST_F(TiersTest, TheSameSourceUnderAnotherKeyComesFromMemory) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    ASSERT_TRUE(cache.kernel("gelu:4096", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().memory_hits, 1u);
}

TEST_F(TiersTest, TheDiskStaysWithinItsFileBudget) {
    CacheOptions o = options();
    o.disk_max_files = 3;
    KernelCache cache(o);
    for (int cols = 1; cols <= 6; ++cols) {
        ASSERT_TRUE(cache
                        .kernel(
                            test::softmax_key(cols), [cols] { return test::softmax_source(cols); },
                            test::kSoftmax)
                        .ok());
    }
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    std::size_t files = 0;
    for (const auto& item : fs::recursive_directory_iterator(dir_)) {
        if (item.path().extension() == ".kc") ++files;
    }
    EXPECT_LE(files, 3u);
    EXPECT_GE(cache.stats().disk_evicted, 3u);
    EXPECT_EQ(cache.stats().disk_writes, 6u);
}

TEST_F(TiersTest, ACorruptDiskEntryIsRecompiledAndReplaced) {
    {
        KernelCache first(options());
        ASSERT_TRUE(first.kernel("gelu:16", gelu, "gelu").ok());
    }
    int damaged = 0;
    for (const auto& item : fs::recursive_directory_iterator(dir_)) {
        if (item.path().extension() != ".kc") continue;
        fs::resize_file(item.path(), fs::file_size(item.path()) / 2);
        ++damaged;
    }
    ASSERT_EQ(damaged, 1);
    KernelCache second(options());
    ASSERT_TRUE(second.kernel("gelu:16", gelu, "gelu").ok());
    second.wait_for_uploads();  // a lookup's compile is written to disk behind it
    EXPECT_EQ(second.stats().disk_corrupt, 1u);
    EXPECT_EQ(second.stats().compiles, 1u);
    EXPECT_EQ(second.stats().disk_writes, 1u);
}

TEST_F(TiersTest, AnUnusableDirectoryLeavesTheCacheWorkingFromMemory) {
    fs::create_directories(dir_);
    ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);  // world-writable: refused
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_FALSE(cache.stats().disk_enabled);
    EXPECT_EQ(cache.stats().disk_errors, 1u);
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(TiersTest, AHostCompileErrorReturnsTheLinkersLogAndStoresNothing) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "broken",
        [] {
            return Source::ptx(
                ".version 7.8\n.target sm_70\n.address_size 64\n"
                ".visible .entry broken()\n{\n  add.f32 %f1, %f2, %nope;\n}\n");
        },
        "broken");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kCompileFailed);
    EXPECT_NE(kernel.error().log().find("nope"), std::string::npos) << kernel.error().describe();
    EXPECT_EQ(cache.stats().disk_writes, 0u);
    EXPECT_EQ(cache.size(), 0u);
}

TEST_F(TiersTest, ADifferentArchIsADifferentArtifact) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    fakes::FakeDriver::ScopedContext sm80(80);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    EXPECT_EQ(cache.stats().compiles, 2u);
    EXPECT_EQ(cache.stats().disk_writes, 2u);
}

TEST(CacheOptionsDisk, FromEnvFollowsKcacheDirAndKcacheDisk) {
    setenv("KCACHE_DIR", "/tmp/kcache-env-test", 1);
    auto on = CacheOptions::from_env();
    ASSERT_TRUE(on.ok());
    EXPECT_EQ(on->disk_directory, "/tmp/kcache-env-test");
    setenv("KCACHE_DISK", "0", 1);
    auto off = CacheOptions::from_env();
    ASSERT_TRUE(off.ok());
    EXPECT_TRUE(off->disk_directory.empty());
    setenv("KCACHE_DISK", "maybe", 1);
    EXPECT_FALSE(CacheOptions::from_env().ok());
    unsetenv("KCACHE_DISK");
    unsetenv("KCACHE_DIR");
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

class PrebuildTest : public TiersTest {};

TEST_F(PrebuildTest, FillsTheDiskWithoutAGpuAndALaterCacheCompilesNothing) {
    {
        CacheOptions o = options();
        o.driver = std::make_shared<fakes::FakeDriver>(0);  // no context: as on a CPU machine
        KernelCache builder(o);
        auto origin = builder.prebuild("gelu:16", gelu, 90);
        ASSERT_TRUE(origin.ok()) << origin.error().describe();
        EXPECT_EQ(*origin, Provenance::kCompiled);
        EXPECT_EQ(builder.size(), 0u);  // nothing loaded
        auto again = builder.prebuild("gelu:16", gelu, 90);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(*again, Provenance::kMemoryTier);
    }
    KernelCache runner(options());
    ASSERT_TRUE(runner.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(runner.stats().compiles, 0u);
    EXPECT_EQ(runner.stats().disk_hits, 1u);
}

TEST_F(PrebuildTest, ACubinHasNothingToCompile) {
    KernelCache cache(options());
    auto origin = cache.prebuild(
        "bin",
        [] {
            return Source::cubin(
                std::string("\x7f"
                            "ELF",
                            4));
        },
        90);
    ASSERT_TRUE(origin.ok());
    EXPECT_EQ(*origin, Provenance::kBinary);
}

TEST_F(PrebuildTest, PtxWithoutHostCompilationIsUnsupported) {
    CacheOptions o = options();
    o.host_compile = false;
    KernelCache cache(o);
    auto origin = cache.prebuild("gelu:16", gelu, 90);
    ASSERT_FALSE(origin.ok());
    EXPECT_EQ(origin.error().code(), Errc::kUnsupported);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

class WarmUpTest : public TiersTest {
protected:
    static std::vector<WarmUpItem> softmax_items(int count) {
        std::vector<WarmUpItem> items;
        for (int cols = 1; cols <= count; ++cols) {
            items.push_back({"softmax:" + std::to_string(cols),
                             [cols]() -> Result<Source> {
                                 return Source::ptx(examples::softmax_rows_ptx(cols));
                             },
                             "softmax_rows"});
        }
        return items;
    }
    // Bundles off: one module a key, as these tests of the key-by-key warm-up's reads and compiles
    // take it (a warm-up of many keys would link bundles first: BundleTest).
    CacheOptions key_by_key() const {
        CacheOptions o = options();
        o.bundle_warm_ups = false;
        return o;
    }
};

TEST_F(WarmUpTest, CompilesEveryKernelAndLoadsThem) {
    KernelCache cache(options());
    auto results = cache.warm_up(softmax_items(12), 4);
    ASSERT_EQ(results.size(), 12u);
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(cache.stats().compiles, 12u);
    EXPECT_EQ(cache.size(), 12u);
    // Loaded: a lookup afterwards is a hit.
    reset_thread_stats();
    auto items = softmax_items(1);
    ASSERT_TRUE(cache.kernel(items[0].key, items[0].make_source, "softmax_rows").ok());
    EXPECT_EQ(thread_stats().hits, 1u);
}

// One item to make (a warm-up of one key, or the one a bundle left): a worker would only cost
// the caller its start, so the caller makes it.
TEST_F(WarmUpTest, ASingleItemIsMadeOnTheCallingThread) {
    KernelCache cache(key_by_key());
    const std::thread::id caller = std::this_thread::get_id();
    std::thread::id made_on;
    std::vector<WarmUpItem> items = {{"softmax:7",
                                      [&]() -> Result<Source> {
                                          made_on = std::this_thread::get_id();
                                          return Source::ptx(examples::softmax_rows_ptx(7));
                                      },
                                      "softmax_rows"}};
    auto results = cache.warm_up(items, 4);
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].ok()) << results[0].error().describe();
    EXPECT_EQ(made_on, caller);
    // Two items: a worker makes them while the caller loads.
    std::vector<std::thread::id> two(2);
    items.clear();
    for (int cols : {8, 9}) {
        items.push_back({"softmax:" + std::to_string(cols),
                         [&two, cols]() -> Result<Source> {
                             two[static_cast<std::size_t>(cols - 8)] = std::this_thread::get_id();
                             return Source::ptx(examples::softmax_rows_ptx(cols));
                         },
                         "softmax_rows"});
    }
    for (const auto& result : cache.warm_up(items, 4)) ASSERT_TRUE(result.ok());
    EXPECT_NE(two[0], caller);
}

// The largest compile is a warm-up's critical path: what no tier has is compiled largest source
// first, after every tier hit was handed over, whatever the items' order; each generator still
// runs once.
TEST_F(WarmUpTest, WhatNoTierHasIsCompiledLargestSourceFirstAfterTheTierHits) {
    {
        KernelCache fill(options());
        ASSERT_TRUE(fill.kernel(
                            "softmax:1", [] { return test::softmax_source(1); }, test::kSoftmax)
                        .ok());
    }
    // Sources of growing size (a comment pads each), listed smallest first, the stored one last.
    std::vector<WarmUpItem> items;
    std::map<std::string, int> generated;
    std::mutex mutex;
    for (int n = 2; n <= 6; ++n) {
        items.push_back({"softmax:" + std::to_string(n),
                         [n, &generated, &mutex]() -> Result<Source> {
                             std::lock_guard lock(mutex);
                             ++generated["softmax:" + std::to_string(n)];
                             return Source::ptx(
                                 examples::softmax_rows_ptx(n) + "\n// " +
                                 std::string(static_cast<std::size_t>(n) * 4096, 'x') + "\n");
                         },
                         test::kSoftmax});
    }
    items.push_back({"softmax:1", [] { return test::softmax_source(1); }, test::kSoftmax});
    KernelCache cache(options());
    std::vector<std::string> order;
    auto results =
        cache.warm_up(items, 1, [&](const WarmUpProgress& step) { order.emplace_back(step.key); });
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(order, (std::vector<std::string>{"softmax:1", "softmax:6", "softmax:5", "softmax:4",
                                               "softmax:3", "softmax:2"}));
    EXPECT_EQ(cache.stats().compiles, 5u);
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    for (const auto& [key, calls] : generated) EXPECT_EQ(calls, 1) << key;
}

// A worker compiles what another worker's first look queued: it must find the source that look
// generated. Here the second worker queues the largest compile and goes on to a slow first
// look, and the first worker, done looking, takes that compile (the thread sanitizer sees a
// compile taken before its source was handed over).
TEST_F(WarmUpTest, ACompileTakenByAnotherWorkerHasTheSourceItsFirstLookGenerated) {
    KernelCache cache(options());
    auto item = [](int cols, std::chrono::milliseconds slow, std::size_t padding) {
        return WarmUpItem{"softmax:" + std::to_string(cols),
                          [=]() -> Result<Source> {
                              std::this_thread::sleep_for(slow);
                              return Source::ptx(examples::softmax_rows_ptx(cols) + "// " +
                                                 std::string(padding, 'x') + "\n");
                          },
                          "softmax_rows"};
    };
    const std::vector<WarmUpItem> items = {item(1, std::chrono::milliseconds(50), 0),
                                           item(2, std::chrono::milliseconds(0), 65536),
                                           item(3, std::chrono::milliseconds(150), 0)};
    auto results = cache.warm_up(items, 2);
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(cache.stats().compiles, 3u);
}

TEST_F(WarmUpTest, ANewCacheOnAWarmDiskTierReadsEachEntryOnceAndCompilesNothing) {
    {
        KernelCache fill(options());
        for (const auto& result : fill.warm_up(softmax_items(12), 4)) ASSERT_TRUE(result.ok());
    }
    KernelCache cache(options());
    const auto items = softmax_items(12);
    auto results = cache.warm_up(items, 4);
    for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(results[i].ok()) << results[i].error().describe();
        EXPECT_EQ(results[i]->module().key(), items[i].key);  // in the items' order
    }
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().disk_hits, 12u);
    EXPECT_EQ(cache.size(), 12u);
}

// The calling thread loads slower than workers read: unbounded, a warm start of thousands of
// kernels held most of its entries' bytes at once. Tier hits are read only so far ahead.
TEST_F(WarmUpTest, TierHitsAreReadNoFurtherAheadOfTheLoadsThanTheReadAhead) {
    const int count = 2 * static_cast<int>(kWarmUpReadAhead);
    {
        KernelCache fill(key_by_key());
        for (const auto& result : fill.warm_up(softmax_items(count), 4)) ASSERT_TRUE(result.ok());
    }
    KernelCache cache(key_by_key());
    fake_->set_load_delay(std::chrono::milliseconds(1));
    const int loads_before = fake_->loads();
    std::atomic<int> most_ahead{0};
    constexpr unsigned kThreads = 4;
    auto results = cache.warm_up(softmax_items(count), kThreads, [&](const WarmUpProgress& step) {
        // Made (this one included) against loaded so far.
        const int ahead = static_cast<int>(step.done) - (fake_->loads() - loads_before);
        int seen = most_ahead.load();
        while (ahead > seen && !most_ahead.compare_exchange_weak(seen, ahead)) {
        }
    });
    fake_->set_load_delay(std::chrono::milliseconds(0));
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(cache.stats().disk_hits, static_cast<std::uint64_t>(count));
    // Queued, one a worker holds (or hands over past the room), and the one being loaded.
    EXPECT_LE(most_ahead.load(), static_cast<int>(kWarmUpReadAhead + kThreads + 1));
    EXPECT_GE(most_ahead.load(), static_cast<int>(kWarmUpReadAhead) / 2) << "no read-ahead";
}

// A worker whose hits wait for room starts a compile that is waiting, rather than leaving it for
// after its last look: with one worker the compile is made long before the last hit.
TEST_F(WarmUpTest, AWorkerWaitingForRoomStartsAWaitingCompile) {
    const int hits = 2 * static_cast<int>(kWarmUpReadAhead);
    {
        KernelCache fill(key_by_key());
        for (const auto& result : fill.warm_up(softmax_items(hits), 4)) ASSERT_TRUE(result.ok());
    }
    // The compile listed first: its look comes first and queues it.
    std::vector<WarmUpItem> items = {
        {"softmax:compiled", [] { return test::softmax_source(hits + 1); }, test::kSoftmax}};
    for (auto& item : softmax_items(hits)) items.push_back(std::move(item));
    KernelCache cache(key_by_key());
    // Loads far slower than reads: few are taken while the worker fills the room, even under a
    // sanitizer.
    fake_->set_load_delay(std::chrono::milliseconds(5));
    std::vector<std::string> order;
    auto results =
        cache.warm_up(items, 1, [&](const WarmUpProgress& step) { order.emplace_back(step.key); });
    fake_->set_load_delay(std::chrono::milliseconds(0));
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
    const auto at = std::find(order.begin(), order.end(), "softmax:compiled") - order.begin();
    // About the read-ahead and the few the caller took meanwhile; without it, after every hit.
    EXPECT_LT(at, static_cast<long>(hits - kWarmUpReadAhead / 4)) << "made after the hits' looks";
}

// A load that throws ends the warm-up with its exception; its workers, which may be waiting for
// room that no load will make, end too rather than hang the join.
TEST_F(WarmUpTest, ALoadThatThrowsEndsTheWarmUpAndItsWaitingWorkers) {
    const int count = 2 * static_cast<int>(kWarmUpReadAhead);
    {
        KernelCache fill(key_by_key());
        for (const auto& result : fill.warm_up(softmax_items(count), 4)) ASSERT_TRUE(result.ok());
    }
    KernelCache cache(key_by_key());
    fake_->set_load_delay(std::chrono::milliseconds(1));  // the workers fill the room first
    fake_->throw_on_next_loads(1);
    EXPECT_THROW(cache.warm_up(softmax_items(count), 2), std::bad_alloc);
    fake_->set_load_delay(std::chrono::milliseconds(0));
}

TEST_F(WarmUpTest, KeysLoadedAlreadyAreNeitherReadNorCompiledAgain) {
    KernelCache cache(options());
    const auto items = softmax_items(6);
    for (const auto& result : cache.warm_up(items, 3)) ASSERT_TRUE(result.ok());
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    const CacheStats before = cache.stats();
    auto again = cache.warm_up(items, 3);
    for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(again[i].ok()) << again[i].error().describe();
        EXPECT_EQ(again[i]->module().key(), items[i].key);
    }
    const CacheStats after = cache.stats();
    EXPECT_EQ(after.compiles, before.compiles);
    EXPECT_EQ(after.disk_hits, before.disk_hits);
    EXPECT_EQ(after.memory_hits, before.memory_hits);
    EXPECT_EQ(after.disk_writes, before.disk_writes);
}

// Workers are added while the calling thread waits: slow items (a compile, here a slow source)
// are made on several threads at once, not one after another.
TEST_F(WarmUpTest, SlowItemsAreMadeOnSeveralThreadsAtOnce) {
    KernelCache cache(options());
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::vector<WarmUpItem> items;
    for (int cols = 1; cols <= 8; ++cols) {
        items.push_back({"slow:" + std::to_string(cols),
                         [cols, &mutex, &threads]() -> Result<Source> {
                             std::this_thread::sleep_for(std::chrono::milliseconds(20));
                             std::lock_guard lock(mutex);
                             threads.insert(std::this_thread::get_id());
                             return Source::ptx(examples::softmax_rows_ptx(cols));
                         },
                         "softmax_rows"});
    }
    for (const auto& result : cache.warm_up(items, 4)) ASSERT_TRUE(result.ok());
    EXPECT_GE(threads.size(), 2u);
    EXPECT_LE(threads.size(), 4u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "made on the calling thread";
}

// warm_up counts and checks as kernel() would. A key loaded already goes through the calling
// thread's lookup: verified in verify mode, its hit on that thread's counters.
TEST_F(WarmUpTest, AKeyLoadedAlreadyIsVerifiedAndCountedLikeALookup) {
    CacheOptions o = options();
    o.verify = true;
    KernelCache cache(o);
    ASSERT_TRUE(cache.kernel("k", test::residual_add_source, "residual_add").ok());
    reset_thread_stats();
    auto same = cache.warm_up(
        {{"k", [] { return Result<Source>(test::residual_add_source()); }, "residual_add"}}, 2);
    ASSERT_TRUE(same.at(0).ok()) << same[0].error().describe();
    EXPECT_EQ(thread_stats().hits, 1u) << "the hit belongs to the calling thread";
    auto other = cache.warm_up(
        {{"k", [] { return Result<Source>(test::scale_source()); }, "scale_kernel"}}, 2);
    ASSERT_FALSE(other.at(0).ok());
    EXPECT_EQ(other[0].error().code(), Errc::kKeyConflict);
    EXPECT_EQ(cache.stats().verify_failures, 1u);
}

TEST_F(WarmUpTest, AModuleLoadedAlreadyGivesAnotherKernelWithoutAnotherRead) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.module("gelu:16", gelu).ok());  // loaded, no kernel resolved yet
    const CacheStats before = cache.stats();
    auto results = cache.warm_up({{"gelu:16", [] { return Result<Source>(gelu()); }, "gelu"}}, 2);
    ASSERT_TRUE(results.at(0).ok()) << results[0].error().describe();
    const CacheStats after = cache.stats();
    EXPECT_EQ(after.compiles, before.compiles);
    EXPECT_EQ(after.memory_hits, before.memory_hits);
    EXPECT_EQ(after.disk_hits, before.disk_hits);
}

TEST_F(WarmUpTest, AKeyListedTwiceIsMadeOnce) {
    KernelCache cache(options());
    auto item = softmax_items(1).at(0);
    auto results = cache.warm_up({item, item, item}, 3);
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.memory_hits, 0u);
    EXPECT_EQ(stats.misses, 1u);
    EXPECT_EQ(stats.hits, 2u);
}

// The driver refusing the host's cubin: the PTX goes to its JIT, one compile, as in kernel().
TEST_F(WarmUpTest, ACubinTheDriverRefusesIsOneCompileAsInKernel) {
    KernelCache cache(options());
    fake_->fail_next_loads(1);
    auto results = cache.warm_up(softmax_items(1), 2);
    ASSERT_TRUE(results.at(0).ok()) << results[0].error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(WarmUpTest, ACompileThatDoesNotLoadIsNotCountedCompiled) {
    KernelCache cache(options());
    fake_->fail_next_loads(2);  // the cubin, then the PTX through the driver's JIT
    auto results = cache.warm_up(softmax_items(1), 2);
    ASSERT_FALSE(results.at(0).ok());
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().compile_failures, 1u);
}

TEST_F(WarmUpTest, ReportsEveryItemOnceWithARisingCount) {
    KernelCache cache(options());
    std::vector<std::string> seen;
    std::size_t last = 0;
    bool rising = true;
    cache.warm_up(softmax_items(8), 3, [&](const WarmUpProgress& p) {
        rising = rising && p.done == last + 1 && p.total == 8;
        last = p.done;
        seen.emplace_back(p.key);
    });
    EXPECT_TRUE(rising);
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
    EXPECT_EQ(seen.size(), 8u);
}

TEST_F(WarmUpTest, AFailingItemDoesNotStopTheOthers) {
    KernelCache cache(options());
    auto items = softmax_items(4);
    items.insert(
        items.begin() + 2,
        {"broken", []() -> Result<Source> { return Source::ptx(".version 7.8\nnope"); }, "broken"});
    auto results = cache.warm_up(items, 2);
    ASSERT_EQ(results.size(), 5u);
    EXPECT_FALSE(results[2].ok());
    EXPECT_EQ(results[2].error().code(), Errc::kCompileFailed);
    for (std::size_t i : {0u, 1u, 3u, 4u}) EXPECT_TRUE(results[i].ok()) << i;
}

TEST_F(WarmUpTest, WithoutHostCompilationTheDriverJitsOnTheCallingThread) {
    CacheOptions o = options();
    o.host_compile = false;
    KernelCache cache(o);
    auto results = cache.warm_up(softmax_items(3), 2);
    for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.error().describe();
    EXPECT_EQ(cache.stats().compiles, 3u);
    EXPECT_EQ(cache.stats().disk_writes, 0u);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST_F(TiersTest, ArchSpecificPtxIsCompiledForItsArchSpecificTarget) {
    std::string ptx = examples::gelu_ptx();
    const std::size_t at = ptx.find(".target sm_70");
    ASSERT_NE(at, std::string::npos);
    ptx.replace(at, 13, ".target sm_90a");  // as PTX using wgmma or setmaxnreg must say
    const std::size_t version = ptx.find(".version 7.8");
    ASSERT_NE(version, std::string::npos);
    ptx.replace(version, 12, ".version 8.0");  // the first PTX version that knows sm_90a
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "gelu:sm_90a", [&] { return Source::ptx(ptx); }, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST_F(TiersTest, EightProcessesMissingOneKeyCompileItOnce) {
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < 8; ++i) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {  // a separate process with its own cache on the shared directory
            close(go[1]);
            char byte = 0;
            (void)!read(go[0], &byte, 1);  // returns when the parent closes its end: all start
            CacheOptions o;
            o.driver = std::make_shared<fakes::FakeDriver>(0);
            o.disk_directory = dir_;
            KernelCache cache(o);
            auto origin = cache.prebuild(
                "softmax:777", [] { return Source::ptx(examples::softmax_rows_ptx(777)); }, 90);
            _exit(origin.ok() ? static_cast<int>(*origin) : 100);
        }
        children.push_back(pid);
    }
    close(go[0]);
    close(go[1]);
    int compiled = 0;
    int from_disk = 0;
    for (const pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        const int code = WEXITSTATUS(status);
        if (code == static_cast<int>(Provenance::kCompiled)) {
            ++compiled;
        } else if (code == static_cast<int>(Provenance::kDiskTier)) {
            ++from_disk;
        } else {
            ADD_FAILURE() << "child exited with " << code;
        }
    }
    EXPECT_EQ(compiled, 1);
    EXPECT_EQ(from_disk, 7);
}

}  // namespace
}  // namespace kcache
