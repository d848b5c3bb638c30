// SPDX-License-Identifier: Apache-2.0
// warm_up's bundles: the PTX modules of a warm-up linked a few to a cubin by the real nvJitLink
// after it, stored, and loaded by a later warm-up (a new cache on the same directory, as a new
// process) as one module each, over the fake driver, which finds a cubin's kernels by section.
#include "build/bundle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "build/plan.hpp"
#include "cache/bundle_builder.hpp"
#include "cache/warm_up_bundles.hpp"
#include "compile/ptx_rename.hpp"
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
#include "testing/redis_server.hpp"
#include "util/elf_symbols.hpp"

namespace kcache {
namespace {

// softmax_rows for `cols` columns under a kernel name of its own: "softmax_rows_<cols>".
std::string named_softmax(int cols) {
    return examples::softmax_rows_ptx(cols, "softmax_rows_" + std::to_string(cols));
}

class BundleTest : public test::HostCompileTest {
protected:
    // The entry a warm-up that plans bundles adds beside them: its record of them
    // (build/warm_up_record.hpp).
    static constexpr std::size_t kRecord = 1;

    // Bundles on (as by default), whatever the environment says.
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

    // kernel() for each item, one after another, as a process that never warms up.
    static void load_one_by_one(KernelCache& cache, const std::vector<WarmUpItem>& items) {
        for (const WarmUpItem& item : items) {
            EXPECT_TRUE(cache.kernel(item.key, item.make_source, item.kernel_name).ok())
                << item.key;
        }
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

    // How `items` pack into bundles (build::pack_bundles over their plans, as a warm-up packs
    // them): each bundle's members, as indices into `items`.
    std::vector<std::vector<std::size_t>> packing(const std::vector<WarmUpItem>& items) const {
        const auto arch = fake_->current_arch();
        EXPECT_TRUE(arch.ok());
        std::vector<util::Fingerprint> members;
        for (const WarmUpItem& item : items) {
            const auto source = item.make_source();
            EXPECT_TRUE(source.ok());
            const auto plan = build::plan_build(*arch, *source, true);
            EXPECT_TRUE(plan.ok() && plan->has_value());
            members.push_back((*plan)->fingerprint);
        }
        return build::pack_bundles(members);
    }
    // The driver loads a warm-up of `items` takes once their bundles are stored: one a bundle,
    // one each for the rest.
    int loads_with_bundles(const std::vector<WarmUpItem>& items) const {
        const auto bundles = packing(items);
        std::size_t bundled = 0;
        for (const auto& bundle : bundles) bundled += bundle.size();
        return static_cast<int>(bundles.size() + items.size() - bundled);
    }

    // Launches of kernel `name` through whichever code holds it: a module of its own, or a
    // bundle (where it is named for its member).
    int launches_of(const std::string& name) const {
        int launches = fake_->launches_of(name);
        for (std::size_t member = 0; member < build::kBundleMembers; ++member) {
            launches += fake_->launches_of(build::bundled_symbol(name, member));
        }
        return launches;
    }

    // Memory and a disk tier in dir_, as a cache's; nullptr (and a failure) if the disk does not
    // open.
    std::shared_ptr<store::ArtifactStore> disk_tiers() const {
        store::DiskOptions disk_options;
        disk_options.directory = dir_;
        auto disk = store::DiskStore::open(disk_options);
        EXPECT_TRUE(disk.ok()) << disk.error().describe();
        if (!disk) return nullptr;
        return std::make_shared<store::ArtifactStore>(1 << 20, std::move(*disk));
    }

    // The plan of a bundle of `ptx`, its members' fingerprints made up (1, 2, ...).
    static build::BundlePlan plan_of(const std::vector<std::string>& ptx,
                                     const compile::Target& target) {
        std::vector<util::Fingerprint> members;
        for (std::size_t i = 0; i < ptx.size(); ++i) members.push_back({i + 1, i + 1});
        return build::plan_bundle(members, target, "a toolchain");
    }

    // Another node's options: a driver and a disk directory (below the test's) of its own, and
    // the remote tier at `url`.
    CacheOptions node_options(const std::string& url, const std::string& directory) const {
        CacheOptions o = options();
        o.driver = std::make_shared<fakes::FakeDriver>();
        o.disk_directory = temp_.path() + "/" + directory;
        o.remote = url;
        return o;
    }

    // A BundleBuilder's job linking `ptx` under `plan`.
    static cache::BundleBuilder::Job link_job(const build::BundlePlan& plan,
                                              const compile::Target& target,
                                              const std::vector<std::string>& ptx) {
        cache::BundleBuilder::Job job;
        job.plan = plan;
        job.target = target;
        job.ptx = ptx;
        return job;
    }

    // The fewest distinct kernels (in steps of 8) that pack into enough bundles for a warm-up on
    // `threads` threads to link them first when it finds none of them.
    // `first` is listed before them.
    std::vector<WarmUpItem> enough_to_link_first(unsigned threads,
                                                 const std::vector<WarmUpItem>& first = {}) const {
        const std::size_t enough = cache::WarmUpBundles::kLinkFirstBundlesPerThread * threads;
        for (int count = 8;; count += 8) {
            auto items = first;
            for (auto& item : distinct(count)) items.push_back(std::move(item));
            if (packing(items).size() >= enough) return items;
        }
    }

    // The bundles on disk (their entry files).
    std::vector<std::string> bundle_files() const {
        std::vector<std::string> bundles;
        for (const auto& file : test::entry_files(dir_)) {
            auto entry = store::decode(test::read_file(file.string()));
            if (entry && entry->key.source_kind == build::kBundleSourceKind)
                bundles.push_back(file.string());
        }
        return bundles;
    }

    std::uint64_t out_ = 0, in_ = 0;
    std::uint32_t rows_ = 0;
    std::array<void*, 3> args_ = {&out_, &in_, &rows_};
};

// The cluster's case: a node with an empty disk takes the bundles another node uploaded, and
// loads each as one module, compiling nothing.
TEST_F(BundleTest, ANodeWithAnEmptyDiskLoadsTheBundlesAnotherNodeUploaded) {
    if (!fakes::RedisServer::available()) GTEST_SKIP() << fakes::RedisServer::unavailable_reason();
    auto server = fakes::RedisServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    const auto items = distinct(6);
    const auto bundles = packing(items);
    CacheOptions builder = options();
    builder.remote = (*server)->url();
    {
        KernelCache cache(builder);
        expect_all_ok(cache.warm_up(items, 2));
        cache.wait_for_uploads();
        EXPECT_EQ(cache.stats().remote_writes, items.size() + bundles.size() + kRecord)
            << "each key's entry and each bundle go to the remote tier";
    }
    const CacheOptions node = node_options((*server)->url(), "node");
    KernelCache cache(node);
    expect_all_ok(cache.warm_up(items, 2));
    EXPECT_EQ(static_cast<const fakes::FakeDriver&>(*node.driver).loads(),
              loads_with_bundles(items));
    EXPECT_EQ(cache.stats().compiles, 0u);
}

// A node's cold warm-up that linked its bundles first uploads them and each key's own entry: a
// node with an empty disk then finds either, by warm_up or by kernel(), and compiles nothing.
TEST_F(BundleTest, BundlesLinkedFirstAndTheirKeysEntriesReachTheRemoteTier) {
    if (!fakes::RedisServer::available()) GTEST_SKIP() << fakes::RedisServer::unavailable_reason();
    auto server = fakes::RedisServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    const auto items = enough_to_link_first(1);
    const auto bundles = packing(items);
    CacheOptions builder = options();
    builder.remote = (*server)->url();
    {
        KernelCache cache(builder);
        const int loads = fake_->loads();
        expect_all_ok(cache.warm_up(items, 1));
        EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
        cache.wait_for_uploads();
        EXPECT_EQ(cache.stats().remote_writes, items.size() + bundles.size() + kRecord);
    }
    auto node = [&](const std::string& directory) {
        return node_options((*server)->url(), directory);
    };
    {
        const CacheOptions o = node("bundles");
        KernelCache cache(o);
        expect_all_ok(cache.warm_up(items, 1));
        EXPECT_EQ(static_cast<const fakes::FakeDriver&>(*o.driver).loads(),
                  loads_with_bundles(items));
        EXPECT_EQ(cache.stats().compiles, 0u);
    }
    KernelCache cache(node("keys"));
    load_one_by_one(cache, items);
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().remote_hits, items.size());
}

TEST_F(BundleTest, AWarmUpsModulesAreLinkedIntoBundlesThatTheNextWarmUpLoadsAsOneModuleEach) {
    const auto items = distinct(6);
    const auto bundles = packing(items);
    ASSERT_FALSE(bundles.empty());
    warm_up_and_bundle(items);
    EXPECT_EQ(bundle_files().size(), bundles.size());
    // Each module's entry, the bundles, and the warm-up's record of them.
    EXPECT_EQ(test::entry_files(dir_).size(), items.size() + bundles.size() + kRecord);

    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 2);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
    EXPECT_LT(loads_with_bundles(items), static_cast<int>(items.size()));
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.misses, 6u);
    EXPECT_EQ(stats.disk_hits, 6u);
    EXPECT_EQ(stats.compiles, 0u);
    EXPECT_EQ(cache.size(), 6u);
    for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(results[i].ok());
        ASSERT_TRUE(results[i]->launch(LaunchConfig{}, args_).ok());
        EXPECT_EQ(launches_of(items[i].kernel_name), 1) << items[i].kernel_name;
    }
    // Each key is loaded: a lookup by key afterwards is a hit, through the bundle's module.
    reset_thread_stats();
    ASSERT_TRUE(cache.kernel(items[2].key, items[2].make_source, items[2].kernel_name).ok());
    EXPECT_EQ(thread_stats().hits, 1u);
    EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
}

