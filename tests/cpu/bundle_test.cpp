// SPDX-License-Identifier: Apache-2.0
// warm_up's bundles: the PTX modules of a warm-up linked a few to a cubin by the real nvJitLink
// after it, stored, and loaded by a later warm-up (a new cache on the same directory, as a new
// process) as one module each, over the fake driver, which finds a cubin's kernels by section.
#include "build/bundle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cache/bundle_builder.hpp"
#include "compile/ptx_symbols.hpp"
#include "driver/compiler_api.hpp"
#include "host_compile_test.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"
#include "store/artifact_store.hpp"
#include "store/disk_store.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

// softmax_rows for `cols` columns under a kernel name of its own: "softmax_rows_<cols>".
std::string named_softmax(int cols) {
    return examples::softmax_rows_ptx(cols, "softmax_rows_" + std::to_string(cols));
}

class BundleTest : public test::HostCompileTest {
protected:
    // Bundles on (they are off by default).
    CacheOptions options() const {
        CacheOptions o = HostCompileTest::options();
        o.bundle_warm_ups = true;
        return o;
    }

    // `count` kernels, each of a name of its own.
    static std::vector<WarmUpItem> distinct(int count) {
        std::vector<WarmUpItem> items;
        for (int cols = 1; cols <= count; ++cols) {
            items.push_back(
                {"softmax:" + std::to_string(cols),
                 [cols]() -> Result<Source> { return Source::ptx(named_softmax(cols)); },
                 "softmax_rows_" + std::to_string(cols)});
        }
        return items;
    }

    static void expect_all_ok(const std::vector<Result<KernelHandle>>& results) {
        for (const auto& result : results) EXPECT_TRUE(result.ok()) << result.error().describe();
    }

    // A warm-up in a cache of its own, its bundles linked and stored before it ends.
    void warm_up_and_bundle(const std::vector<WarmUpItem>& items, CacheOptions o) {
        KernelCache cache(std::move(o));
        expect_all_ok(cache.warm_up(items, 2));
        cache.wait_for_uploads();
    }
    void warm_up_and_bundle(const std::vector<WarmUpItem>& items) {
        warm_up_and_bundle(items, options());
    }

    // The bundles on disk (their entry files).
    std::vector<std::string> bundle_files() const {
        std::vector<std::string> bundles;
        for (const auto& file : test::entry_files(dir_)) {
            auto entry = store::decode(test::read_file(file.string()));
            if (entry && entry->key.source_kind == "ptx bundle") bundles.push_back(file.string());
        }
        return bundles;
    }

    std::uint64_t out_ = 0, in_ = 0;
    std::uint32_t rows_ = 0;
    std::array<void*, 3> args_ = {&out_, &in_, &rows_};
};

TEST_F(BundleTest, AWarmUpsModulesAreLinkedIntoABundleThatTheNextWarmUpLoadsOnce) {
    const auto items = distinct(6);
    warm_up_and_bundle(items);
    EXPECT_EQ(bundle_files().size(), 1u);
    EXPECT_EQ(test::entry_files(dir_).size(), 7u);  // each module's entry, and the bundle

    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 2);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, 1);  // one module for the six keys
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.misses, 6u);
    EXPECT_EQ(stats.disk_hits, 6u);
    EXPECT_EQ(stats.compiles, 0u);
    EXPECT_EQ(cache.size(), 6u);
    for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(results[i].ok());
        ASSERT_TRUE(results[i]->launch(LaunchConfig{}, args_).ok());
        EXPECT_EQ(fake_->launches_of(items[i].kernel_name), 1) << items[i].kernel_name;
    }
    // Each key is loaded: a lookup by key afterwards is a hit, through the bundle's module.
    reset_thread_stats();
    ASSERT_TRUE(cache.kernel(items[2].key, items[2].make_source, items[2].kernel_name).ok());
    EXPECT_EQ(thread_stats().hits, 1u);
    EXPECT_EQ(fake_->loads() - loads, 1);
}

// A process that ends soon after its warm-up (a script, a test) links nothing, and its end waits
// for no link.
TEST_F(BundleTest, ACacheEndingSoonAfterItsWarmUpLinksNothing) {
    {
        KernelCache cache(options());
        expect_all_ok(cache.warm_up(distinct(6), 2));
    }
    EXPECT_TRUE(bundle_files().empty());
    EXPECT_EQ(test::entry_files(dir_).size(), 6u);
}

