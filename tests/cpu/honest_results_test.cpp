// SPDX-License-Identifier: Apache-2.0
// What a cache says is what it did: counters that add up across CacheStats, the directory's
// persistent statistics and `kcache -s`; prebuilds that fail when nothing reached the disk; archs
// checked before any compiler sees them; and a caller's generator that throws, wherever it is
// called, as an error value. PTX is compiled by the real nvJitLink, loaded by the fake driver.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "driver/compiler_api.hpp"
#include "host_compile_test.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"
#include "store/persistent_stats.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

namespace fs = std::filesystem;

class HonestResultsTest : public test::HostCompileTest {
protected:
    static Source gelu() { return Source::ptx(examples::gelu_ptx()); }
    static Source softmax() { return Source::ptx(examples::softmax_rows_ptx(32)); }
    static Source softmax_64() { return Source::ptx(examples::softmax_rows_ptx(64)); }

    // The entry files below the directory, by path relative to it.
    std::vector<std::string> entries() const {
        std::vector<std::string> relative;
        if (!fs::exists(dir_)) return relative;
        for (const auto& file : test::entry_files(dir_)) {
            relative.push_back(fs::relative(file, dir_).string());
        }
        return relative;
    }

    // The one entry's key material changed and written back as a valid entry: an entry whose
    // file name is the fingerprint but which holds what other inputs built.
    void give_the_entry_other_key_material() {
        const auto files = test::entry_files(dir_);
        ASSERT_EQ(files.size(), 1u);
        auto stored = store::decode(test::read_file(files[0]));
        ASSERT_TRUE(stored.ok());
        stored->key.toolchain += " (another build)";
        test::write_file(files[0], store::encode(*stored));
    }

    // What the kcache command prints for `args` on this directory.
    std::string kcache(const std::string& args) const {
        const std::string command = test::tool_path() + " -d '" + dir_ + "' " + args + " 2>&1";
        std::string out;
        if (FILE* pipe = popen(command.c_str(), "r")) {
            char buffer[4096];
            for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
                out.append(buffer, n);
            }
            pclose(pipe);
        }
        return out;
    }
};

// ---- Item 8: the statistics add up.

TEST_F(HonestResultsTest, ACompileIsOneDiskMissNotTwo) {
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    const CacheStats s = cache.stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.disk_misses, 1u);  // the lookups before and after the compile lock are one
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.disk_hits + s.memory_hits, 0u);
}

TEST_F(HonestResultsTest, ARejectedEntryIsNotADiskHit) {
    { ASSERT_TRUE(KernelCache(options()).kernel("gelu:16", gelu, "gelu").ok()); }
    give_the_entry_other_key_material();
    KernelCache cache(options());
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    const CacheStats s = cache.stats();
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(s.disk_misses, 1u);
    EXPECT_EQ(s.disk_rejected, 1u);
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.disk_writes, 1u);  // replaced
}

TEST_F(HonestResultsTest, APrebuildIsNotALookup) {
    KernelCache cache(options());
    ASSERT_EQ(cache.prebuild("gelu:16", gelu, 90).value(), Provenance::kCompiled);
    ASSERT_EQ(cache.prebuild("gelu:16", gelu, 90).value(), Provenance::kMemoryTier);
    const CacheStats s = cache.stats();
    EXPECT_EQ(s.prebuilds, 2u);
    EXPECT_EQ(s.prebuild_compiles, 1u);
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.hits + s.misses, 0u);
    EXPECT_EQ(s.memory_hits + s.disk_hits + s.disk_misses, 0u);
}