// A cold warm-up of many kernels links their bundles first, on its workers, and loads one
// module a bundle: the driver charges each module more the more it holds. Each key is a miss and
// a compile, and its own entry is made after, for kernel() in a later process.
TEST_F(BundleTest, AColdWarmUpOfManyKernelsLinksTheirBundlesFirstAndLoadsOneModuleABundle) {
    const auto items = enough_to_link_first(1);
    const auto bundles = packing(items);
    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 1);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
    EXPECT_EQ(bundle_files().size(), bundles.size());  // stored before it returned
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.misses, items.size());
    EXPECT_EQ(stats.compiles, items.size());
    EXPECT_EQ(stats.disk_misses, items.size());
    EXPECT_EQ(stats.disk_hits, 0u);
    EXPECT_GT(stats.compile_ns, 0u);
    for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(results[i].ok());
        ASSERT_TRUE(results[i]->launch(LaunchConfig{}, args_).ok());
        EXPECT_EQ(launches_of(items[i].kernel_name), 1) << items[i].kernel_name;
    }
    cache.wait_for_uploads();
    EXPECT_EQ(test::entry_files(dir_).size(), items.size() + bundles.size() + kRecord);

    // A later process: its kernel() finds each key's own entry, and compiles nothing.
    KernelCache later(options());
    load_one_by_one(later, items);
    EXPECT_EQ(later.stats().compiles, 0u);
    EXPECT_EQ(later.stats().disk_hits, items.size());
}