// A generator runs once per key, bundles or not: one that failed is not asked again.
TEST_F(BundleTest, AFailingGeneratorIsCalledOnce) {
    auto items = distinct(3);
    int calls = 0;
    items[1].make_source = [&calls]() -> Result<Source> {
        ++calls;
        return Error(Errc::kSourceFailed, "no source today");
    };
    KernelCache cache(options());
    auto results = cache.warm_up(items, 1);
    EXPECT_TRUE(results[0].ok());
    ASSERT_FALSE(results[1].ok());
    EXPECT_EQ(results[1].error().code(), Errc::kSourceFailed);
    EXPECT_EQ(calls, 1);
}

// A key loaded from a bundle asked for a kernel its source lacks: that error, counted as the
// miss it was, as kernel() would.
TEST_F(BundleTest, AWrongKernelNameOfABundledKeyIsItsErrorAndOneMiss) {
    auto items = distinct(3);
    warm_up_and_bundle(items);
    items[2].kernel_name = "no_such_kernel";
    KernelCache cache(options());
    auto results = cache.warm_up(items, 1);
    ASSERT_FALSE(results[2].ok());
    EXPECT_EQ(results[2].error().code(), Errc::kKernelNotFound);
    EXPECT_EQ(cache.stats().misses, 3u);
    EXPECT_EQ(cache.stats().hits, 0u);
}

TEST_F(BundleTest, AKeyFindsOnlyItsOwnKernelsInTheSharedCode) {
    const auto items = distinct(3);
    warm_up_and_bundle(items);
    KernelCache cache(options());
    expect_all_ok(cache.warm_up(items, 1));
    // softmax_rows_2 is in the bundle's code, but not in the source of "softmax:1".
    auto other = cache.kernel(items[0].key, items[0].make_source, "softmax_rows_2");
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.error().code(), Errc::kKernelNotFound);
    auto module = cache.module(items[0].key, items[0].make_source);
    ASSERT_TRUE(module.ok());
    EXPECT_FALSE(module->global("softmax_rows_2").ok());
}

TEST_F(BundleTest, ModulesDeclaringOneKernelNameGoToBundlesOfTheirOwn) {
    // Four modules of one kernel name (other shapes), and two of names of their own.
    std::vector<WarmUpItem> items;
    for (int cols = 1; cols <= 4; ++cols) {
        items.push_back(
            {"same:" + std::to_string(cols),
             [cols]() -> Result<Source> { return Source::ptx(examples::softmax_rows_ptx(cols)); },
             "softmax_rows"});
    }
    for (const WarmUpItem& item : distinct(2)) items.push_back(item);
    warm_up_and_bundle(items);
    // One softmax_rows with the two others; each other softmax_rows alone, which is no bundle.
    EXPECT_EQ(bundle_files().size(), 1u);

    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 2);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, 4);  // the bundle, and three modules one by one
    std::set<std::uint64_t> kernels;
    for (const auto& result : results) {
        ASSERT_TRUE(result.ok());
        auto native = result->native_kernel();
        ASSERT_TRUE(native.ok());
        kernels.insert(reinterpret_cast<std::uint64_t>(*native));
    }
    EXPECT_EQ(kernels.size(), items.size());  // every key its own kernel
}

TEST_F(BundleTest, AKeyWhoseSourceChangedIsNotServedFromTheBundle) {
    auto items = distinct(3);
    warm_up_and_bundle(items);
    // The same keys, but the second now generates other code (with the same kernel name).
    items[1].make_source = []() -> Result<Source> {
        std::string ptx = named_softmax(2);
        return Source::ptx(ptx + "\n// changed\n");
    };
    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 1);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, 3);   // no bundle: three modules
    EXPECT_EQ(cache.stats().compiles, 1u);  // the changed one
}

TEST_F(BundleTest, TheSharedCodeIsUnloadedWithItsLastKey) {
    const auto items = distinct(3);
    warm_up_and_bundle(items);
    const int unloads = fake_->unloads();
    {
        KernelCache cache(options());
        auto results = cache.warm_up(items, 1);
        expect_all_ok(results);
        KernelHandle kept = *results[1];
        results.clear();
        cache.clear();
        EXPECT_EQ(fake_->unloads() - unloads, 0);  // one key still held
        ASSERT_TRUE(kept.launch(LaunchConfig{}, args_).ok());
    }
    EXPECT_EQ(fake_->unloads() - unloads, 1);
    EXPECT_EQ(fake_->live_libraries(), 0);
}

TEST_F(BundleTest, TurnedOffAWarmUpLinksAndLoadsNoBundle) {
    const auto items = distinct(4);
    CacheOptions off = options();
    off.bundle_warm_ups = false;
    warm_up_and_bundle(items, off);
    EXPECT_TRUE(bundle_files().empty());
    warm_up_and_bundle(items);  // now one is made
    ASSERT_EQ(bundle_files().size(), 1u);
    KernelCache cache(off);
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, 4);
}