// N lookups, M compiles, K disk hits, R rejected entries, P prebuilds: every counter exact in
// each cache, in the directory's persistent statistics, and in `kcache -s` (JSON and table).
TEST_F(HonestResultsTest, EveryCounterIsExactAfterAKnownSequence) {
    {
        // A pre-warm: P = 3 prebuilds, 2 of them compiles.
        KernelCache builder(options());
        ASSERT_TRUE(builder.prebuild("gelu:16", gelu, 90).ok());
        ASSERT_TRUE(builder.prebuild("gelu:16", gelu, 90).ok());
        ASSERT_TRUE(builder.prebuild("softmax:32", softmax, 90).ok());
        const CacheStats s = builder.stats();
        EXPECT_EQ(s.prebuilds, 3u);
        EXPECT_EQ(s.prebuild_compiles, 2u);
        EXPECT_EQ(s.compiles, 2u);
        EXPECT_EQ(s.disk_writes, 2u);
        EXPECT_EQ(s.hits + s.misses + s.memory_hits + s.disk_hits + s.disk_misses, 0u);
    }
    {
        // A program: 4 lookups of gelu:16 (1 disk hit, 3 hits), 1 of softmax:32 (a disk hit),
        // 1 of a new kernel (a compile), and that one's source under another key (a memory hit:
        // a disk hit is not copied up, a compile is).
        KernelCache program(options());
        for (int i = 0; i < 4; ++i) ASSERT_TRUE(program.kernel("gelu:16", gelu, "gelu").ok());
        ASSERT_TRUE(program.kernel("softmax:32", softmax, "softmax_rows").ok());
        ASSERT_TRUE(program.kernel("softmax:64", softmax_64, "softmax_rows").ok());
        ASSERT_TRUE(program.kernel("softmax:64 again", softmax_64, "softmax_rows").ok());
        program.wait_for_uploads();  // a lookup's compile is written to disk behind it
        const CacheStats s = program.stats();
        EXPECT_EQ(s.hits, 3u);
        EXPECT_EQ(s.misses, 4u);
        EXPECT_EQ(s.disk_hits, 2u);
        EXPECT_EQ(s.memory_hits, 1u);
        EXPECT_EQ(s.disk_misses, 1u);
        EXPECT_EQ(s.compiles, 1u);
        EXPECT_EQ(s.disk_writes, 1u);
        EXPECT_EQ(s.prebuilds, 0u);
    }
    // R = 1: softmax's entry now holds other key material; the next program recompiles it.
    {
        const auto files = test::entry_files(dir_);
        ASSERT_EQ(files.size(), 3u);
        for (const auto& file : files) {
            auto stored = store::decode(test::read_file(file));
            ASSERT_TRUE(stored.ok());
            if (stored->key.caller_key != "softmax:32") continue;
            stored->key.toolchain += " (another build)";
            test::write_file(file, store::encode(*stored));
        }
    }
    {
        KernelCache program(options());
        ASSERT_TRUE(program.kernel("softmax:32", softmax, "softmax_rows").ok());
        const CacheStats s = program.stats();
        EXPECT_EQ(s.misses, 1u);
        EXPECT_EQ(s.disk_misses, 1u);
        EXPECT_EQ(s.disk_rejected, 1u);
        EXPECT_EQ(s.disk_hits, 0u);
        EXPECT_EQ(s.compiles, 1u);
    }

    // The sums over the three caches, as every cache flushed them when it went.
    auto sum = test::stats_at(dir_).read();
    ASSERT_TRUE(sum.ok()) << sum.error().describe();
    EXPECT_EQ(sum->hits, 3u);
    EXPECT_EQ(sum->misses, 5u);
    EXPECT_EQ(sum->memory_hits, 1u);
    EXPECT_EQ(sum->disk_hits, 2u);
    EXPECT_EQ(sum->disk_misses, 2u);
    EXPECT_EQ(sum->disk_rejected, 1u);
    EXPECT_EQ(sum->compiles, 4u);
    EXPECT_EQ(sum->prebuilds, 3u);
    EXPECT_EQ(sum->prebuild_compiles, 2u);
    EXPECT_EQ(sum->disk_writes, 4u);

    const auto json = nlohmann::json::parse(kcache("-s --json"));
    EXPECT_EQ(json["lookups"], 8);
    EXPECT_EQ(json["hits"], 3);
    EXPECT_EQ(json["misses"], 5);
    EXPECT_EQ(json["memory_hits"], 1);
    EXPECT_EQ(json["compiles"], 4);
    EXPECT_EQ(json["prebuilds"], 3);
    EXPECT_EQ(json["prebuild_compiles"], 2);
    EXPECT_EQ(json["disk"]["hits"], 2);
    EXPECT_EQ(json["disk"]["misses"], 2);
    EXPECT_EQ(json["disk"]["rejected"], 1);
    EXPECT_EQ(json["disk"]["writes"], 4);
    EXPECT_EQ(json["entries"], 3);
    // Shares of their own sums: none can pass 100%. Whole lines, their columns' blanks as one.
    const std::string table = kcache("-s");
    std::set<std::string> lines;
    std::istringstream in(table);
    for (std::string line; std::getline(in, line);) {
        std::string words;
        std::istringstream split(line);
        for (std::string word; split >> word;) words += (words.empty() ? "" : " ") + word;
        lines.insert(words);
    }
    for (const char* line :
         {"Lookups by key: 8", "Hits (loaded in the process): 3 37.5%", "Misses: 5 62.5%",
          "Misses asked of the tiers: 5", "from the memory tier: 1 20.0%",
          "from the disk tier: 2 40.0%", "in neither tier: 2 40.0%",
          "entries of other key material replaced: 1", "Compiles: 4 (2 for prebuilds)",
          "Prebuilds (kcache compile): 3 (2 compiled)"}) {
        EXPECT_TRUE(lines.contains(line)) << line << " in\n" << table;
    }
}