// A cache that ends right after such a warm-up (a script that fills the cache) makes its keys'
// own entries first: a later warm-up would find the bundles and queue none of them again.
TEST_F(BundleTest, ACacheEndingRightAfterLinkingFirstMakesItsKeysEntriesFirst) {
    const auto items = enough_to_link_first(1);
    {
        KernelCache cache(options());
        expect_all_ok(cache.warm_up(items, 1));
    }
    EXPECT_EQ(test::entry_files(dir_).size(), items.size() + packing(items).size() + kRecord);
}

// Members' entries still queued when a process ended (its exit makes none): the next warm-up
// that loads their bundle makes those the disk lacks, after it, so that kernel() finds them.
TEST_F(BundleTest, AWarmUpLoadingABundleMakesTheEntriesItsMembersLackOnDisk) {
    const auto items = enough_to_link_first(1);
    const auto bundles = packing(items);
    warm_up_and_bundle(items);
    const auto kept = bundle_files();
    ASSERT_EQ(kept.size(), bundles.size());
    for (const auto& file : test::entry_files(dir_)) {
        if (std::find(kept.begin(), kept.end(), file.string()) == kept.end()) {
            std::filesystem::remove(file);
        }
    }
    {
        KernelCache cache(options());
        const int loads = fake_->loads();
        expect_all_ok(cache.warm_up(items, 1));
        EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
        EXPECT_EQ(cache.stats().compiles, 0u);
        cache.wait_for_uploads();
    }
    EXPECT_EQ(test::entry_files(dir_).size(), items.size() + bundles.size() + kRecord);
    KernelCache later(options());
    load_one_by_one(later, items);
    EXPECT_EQ(later.stats().compiles, 0u);
}

// Fewer bundles than its threads can keep busy: a warm-up compiles key by key, the largest first,
// and links the bundles after it, as ever.
TEST_F(BundleTest, AColdWarmUpOfFewBundlesForItsThreadsCompilesKeyByKey) {
    const auto items = enough_to_link_first(1);
    const auto bundles = packing(items);
    KernelCache cache(options());
    const int loads = fake_->loads();
    // Enough for one thread, too few for as many threads as bundles.
    const auto threads = static_cast<unsigned>(bundles.size());
    expect_all_ok(cache.warm_up(items, threads));
    EXPECT_EQ(fake_->loads() - loads, static_cast<int>(items.size()));
    EXPECT_TRUE(bundle_files().empty());
    EXPECT_EQ(cache.stats().compiles, items.size());
    cache.wait_for_uploads();
    EXPECT_EQ(bundle_files().size(), bundles.size());
}

// A bundle a member of which has its own entry stored (a process that ended before its links) is
// not linked first: its members are loaded or compiled key by key, and it is linked after.
TEST_F(BundleTest, ABundleWithAMemberStoredOnItsOwnIsNotLinkedFirst) {
    const auto items = enough_to_link_first(1);
    const auto bundles = packing(items);
    std::vector<WarmUpItem> stored;  // the first member of each bundle
    for (const auto& bundle : bundles) stored.push_back(items[bundle.front()]);
    CacheOptions off = options();
    off.bundle_warm_ups = false;
    warm_up_and_bundle(stored, off);
    ASSERT_TRUE(bundle_files().empty());
    KernelCache cache(options());
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, static_cast<int>(items.size()));
    EXPECT_EQ(cache.stats().compiles, items.size() - stored.size());
    cache.wait_for_uploads();
    EXPECT_EQ(bundle_files().size(), packing(items).size());
}