TEST_F(BundleTest, AReadOnlyCacheLoadsBundlesButLinksNone) {
    const auto first = distinct(3);
    warm_up_and_bundle(first);
    CacheOptions read_only = options();
    read_only.read_only = true;
    {
        KernelCache cache(read_only);
        const int loads = fake_->loads();
        expect_all_ok(cache.warm_up(first, 1));
        EXPECT_EQ(fake_->loads() - loads, 1);
    }
    // Another set, whose modules a writer stored one by one: read, not linked.
    auto items = distinct(5);
    {
        CacheOptions off = options();
        off.bundle_warm_ups = false;
        warm_up_and_bundle(items, off);
    }
    KernelCache cache(read_only);
    expect_all_ok(cache.warm_up(items, 1));
    cache.wait_for_uploads();
    EXPECT_EQ(bundle_files().size(), 1u);
}

TEST_F(BundleTest, ACorruptBundleLeavesItsKeysToLoadOneByOne) {
    const auto items = distinct(4);
    warm_up_and_bundle(items);
    const auto bundles = bundle_files();
    ASSERT_EQ(bundles.size(), 1u);
    std::string bytes = test::read_file(bundles[0]);
    bytes[bytes.size() / 2] ^= 0x5a;
    test::write_file(bundles[0], bytes);
    KernelCache cache(options());
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, 4);
    EXPECT_EQ(cache.stats().compiles, 0u);
}

TEST_F(BundleTest, ABundleTheDriverRefusesLeavesItsKeysToLoadOneByOne) {
    const auto items = distinct(4);
    warm_up_and_bundle(items);
    KernelCache cache(options());
    fake_->fail_next_loads(1);  // the bundle's
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, 4);
}

// Processes sharing a disk tier link a bundle once: the one holding the lock beside its entry.
TEST_F(BundleTest, ABundleWhoseLockAnotherProcessHoldsIsNotLinkedHere) {
    store::DiskOptions disk_options;
    disk_options.directory = dir_;
    auto disk = store::DiskStore::open(disk_options);
    ASSERT_TRUE(disk.ok()) << disk.error().describe();
    auto tiers = std::make_shared<store::ArtifactStore>(1 << 20, std::move(*disk));
    const std::vector<std::string> ptx = {named_softmax(1), named_softmax(2)};
    std::vector<build::BundleMember> members;
    for (std::size_t i = 0; i < ptx.size(); ++i) {
        members.push_back({util::Fingerprint{i + 1, i + 1}, *compile::ptx_module_symbols(ptx[i])});
    }
    const compile::Target target{90, false};
    const build::BundlePlan plan =
        build::plan_bundle({&members[0], &members[1]}, target, "a toolchain");
    {
        std::optional<util::FileLock> other = tiers->disk()->lock(plan.fingerprint, {});
        ASSERT_TRUE(other.has_value());
        cache::BundleBuilder builder(tiers, std::chrono::milliseconds(0));
        builder.add({plan, target, ptx});
        builder.drain();
        EXPECT_EQ(builder.skipped(), 1u);
        EXPECT_EQ(builder.built(), 0u);
        EXPECT_TRUE(bundle_files().empty());
    }
    cache::BundleBuilder builder(tiers, std::chrono::milliseconds(0));
    builder.add({plan, target, ptx});
    builder.drain();
    EXPECT_EQ(builder.built(), 1u);
    EXPECT_EQ(bundle_files().size(), 1u);
    // Stored: a builder of another process that gets the lock next finds it there.
    cache::BundleBuilder later(tiers, std::chrono::milliseconds(0));
    later.add({plan, target, ptx});
    later.drain();
    EXPECT_EQ(later.skipped(), 1u);
}

TEST(PackBundles, NoTwoMembersOfABundleNameOneSymbolAndTheOrderGivenDoesNotMatter) {
    std::vector<build::BundleMember> members;
    for (std::uint64_t i = 0; i < 40; ++i) {
        // Names repeat every seven members; every fifth also defines a shared variable.
        std::vector<std::string> symbols = {"kernel_" + std::to_string(i % 7)};
        if (i % 5 == 0) symbols.push_back("table");
        std::sort(symbols.begin(), symbols.end());
        members.push_back({util::Fingerprint{i * 0x9e3779b97f4a7c15ull, i}, symbols});
    }
    const auto packed = build::pack_bundles(members);
    std::set<std::size_t> seen;
    for (const auto& bundle : packed) {
        EXPECT_GT(bundle.size(), 1u);
        EXPECT_LE(bundle.size(), build::kBundleMembers);
        std::set<std::string> names;
        for (const std::size_t m : bundle) {
            EXPECT_TRUE(seen.insert(m).second) << "member " << m << " bundled twice";
            for (const auto& symbol : members[m].symbols) {
                EXPECT_TRUE(names.insert(symbol).second) << symbol << " twice in a bundle";
            }
        }
    }
    std::vector<build::BundleMember> reversed(members.rbegin(), members.rend());
    auto again = build::pack_bundles(reversed);
    ASSERT_EQ(again.size(), packed.size());
    for (std::size_t b = 0; b < packed.size(); ++b) {
        ASSERT_EQ(again[b].size(), packed[b].size());
        for (std::size_t m = 0; m < packed[b].size(); ++m) {
            EXPECT_EQ(reversed[again[b][m]].fingerprint, members[packed[b][m]].fingerprint);
        }
    }
}