// ---- Item 6: a prebuild says when nothing reached the disk.

TEST_F(HonestResultsTest, APrebuildIntoARefusedDirectoryIsAnIoErrorAndCompilesNothing) {
    fs::create_directories(dir_);
    ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);  // world-writable: refused
    KernelCache cache(options());
    int calls = 0;
    auto origin = cache.prebuild(
        "gelu:16",
        [&] {
            ++calls;
            return gelu();
        },
        90);
    ASSERT_FALSE(origin.ok());
    EXPECT_EQ(origin.error().code(), Errc::kIoError);
    EXPECT_NE(origin.error().message().find("world-writable"), std::string::npos)
        << origin.error().message();
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(cache.stats().compiles, 0u);
    // A lookup still works from memory.
    EXPECT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
}

TEST_F(HonestResultsTest, APrebuildWhoseDiskWriteFailsSaysItWasCompiledButNotStored) {
    { KernelCache(options()).prebuild("gelu:16", gelu, 90).value(); }
    const auto stored = entries();
    ASSERT_EQ(stored.size(), 1u);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A file where the entry's folder goes. (A folder where the entry's file goes is removed by
    // the lookup, as anything that is not an entry is.)
    test::write_file(dir_ + "/" + stored[0].substr(0, stored[0].find('/')), "x");
    KernelCache cache(options());
    auto origin = cache.prebuild("gelu:16", gelu, 90);
    ASSERT_FALSE(origin.ok());
    EXPECT_EQ(origin.error().code(), Errc::kIoError);
    EXPECT_NE(origin.error().message().find("compiled for sm_90 but not stored on disk"),
              std::string::npos)
        << origin.error().message();
    // Asked again, the memory tier has it, and it is still not on disk.
    auto again = cache.prebuild("gelu:16", gelu, 90);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message().find("found in memory for sm_90 but not stored on disk"),
              std::string::npos)
        << again.error().message();
    // A lookup fails open: the kernel loads from memory.
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().disk_writes, 0u);
    EXPECT_GE(cache.stats().disk_errors, 1u);
}

// ---- Item 13: archs checked before any compiler; every generator call guarded.