// Members that do not link together (one names a symbol with the bundles' marker): their bundle
// is recorded as such and its members compiled key by key; the other bundles load as linked.
TEST_F(BundleTest, ABundleThatDoesNotLinkFirstLeavesItsMembersToCompileKeyByKey) {
    const std::string odd = "softmax$kc7";
    const auto items = enough_to_link_first(
        1, {{"odd",
             [odd]() -> Result<Source> { return Source::ptx(examples::softmax_rows_ptx(1, odd)); },
             odd}});
    const auto bundles = packing(items);
    std::size_t odd_bundle_size = 0;
    for (const auto& bundle : bundles) {
        if (std::find(bundle.begin(), bundle.end(), 0u) != bundle.end()) {
            odd_bundle_size = bundle.size();
        }
    }
    ASSERT_GT(odd_bundle_size, 0u);
    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 1);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads,
              loads_with_bundles(items) - 1 + static_cast<int>(odd_bundle_size));
    EXPECT_EQ(bundle_files().size(), bundles.size() - 1);
    EXPECT_EQ(cache.stats().compiles, items.size());
    ASSERT_TRUE(results.front()->launch(LaunchConfig{}, args_).ok());
    EXPECT_EQ(fake_->launches_of(odd), 1);
    // Recorded: no process links those members again, and this one queued nothing.
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    std::vector<util::Fingerprint> fingerprints;
    const auto arch = fake_->current_arch();
    ASSERT_TRUE(arch.ok());
    std::optional<build::BundlePlan> plan;
    for (const auto& bundle : bundles) {
        if (std::find(bundle.begin(), bundle.end(), 0u) == bundle.end()) continue;
        std::string toolchain;
        for (const std::size_t at : bundle) {
            const auto member = build::plan_build(*arch, *items[at].make_source(), true);
            ASSERT_TRUE(member.ok() && member->has_value());
            fingerprints.push_back((*member)->fingerprint);
            toolchain = (*member)->key.toolchain;
        }
        plan = build::plan_bundle(fingerprints, compile::Target{*arch, false}, toolchain);
    }
    ASSERT_TRUE(plan.has_value());
    EXPECT_TRUE(build::find_bundle(*tiers, *plan).did_not_link);
    cache.wait_for_uploads();
    EXPECT_EQ(bundle_files().size(), bundles.size() - 1);
}

// A process that ends soon after its warm-up (a script, a test) links nothing, and its end waits
// for no link.
TEST_F(BundleTest, ACacheEndingSoonAfterItsWarmUpLinksNothing) {
    {
        KernelCache cache(options());
        expect_all_ok(cache.warm_up(distinct(6), 2));
    }
    EXPECT_TRUE(bundle_files().empty());
    EXPECT_EQ(test::entry_files(dir_).size(), 6u + kRecord);
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

// Generators reuse kernel names for other shapes: such modules link into one bundle all the same,
// each key launching its own kernel there.
TEST_F(BundleTest, ModulesOfOneKernelNameShareABundleEachKeyWithItsOwnKernel) {
    std::vector<WarmUpItem> items;
    for (int cols = 1; cols <= 6; ++cols) {
        items.push_back(
            {"same:" + std::to_string(cols),
             [cols]() -> Result<Source> { return Source::ptx(examples::softmax_rows_ptx(cols)); },
             "softmax_rows"});
    }
    const auto bundles = packing(items);
    ASSERT_FALSE(bundles.empty());
    warm_up_and_bundle(items);
    EXPECT_EQ(bundle_files().size(), bundles.size());

    KernelCache cache(options());
    const int loads = fake_->loads();
    auto results = cache.warm_up(items, 2);
    expect_all_ok(results);
    EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(items));
    std::set<std::uint64_t> kernels;
    for (const auto& result : results) {
        ASSERT_TRUE(result.ok());
        auto native = result->native_kernel();
        ASSERT_TRUE(native.ok());
        kernels.insert(reinterpret_cast<std::uint64_t>(*native));
        ASSERT_TRUE(result->launch(LaunchConfig{}, args_).ok());
    }
    EXPECT_EQ(kernels.size(), items.size());  // every key its own kernel
    EXPECT_EQ(launches_of("softmax_rows"), 6);
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
    // The bundle its record names, loaded ahead and used for no key, then three modules.
    EXPECT_EQ(fake_->loads() - loads, 1 + 3);
    EXPECT_EQ(fake_->live_libraries(), 3);
    EXPECT_EQ(cache.stats().compiles, 1u);  // the changed one
}

TEST_F(BundleTest, TheSharedCodeIsUnloadedWithItsLastKey) {
    const auto items = distinct(8);
    const auto bundles = packing(items);
    ASSERT_FALSE(bundles.empty());
    warm_up_and_bundle(items);
    const int unloads = fake_->unloads();
    const int loads = loads_with_bundles(items);
    {
        KernelCache cache(options());
        auto results = cache.warm_up(items, 1);
        expect_all_ok(results);
        KernelHandle kept = *results[bundles[0][0]];  // a bundle's first member
        results.clear();
        cache.clear();
        EXPECT_EQ(fake_->unloads() - unloads, loads - 1);  // all but the code one key holds
        ASSERT_TRUE(kept.launch(LaunchConfig{}, args_).ok());
    }
    EXPECT_EQ(fake_->unloads() - unloads, loads);
    EXPECT_EQ(fake_->live_libraries(), 0);
}

TEST_F(BundleTest, TurnedOffAWarmUpLinksAndLoadsNoBundle) {
    const auto items = distinct(8);
    CacheOptions off = options();
    off.bundle_warm_ups = false;
    warm_up_and_bundle(items, off);
    EXPECT_TRUE(bundle_files().empty());
    warm_up_and_bundle(items);  // now they are made
    ASSERT_FALSE(bundle_files().empty());
    KernelCache cache(off);
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, 8);
}