TEST(PackBundles, OneModuleUnderTwoKeysIsBundledOnce) {
    const std::vector<build::BundleMember> members = {{util::Fingerprint{1, 1}, {"a"}},
                                                      {util::Fingerprint{1, 1}, {"a"}},
                                                      {util::Fingerprint{2, 2}, {"b"}}};
    const auto packed = build::pack_bundles(members);
    ASSERT_EQ(packed.size(), 1u);
    EXPECT_EQ(packed[0].size(), 2u);
}

TEST(PtxModuleSymbols, KernelsFunctionsAndVariablesButNoParameterExternOrBodyLocal) {
    const std::string ptx = R"(
//
// Generated { by a generator } with "quotes" {
//
.version 8.0
.target sm_90
.address_size 64
.file 1 "/tmp/{odd}/path.py"
.extern .shared .align 16 .b8 global_smem[];
.extern .func (.param .b32 status) vprintf(.param .b64 format, .param .b64 args);
.global .align 1 .b8 _$_str[3] = {72, 105, 0};
.visible .const .align 4 .u32 table[4];
.shared .align 4 .f32 scratch[32];
.global .u32 left, right;
/* .global .u32 block_commented; { */
// .global .u32 commented_out; }
.weak .func (.param .b32 result) helper(.param .b32 x)
{
    .reg .b32 %r<2>;
    ret;
}
.func internal_helper()
{
    ret;
}
.visible .entry first(
    .param .u64 .ptr .global .align 1 first_param_0,
    .param .u32 first_param_1
)
.maxntid 128, 1, 1
{
    .reg .b32 %r<2>;
    .shared .align 4 .u32 inside[2];
    // a comment with a brace }
    ld.global.u32 %r1, [first_param_0];
    ret;
}
.entry second()
{
    { ret; }
}
.section .debug_str
{
    .b8 123, 125
}
)";
    const auto symbols = compile::ptx_module_symbols(ptx);
    ASSERT_TRUE(symbols.has_value());
    EXPECT_EQ(*symbols, (std::vector<std::string>{"_$_str", "first", "helper", "internal_helper",
                                                  "left", "right", "scratch", "second", "table"}));
}

TEST(PtxModuleSymbols, WhatDoesNotReadIsNoSymbolListAtAll) {
    for (const std::string& ptx : {
             std::string(".version 8.0\n.alias a, b;\n"),     // a directive it does not know
             std::string(".global .u32 ;\n"),                 // no name
             std::string(".entry k()\n{\n ret;\n"),           // a body not closed
             std::string(".entry k()\n{\n}\n}\n"),            // one closed too often
             std::string("/* open\n.entry k() {}\n"),         // a comment not closed
             std::string(".file 1 \"open\n.entry k() {}\n"),  // a string not closed
             std::string(".visible\n"),                       // a linkage alone
             std::string(".global .u32 half"),                // a statement not ended
         }) {
        EXPECT_FALSE(compile::ptx_module_symbols(ptx).has_value()) << ptx;
    }
    EXPECT_EQ(compile::ptx_module_symbols(""), std::vector<std::string>{});
}

// Two modules whose helper functions share a name (with other bodies) are never one bundle: a
// linker keeps one definition of a visible or weak function for both.
TEST(PackBundles, ModulesDefiningOneFunctionAreNotBundledTogether) {
    const auto a = compile::ptx_module_symbols(
        ".visible .func (.param .b32 r) helper()\n{\n ret;\n}\n.entry ka()\n{\n ret;\n}\n");
    const auto b = compile::ptx_module_symbols(
        ".weak .func (.param .b32 r) helper()\n{\n ret;\n}\n.entry kb()\n{\n ret;\n}\n");
    ASSERT_TRUE(a && b);
    const std::vector<build::BundleMember> members = {{util::Fingerprint{1, 1}, *a},
                                                      {util::Fingerprint{2, 2}, *b}};
    EXPECT_TRUE(build::pack_bundles(members).empty());
}

}  // namespace
}  // namespace kcache