TEST_F(HonestResultsTest, APrebuildForAnArchNoCompilerTakesIsAnInvalidArgumentAndRunsNothing) {
    KernelCache cache(options());
    int calls = 0;
    for (int arch : {7, 0, -5, 74, 1000}) {
        auto origin = cache.prebuild(
            "gelu:16",
            [&] {
                ++calls;
                return gelu();
            },
            arch);
        ASSERT_FALSE(origin.ok()) << arch;
        EXPECT_EQ(origin.error().code(), Errc::kInvalidArgument);
        EXPECT_NE(origin.error().message().find("sm_" + std::to_string(arch)), std::string::npos)
            << origin.error().message();
    }
    EXPECT_EQ(calls, 0);
    EXPECT_TRUE(entries().empty());
    EXPECT_EQ(cache.stats().prebuilds, 0u);
}

TEST_F(HonestResultsTest, CudaForADeviceArchNoCompilerTakesIsAnInvalidArgument) {
    CacheOptions o = options();
    o.driver = std::make_shared<fakes::FakeDriver>(7);
    KernelCache cache(o);
    auto kernel = cache.kernel(
        "k", [] { return Source::cuda("extern \"C\" __global__ void k() {}"); }, "k");
    ASSERT_FALSE(kernel.ok());
    if (kernel.error().code() == Errc::kUnsupported) GTEST_SKIP() << "no NVRTC here";
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(kernel.error().message().find("sm_7"), std::string::npos);
    EXPECT_TRUE(entries().empty());
}

TEST_F(HonestResultsTest, PtxForADeviceArchTheHostCompilersDoNotTakeGoesToTheDriversJit) {
    CacheOptions o = options();
    o.driver = std::make_shared<fakes::FakeDriver>(7);
    KernelCache cache(o);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().disk_writes, 0u);
    EXPECT_TRUE(entries().empty());
}

Source throwing_generator() {
    throw std::runtime_error("generator exploded");
}

TEST_F(HonestResultsTest, WithVerificationAThrowingGeneratorIsAnErrorOnAHit) {
    CacheOptions o = options();
    o.verify = true;
    KernelCache cache(o);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    auto verified = cache.kernel("gelu:16", throwing_generator, "gelu");
    ASSERT_FALSE(verified.ok());
    EXPECT_EQ(verified.error().code(), Errc::kSourceFailed);
    EXPECT_NE(verified.error().message().find("generator exploded"), std::string::npos);
    auto module = cache.module("gelu:16", throwing_generator);
    ASSERT_FALSE(module.ok());
    EXPECT_EQ(module.error().code(), Errc::kSourceFailed);
}

TEST_F(HonestResultsTest, AThrowingGeneratorIsAnErrorInEveryCall) {
    CacheOptions o = options();
    o.verify = true;
    KernelCache cache(o);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    auto prebuilt = cache.prebuild("softmax:32", throwing_generator, 90);
    ASSERT_FALSE(prebuilt.ok());
    EXPECT_EQ(prebuilt.error().code(), Errc::kSourceFailed);
    // warm_up: a key not loaded yet (made on a worker) and one loaded already (verified on the
    // calling thread).
    std::vector<WarmUpItem> items = {
        {"softmax:32", []() -> Result<Source> { return throwing_generator(); }, "softmax_rows"},
        {"gelu:16", []() -> Result<Source> { return throwing_generator(); }, "gelu"},
        {"empty", std::function<Result<Source>()>(), "k"}};
    auto results = cache.warm_up(items, 2);
    ASSERT_EQ(results.size(), 3u);
    for (const auto& result : results) {
        ASSERT_FALSE(result.ok());
        EXPECT_EQ(result.error().code(), Errc::kSourceFailed) << result.error().describe();
    }
    auto launched = cache.launch("gelu:16", throwing_generator, "gelu", LaunchConfig{}, {});
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kSourceFailed);
}

}  // namespace
}  // namespace kcache