TEST_F(BundleTest, AReadOnlyCacheLoadsBundlesButLinksNone) {
    const auto first = distinct(3);
    ASSERT_FALSE(packing(first).empty());
    warm_up_and_bundle(first);
    const std::size_t stored = bundle_files().size();
    CacheOptions read_only = options();
    read_only.read_only = true;
    {
        KernelCache cache(read_only);
        const int loads = fake_->loads();
        expect_all_ok(cache.warm_up(first, 1));
        EXPECT_EQ(fake_->loads() - loads, loads_with_bundles(first));
    }
    // Another set, whose modules a writer stored one by one: read, not linked.
    auto items = distinct(8);
    {
        CacheOptions off = options();
        off.bundle_warm_ups = false;
        warm_up_and_bundle(items, off);
    }
    KernelCache cache(read_only);
    expect_all_ok(cache.warm_up(items, 1));
    cache.wait_for_uploads();
    EXPECT_EQ(bundle_files().size(), stored);
}

TEST_F(BundleTest, ACorruptBundleLeavesItsKeysToLoadOneByOne) {
    const auto items = distinct(8);
    warm_up_and_bundle(items);
    const auto bundles = bundle_files();
    ASSERT_FALSE(bundles.empty());
    for (const std::string& bundle : bundles) {
        std::string bytes = test::read_file(bundle);
        bytes[bytes.size() / 2] ^= 0x5a;
        test::write_file(bundle, bytes);
    }
    KernelCache cache(options());
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    EXPECT_EQ(fake_->loads() - loads, 8);
    EXPECT_EQ(cache.stats().compiles, 0u);
}

TEST_F(BundleTest, ABundleTheDriverRefusesLeavesItsKeysToLoadOneByOne) {
    const auto items = distinct(8);
    const auto bundles = packing(items);
    ASSERT_FALSE(bundles.empty());
    warm_up_and_bundle(items);
    KernelCache cache(options());
    fake_->fail_next_loads(1);  // the first bundle's
    const int loads = fake_->loads();
    expect_all_ok(cache.warm_up(items, 1));
    // That bundle's members one by one instead (the refused load is no load).
    EXPECT_EQ(fake_->loads() - loads,
              loads_with_bundles(items) - 1 + static_cast<int>(bundles[0].size()));
}

// Processes sharing a disk tier link a bundle once: the one holding the lock beside its entry.
// Members that do not link together (here a variable named ret, which its renaming takes from
// the instruction too) are recorded as such: no process links them again, and a warm-up loads
// them one by one without queueing the bundle.
TEST_F(BundleTest, ABundleThatDidNotLinkIsRecordedAndNotLinkedAgain) {
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    const std::vector<std::string> ptx = {
        named_softmax(1),
        ".version 7.8\n.target sm_70\n.address_size 64\n.global .u32 ret;\n"
        ".visible .entry k()\n{\n ret;\n}\n"};
    const compile::Target target{90, false};
    const build::BundlePlan plan = plan_of(ptx, target);
    EXPECT_FALSE(build::find_bundle(*tiers, plan).did_not_link);
    {
        cache::BundleBuilder builder(tiers, {}, std::chrono::milliseconds(0));
        builder.add(link_job(plan, target, ptx));
        builder.drain();
        EXPECT_EQ(builder.failed(), 1u);
    }
    const build::FoundBundle found = build::find_bundle(*tiers, plan);
    EXPECT_TRUE(found.did_not_link);
    EXPECT_FALSE(found.artifact.has_value());
    EXPECT_TRUE(bundle_files().empty());
    cache::BundleBuilder again(tiers, {}, std::chrono::milliseconds(0));
    again.add(link_job(plan, target, ptx));
    again.drain();
    EXPECT_EQ(again.skipped(), 1u);
    EXPECT_EQ(again.failed(), 0u);
}

TEST_F(BundleTest, ABundleWhoseLockAnotherProcessHoldsIsNotLinkedHere) {
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    const std::vector<std::string> ptx = {named_softmax(1), named_softmax(2)};
    const compile::Target target{90, false};
    const build::BundlePlan plan = plan_of(ptx, target);
    {
        std::optional<util::FileLock> other = tiers->disk()->lock(plan.fingerprint, {});
        ASSERT_TRUE(other.has_value());
        cache::BundleBuilder builder(tiers, {}, std::chrono::milliseconds(0));
        builder.add(link_job(plan, target, ptx));
        builder.drain();
        EXPECT_EQ(builder.skipped(), 1u);
        EXPECT_EQ(builder.built(), 0u);
        EXPECT_TRUE(bundle_files().empty());
    }
    cache::BundleBuilder builder(tiers, {}, std::chrono::milliseconds(0));
    builder.add(link_job(plan, target, ptx));
    builder.drain();
    EXPECT_EQ(builder.built(), 1u);
    EXPECT_EQ(bundle_files().size(), 1u);
    // Stored: a builder of another process that gets the lock next finds it there.
    cache::BundleBuilder later(tiers, {}, std::chrono::milliseconds(0));
    later.add(link_job(plan, target, ptx));
    later.drain();
    EXPECT_EQ(later.skipped(), 1u);
}

// Jobs queued together (a warm-up queues one for each bundle it loaded) start one thread on the
// caller's path; the thread that takes the first starts the others the queue wants.
TEST_F(BundleTest, JobsQueuedTogetherStartOneThreadAndTheFirstToRunStartsTheRest) {
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    const compile::Target target{90, false};
    // A delay no test machine outlasts between the adds: drain() skips it.
    cache::BundleBuilder builder(tiers, {}, std::chrono::milliseconds(60000));
    for (int i = 0; i < 6; ++i) {
        const std::vector<std::string> ptx = {named_softmax(2 * i + 1), named_softmax(2 * i + 2)};
        std::vector<util::Fingerprint> members = {{7, 2u * i + 1}, {7, 2u * i + 2}};
        builder.add(link_job(build::plan_bundle(members, target, "a toolchain"), target, ptx));
    }
    EXPECT_EQ(builder.threads_started(), 1u);
    builder.drain();
    EXPECT_EQ(builder.built(), 6u);
    EXPECT_EQ(builder.threads_started(), cache::BundleBuilder::kThreads);
}

// A thread started idle beforehand (by a warm-up's planner) takes the jobs added after it: the
// adding thread starts none.
TEST_F(BundleTest, JobsAddedAfterAnIdleStartStartNoThread) {
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    const compile::Target target{90, false};
    cache::BundleBuilder builder(tiers, {}, std::chrono::milliseconds(60000));
    builder.start_idle();
    builder.start_idle();  // one is enough
    EXPECT_EQ(builder.threads_started(), 1u);
    const std::vector<std::string> ptx = {named_softmax(1), named_softmax(2)};
    builder.add(link_job(build::plan_bundle({{8, 1}, {8, 2}}, target, "a toolchain"), target, ptx));
    EXPECT_EQ(builder.threads_started(), 1u);  // the idle one took it
    builder.drain();
    EXPECT_EQ(builder.built(), 1u);
}

// A cache's end makes the members' entries still queued on every core, but only those the disk
// tier lacks: after a warm start (every entry there) it starts no thread and makes nothing.
TEST_F(BundleTest, AnEndWithEveryQueuedEntryOnDiskStartsNoThread) {
    auto tiers = disk_tiers();
    ASSERT_NE(tiers, nullptr);
    int made = 0;
    cache::BundleBuilder builder(
        tiers,
        [&](std::string_view, const Source&, int) -> Result<void> {
            ++made;
            return {};
        },
        std::chrono::milliseconds(60000));
    const compile::Target target{90, false};
    for (std::uint64_t b = 0; b < 3; ++b) {
        cache::BundleBuilder::Job job;
        job.plan = build::plan_bundle({{9, 2 * b + 1}, {9, 2 * b + 2}}, target, "a toolchain");
        job.target = target;
        job.arch = 90;
        for (std::uint64_t m = 1; m <= 2; ++m) {
            const util::Fingerprint entry{9, 2 * b + m};
            const std::filesystem::path path = tiers->disk()->path_of(entry);
            std::filesystem::create_directories(path.parent_path());
            std::ofstream(path) << "an entry";
            job.entries.push_back(
                {"key " + std::to_string(2 * b + m), Source::ptx(named_softmax(1)), entry});
        }
        builder.add(std::move(job));
    }
    EXPECT_EQ(builder.threads_started(), 1u);  // waiting for the first job's delay
    builder.finish();
    EXPECT_EQ(made, 0);
    EXPECT_EQ(builder.threads_started(), 1u);
}

// A fingerprint of its own for each i, as a module's would be.
util::Fingerprint spread(std::uint64_t i) {
    return util::bytes_hash("module " + std::to_string(i));
}

TEST(PackBundles, EveryMemberOnceInBundlesOfTwoToTheMostAndTheOrderGivenDoesNotMatter) {
    std::vector<util::Fingerprint> members;
    for (std::uint64_t i = 0; i < 400; ++i) members.push_back({spread(i)});
    const auto packed = build::pack_bundles(members);
    std::set<std::size_t> seen;
    std::size_t full = 0;
    for (const auto& bundle : packed) {
        EXPECT_GT(bundle.size(), 1u);
        EXPECT_LE(bundle.size(), build::kBundleMembers);
        full += bundle.size() == build::kBundleMembers ? 1 : 0;
        for (const std::size_t m : bundle) {
            EXPECT_TRUE(seen.insert(m).second) << "member " << m << " bundled twice";
        }
    }
    // Bundles end where a member's fingerprint says so: about one member in
    // kBundleMembersAverage, seldom at the most.
    EXPECT_GE(packed.size(), 400 / build::kBundleMembers);
    EXPECT_LE(packed.size(), 2 * 400 / build::kBundleMembersAverage);
    EXPECT_LT(full, packed.size() / 4);
    EXPECT_GT(seen.size(), 400 * 9 / 10);  // bundles of one are left out: a few

    std::vector<util::Fingerprint> reversed(members.rbegin(), members.rend());
    auto again = build::pack_bundles(reversed);
    ASSERT_EQ(again.size(), packed.size());
    for (std::size_t b = 0; b < packed.size(); ++b) {
        ASSERT_EQ(again[b].size(), packed[b].size());
        for (std::size_t m = 0; m < packed[b].size(); ++m) {
            EXPECT_EQ(reversed[again[b][m]], members[packed[b][m]]);
        }
    }
}

// One module more changes its own bundle, and leaves every other as it was (their links stay
// good), where no bundle is full.
TEST(PackBundles, AMemberAddedChangesItsOwnBundleOnly) {
    std::vector<util::Fingerprint> members;
    for (std::uint64_t i = 0; i < 60; ++i) members.push_back({spread(i)});  // none full
    auto fingerprints_of = [](const std::vector<util::Fingerprint>& all) {
        std::set<std::string> bundles;  // each its members' fingerprints
        for (const auto& bundle : build::pack_bundles(all)) {
            std::string prints;
            for (const std::size_t m : bundle) prints += all[m].hex() + " ";
            bundles.insert(prints);
        }
        return bundles;
    };
    const auto before = fingerprints_of(members);
    for (const auto& bundle : build::pack_bundles(members)) {
        ASSERT_LT(bundle.size(), build::kBundleMembers);  // the premise
    }
    for (std::uint64_t added = 1000; added < 1010; ++added) {
        auto more = members;
        more.push_back({spread(added)});
        const auto after = fingerprints_of(more);
        std::size_t changed = 0;
        for (const auto& bundle : after) changed += before.count(bundle) ? 0 : 1;
        EXPECT_LE(changed, 1u) << "adding member " << added;
        std::size_t gone = 0;
        for (const auto& bundle : before) gone += after.count(bundle) ? 0 : 1;
        EXPECT_LE(gone, 2u) << "adding member " << added;  // its bundle, or two it joined
    }
}

TEST(PackBundles, OneModuleUnderTwoKeysIsBundledOnce) {
    const std::vector<util::Fingerprint> members = {
        {util::Fingerprint{1, 1}}, {util::Fingerprint{1, 1}}, {util::Fingerprint{2, 2}}};
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
             // A definition after a line directive's operands, on its line: ptxas reads it.
             std::string(".address_size 64 .weak .func f()\n{\n ret;\n}\n"),
             std::string(".version 8.0 .target sm_90 .address_size 64 .global .u32 g;"),
             std::string(".file 1 \"a.cu\" .visible .entry k()\n{\n ret;\n}\n"),
         }) {
        EXPECT_FALSE(compile::ptx_module_symbols(ptx).has_value()) << ptx;
    }
    EXPECT_EQ(compile::ptx_module_symbols(""), std::vector<std::string>{});
    // Line directives' own operands read.
    EXPECT_EQ(compile::ptx_module_symbols(".version 8.0\n.target sm_90a, debug\n.address_size 64\n"
                                          ".file 1 \"a.cu\", 17, 4\n.global .u32 g;\n"),
              std::vector<std::string>{"g"});
}

// Two modules whose helper functions share a name (with other bodies) link into one bundle, each
// calling its own: a linker keeps one definition of a visible or weak function, so each module's
// names are made its own first.
TEST_F(BundleTest, ModulesDefiningOneFunctionEachCallTheirOwnInABundle) {
    auto module = [](const char* linkage, int value, const char* kernel) {
        return std::string(".version 7.8\n.target sm_70\n.address_size 64\n") + linkage +
               " .func (.param .b32 r) helper()\n{\n .reg .b32 %v;\n mov.b32 %v, " +
               std::to_string(value) + ";\n st.param.b32 [r], %v;\n ret;\n}\n.visible .entry " +
               kernel +
               "(.param .u64 out)\n{\n .reg .b32 %v;\n .reg .b64 %p;\n"
               " ld.param.u64 %p, [out];\n { .param .b32 got;\n"
               " call.uni (got), helper, ();\n ld.param.b32 %v, [got];\n }\n"
               " st.global.u32 [%p], %v;\n ret;\n}\n";
    };
    const std::string a = module(".visible", 1, "ka"), b = module(".weak", 2, "kb");
    std::vector<std::string> renamed;
    for (const std::string* ptx : {&a, &b}) {
        const auto symbols = compile::ptx_module_symbols(*ptx);
        ASSERT_TRUE(symbols.has_value());
        const auto text =
            compile::rename_ptx_symbols(*ptx, *symbols, build::kBundleMarker, renamed.size());
        ASSERT_TRUE(text.has_value());
        renamed.push_back(*text);
    }
    EXPECT_NE(renamed[0].find("call.uni (got), helper$kc0, ();"), std::string::npos);
    EXPECT_NE(renamed[1].find("call.uni (got), helper$kc1, ();"), std::string::npos);
    EXPECT_NE(renamed[1].find(".weak .func (.param .b32 r) helper$kc1()"), std::string::npos);
    EXPECT_NE(renamed[1].find(".visible .entry kb$kc1(.param .u64 out)"), std::string::npos);
    const auto linked = compile::link_ptx_bundle({&renamed[0], &renamed[1]}, compile::Target{90});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST(RenamePtxSymbols, WholeNamesOnlyAndNeitherCommentsNorStrings) {
    const std::string ptx =
        "// scale is here\n"
        ".global .align 4 .f32 scale = 2.0;\n"
        ".global .align 1 .b8 msg[6] = {115, 99, 97, 108, 101, 0};\n"
        ".visible .entry scale_rows(.param .u64 scale_rows_out)\n{\n"
        " .reg .f32 %scale;\n"
        " ld.global.f32 %scale, [scale];\n"
        " ld.global.f32 %scale, [scale+4]; /* scale */\n"
        " mov.u64 %rd1, msg;\n"
        " .pragma \"scale\";\n ret;\n}\n";
    const std::vector<std::string> names = {"msg", "scale", "scale_rows"};
    const auto renamed = compile::rename_ptx_symbols(ptx, names, "$kc", 4);
    ASSERT_TRUE(renamed.has_value());
    EXPECT_EQ(*renamed,
              "// scale is here\n"
              ".global .align 4 .f32 scale$kc4 = 2.0;\n"
              ".global .align 1 .b8 msg$kc4[6] = {115, 99, 97, 108, 101, 0};\n"
              ".visible .entry scale_rows$kc4(.param .u64 scale_rows_out)\n{\n"
              " .reg .f32 %scale;\n"
              " ld.global.f32 %scale, [scale$kc4];\n"
              " ld.global.f32 %scale, [scale$kc4+4]; /* scale */\n"
              " mov.u64 %rd1, msg$kc4;\n"
              " .pragma \"scale\";\n ret;\n}\n");
    EXPECT_EQ(compile::ptx_module_symbols(*renamed),
              (std::vector<std::string>{"msg$kc4", "scale$kc4", "scale_rows$kc4"}));
}

// A name that already holds the marker could meet a renamed one: no renaming then.
TEST(RenamePtxSymbols, ANameHoldingTheMarkerRefusesTheRenaming) {
    const std::string ptx =
        ".extern .func helper$kc1();\n.visible .entry k()\n{\n call.uni helper$kc1, ();\n "
        "ret;\n}\n";
    EXPECT_FALSE(compile::rename_ptx_symbols(ptx, {"k"}, "$kc", 0).has_value());
    EXPECT_TRUE(compile::rename_ptx_symbols(ptx, {"k"}, "$kb", 0).has_value());
}

// What make_bundle checks a bundle's link by: a linker keeps one definition of a weak function
// named in two modules, which the cubin then defines once, under no member's own name.
TEST_F(BundleTest, ALinkOfTwoModulesDefiningOneWeakFunctionDefinesItOnce) {
    auto module = [](int value, const char* kernel) {
        return std::string(".version 7.8\n.target sm_70\n.address_size 64\n") +
               ".weak .func (.param .b32 r) helper()\n{\n .reg .b32 %v;\n mov.b32 %v, " +
               std::to_string(value) + ";\n st.param.b32 [r], %v;\n ret;\n}\n.visible .entry " +
               kernel + "()\n{\n { .param .b32 got;\n call.uni (got), helper, ();\n }\n ret;\n}\n";
    };
    const std::string a = module(1, "ka"), b = module(2, "kb");
    const auto linked = compile::link_ptx_bundle({&a, &b}, compile::Target{90});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
    const auto symbols = util::elf_symbols(linked->cubin);
    ASSERT_TRUE(symbols.ok()) << symbols.error().describe();
    std::vector<std::string> defined;
    for (const util::ElfSymbol& symbol : *symbols) {
        if (symbol.defined_for_others()) defined.push_back(symbol.name);
    }
    std::sort(defined.begin(), defined.end());
    EXPECT_EQ(defined, (std::vector<std::string>{"helper", "ka", "kb"}));
}

// A bundle member's parameter sizes stay its own under their own names, in their own order,
// whatever the suffix does to the order ("a$1" sorts before "a" once both carry one).
TEST_F(BundleTest, ABundledKeyKnowsItsKernelsParameters) {
    std::vector<WarmUpItem> items = distinct(8);
    const std::string two_kernels =
        ".version 7.8\n.target sm_70\n.address_size 64\n"
        ".visible .entry a(.param .u64 x, .param .u64 y, .param .u32 n)\n{\n ret;\n}\n"
        ".visible .entry a$1(.param .u64 x)\n{\n ret;\n}\n";
    for (int i = 0; i < 2; ++i) {  // two such modules
        items[i].make_source = [two_kernels, i]() -> Result<Source> {
            return Source::ptx(two_kernels + "// module " + std::to_string(i) + "\n");
        };
        items[i].kernel_name = "a";
    }
    std::set<std::size_t> bundled;
    for (const auto& bundle : packing(items)) bundled.insert(bundle.begin(), bundle.end());
    ASSERT_TRUE(bundled.count(0) || bundled.count(1));
    warm_up_and_bundle(items);
    KernelCache cache(options());
    auto results = cache.warm_up(items, 1);
    expect_all_ok(results);
    for (const std::size_t i : {std::size_t{0}, std::size_t{1}}) {
        ASSERT_TRUE(results[i].ok());
        EXPECT_EQ(results[i]->param_count(), 3) << "item " << i;
        auto wrong = results[i]->launch(LaunchConfig{}, {args_.data(), 1});
        ASSERT_FALSE(wrong.ok()) << "item " << i;
        EXPECT_EQ(wrong.error().code(), Errc::kArgumentMismatch);
    }
}

TEST(RenamePtxSymbols, AnInstructionSpelledLikeASymbolStaysAsItIs) {
    // A variable named ld: the instruction ld.global.u32 is one word, not the name.
    const std::string ptx =
        ".global .u32 ld;\n.visible .entry k()\n{\n ld.global.u32 %r1, [ld];\n ret;\n}\n";
    const auto renamed = compile::rename_ptx_symbols(ptx, {"k", "ld"}, "$kc", 2);
    ASSERT_TRUE(renamed.has_value());
    EXPECT_EQ(*renamed,
              ".global .u32 ld$kc2;\n.visible .entry k$kc2()\n{\n ld.global.u32 %r1, [ld$kc2];\n"
              " ret;\n}\n");
}

}  // namespace
}  // namespace kcache
