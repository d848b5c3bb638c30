// SPDX-License-Identifier: Apache-2.0
// A warm-up's record (build/warm_up_record.hpp): the bundles the last warm-up of the same keys
// planned, which the next one loads while it still makes and fingerprints its sources. Over the
// fake driver, bundles linked by the real nvJitLink.
#include "build/warm_up_record.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "build/fingerprints.hpp"
#include "build/plan.hpp"
#include "host_compile_test.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_store.hpp"
#include "store/disk_store.hpp"
#include "testing/fake_driver.hpp"
#include "testing/redis_server.hpp"

namespace kcache {
namespace {

using namespace std::chrono_literals;

TEST(BundleListTest, ReadsWhatItWrote) {
    const std::vector<util::Fingerprint> bundles = {{1, 2}, {0xfedcba9876543210, 0}, {1, 2}};
    const std::string text = build::format_bundle_list(bundles);
    EXPECT_EQ(text.size(), 3 * 33u);
    EXPECT_EQ(build::parse_bundle_list(text), bundles);
    EXPECT_EQ(build::parse_bundle_list(""), std::vector<util::Fingerprint>{});
}

TEST(BundleListTest, RefusesAnythingElse) {
    const std::string line = util::Fingerprint{3, 4}.hex() + "\n";
    for (const std::string& bad : {
             line.substr(0, 32),          // no newline
             line + line.substr(1),       // a line short
             "X" + line.substr(1),        // not hex
             line.substr(0, 31) + "A\n",  // upper case
             line.substr(0, 32) + "\r",   // another end of line
             line + "\n",                 // an empty line
             std::string(33, '\n'),       // only newlines
         }) {
        EXPECT_FALSE(build::parse_bundle_list(bad).has_value()) << bad;
    }
    std::string too_many;
    for (std::size_t i = 0; i <= build::kMaxRecordedBundles; ++i) too_many += line;
    EXPECT_FALSE(build::parse_bundle_list(too_many).has_value());
    EXPECT_TRUE(build::parse_bundle_list(too_many.substr(line.size())).has_value());
}

TEST(BundleListTest, ARecordIsNamedByItsKeysInOrderAndItsArch) {
    const std::vector<std::string_view> keys = {"a", "b"};
    const auto plan = build::plan_warm_up_record(keys, 90);
    EXPECT_EQ(plan.fingerprint, build::plan_warm_up_record({"a", "b"}, 90).fingerprint);
    EXPECT_NE(plan.fingerprint, build::plan_warm_up_record({"b", "a"}, 90).fingerprint);
    EXPECT_NE(plan.fingerprint, build::plan_warm_up_record({"a", "b"}, 80).fingerprint);
    EXPECT_NE(plan.fingerprint, build::plan_warm_up_record({"ab"}, 90).fingerprint);
    EXPECT_NE(plan.fingerprint, build::plan_warm_up_record({"a", "b", ""}, 90).fingerprint);
    // The entry format is part of it, as of every entry's.
    EXPECT_NE(plan.key.toolchain.find(std::to_string(store::kFormatVersion)), std::string::npos);
}

class WarmUpRecordTest : public test::HostCompileTest {
protected:
    CacheOptions options() const {
        CacheOptions o = HostCompileTest::options();
        o.bundle_warm_ups = true;
        return o;
    }

    // `count` kernels of names of their own ("softmax_rows_<cols>"), each of `cols` + `shift`
    // columns: another shift is other code under the same keys and names.
    static std::vector<WarmUpItem> items(int count, int shift = 0) {
        std::vector<WarmUpItem> made;
        for (int cols = 1; cols <= count; ++cols) {
            const std::string name = "softmax_rows_" + std::to_string(cols);
            made.push_back({"softmax:" + std::to_string(cols),
                            [cols, shift, name]() -> Result<Source> {
                                return Source::ptx(examples::softmax_rows_ptx(cols + shift, name));
                            },
                            name});
        }
        return made;
    }

    static void expect_all_ok(const std::vector<Result<KernelHandle>>& results) {
        for (const auto& result : results) EXPECT_TRUE(result.ok()) << result.error().describe();
    }

    // A warm-up in a cache of its own, its bundles linked and stored, and its record kept, before
    // it ends.
    void warm_up_and_bundle(const std::vector<WarmUpItem>& warm) {
        KernelCache cache(options());
        expect_all_ok(cache.warm_up(warm, 2));
        cache.wait_for_uploads();
    }

    int arch() const {
        const auto arch = fake_->current_arch();
        EXPECT_TRUE(arch.ok());
        return arch.ok() ? *arch : 0;
    }

    // The tiers in dir_, as a cache's.
    std::unique_ptr<store::ArtifactStore> tiers() const {
        store::DiskOptions disk_options;
        disk_options.directory = dir_;
        auto disk = store::DiskStore::open(disk_options);
        EXPECT_TRUE(disk.ok()) << disk.error().describe();
        if (!disk) return nullptr;
        return std::make_unique<store::ArtifactStore>(0, std::move(*disk));
    }
    static build::WarmUpRecordPlan record_of(const std::vector<WarmUpItem>& warm, int arch) {
        std::vector<std::string_view> keys;
        keys.reserve(warm.size());
        for (const WarmUpItem& item : warm) keys.push_back(item.key);
        return build::plan_warm_up_record(keys, arch);
    }
    // The bundles the record of a warm-up of `warm` names (none without one).
    std::vector<util::Fingerprint> recorded(const std::vector<WarmUpItem>& warm) const {
        auto store = tiers();
        if (store == nullptr) return {};
        return build::find_warm_up_record(*store, record_of(warm, arch()))
            .value_or(std::vector<util::Fingerprint>{});
    }
    // Puts a record naming `bundles` for a warm-up of `warm`, as a warm-up would.
    void put_record(const std::vector<WarmUpItem>& warm,
                    const std::vector<util::Fingerprint>& bundles) const {
        auto store = tiers();
        ASSERT_NE(store, nullptr);
        build::put_warm_up_record(*store, record_of(warm, arch()), bundles);
        store->drain_writes();
    }
};

TEST_F(WarmUpRecordTest, AWarmUpLoadsTheBundlesItsRecordNamesWhileItsSourcesAreMade) {
    const auto warm = items(24);
    warm_up_and_bundle(warm);
    // The last item's generator waits for a load. Loaded ahead of the plan, the bundles load
    // while it waits; after the plan, none would before it returned.
    const int loads = fake_->loads();
    std::atomic<bool> saw_a_load{false};
    auto slow = warm;
    slow.back().make_source = [this, loads, &saw_a_load,
                               make = warm.back().make_source]() -> Result<Source> {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (fake_->loads() == loads && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
        }
        saw_a_load = fake_->loads() > loads;
        return make();
    };
    KernelCache cache(options());
    const auto results = cache.warm_up(slow, 2);
    expect_all_ok(results);
    EXPECT_TRUE(saw_a_load);
    EXPECT_EQ(cache.stats().compiles, 0u);
    // Every bundle loaded once: fewer modules than keys, none loaded twice.
    EXPECT_LT(fake_->loads() - loads, 24);
    EXPECT_EQ(fake_->live_libraries(), fake_->loads() - loads);
}

// The cluster's case: a node with an empty disk reads the record another node uploaded, loads
// the bundles ahead of its plan, and keeps the record on its own disk.
TEST_F(WarmUpRecordTest, ANodeWithAnEmptyDiskLoadsAheadWhatAnotherNodeRecorded) {
    if (!fakes::RedisServer::available()) GTEST_SKIP() << fakes::RedisServer::unavailable_reason();
    auto server = fakes::RedisServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    const auto warm = items(16);
    {
        CacheOptions first = options();
        first.remote = (*server)->url();
        KernelCache cache(first);
        expect_all_ok(cache.warm_up(warm, 2));
        cache.wait_for_uploads();
    }
    auto fake = std::make_shared<fakes::FakeDriver>();
    CacheOptions node = options();
    node.driver = fake;
    node.disk_directory = temp_.path() + "/node";
    node.remote = (*server)->url();
    std::atomic<bool> saw_a_load{false};
    auto slow = warm;
    slow.back().make_source = [&fake, &saw_a_load,
                               make = warm.back().make_source]() -> Result<Source> {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (fake->loads() == 0 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
        }
        saw_a_load = fake->loads() > 0;
        return make();
    };
    {
        KernelCache cache(node);
        expect_all_ok(cache.warm_up(slow, 2));
        EXPECT_TRUE(saw_a_load);
        EXPECT_EQ(cache.stats().compiles, 0u);
    }
    // The record, now on the node's disk: found there with the server gone.
    (*server)->kill();
    store::DiskOptions disk_options;
    disk_options.directory = node.disk_directory;
    auto disk = store::DiskStore::open(disk_options);
    ASSERT_TRUE(disk.ok()) << disk.error().describe();
    store::ArtifactStore tiers(0, std::move(*disk));
    EXPECT_FALSE(build::find_warm_up_record(tiers, record_of(warm, arch()))
                     .value_or(std::vector<util::Fingerprint>{})
                     .empty());
}

TEST_F(WarmUpRecordTest, ARecordOfOtherCodeCostsLoadsNeverAWrongKernel) {
    warm_up_and_bundle(items(24));
    // The same keys and names, every source changed: the bundles the record names hold the old
    // code. Loaded ahead, they are used for nothing and unloaded.
    const auto changed = items(24, 100);
    const int loads = fake_->loads();
    {
        KernelCache cache(options());
        const auto results = cache.warm_up(changed, 2);
        expect_all_ok(results);
        EXPECT_EQ(cache.stats().compiles, 24u);
        for (std::size_t i = 0; i < changed.size(); ++i) {
            const auto source = changed[i].make_source();
            ASSERT_TRUE(source.ok());
            EXPECT_EQ(results[i]->module().source_digest(),
                      build::source_digest(*source, arch()).hex())
                << changed[i].key;
        }
        EXPECT_GT(fake_->loads() - loads, 24);   // the old bundles, then a module a key
        EXPECT_EQ(fake_->live_libraries(), 24);  // the old bundles unloaded
    }
    EXPECT_EQ(fake_->live_libraries(), 0);
    EXPECT_EQ(fake_->use_after_unload(), 0);
}

TEST_F(WarmUpRecordTest, ARecordNamingWhatIsNoBundleLoadsNothingAhead) {
    const auto warm = items(8);
    {
        // Each key's own entry, and no bundle.
        CacheOptions off = options();
        off.bundle_warm_ups = false;
        KernelCache cache(off);
        expect_all_ok(cache.warm_up(warm, 2));
    }
    // A record naming the keys' own entries (cubins, not bundles) and fingerprints of nothing.
    std::vector<util::Fingerprint> named;
    for (const WarmUpItem& item : warm) {
        const auto source = item.make_source();
        ASSERT_TRUE(source.ok());
        const auto plan = build::plan_build(arch(), *source, true);
        ASSERT_TRUE(plan.ok() && plan->has_value());
        named.push_back((*plan)->fingerprint);
    }
    named.resize(3);
    named.push_back({5, 6});
    put_record(warm, named);
    const int loads = fake_->loads();
    KernelCache cache(options());
    expect_all_ok(cache.warm_up(warm, 2));
    EXPECT_EQ(fake_->loads() - loads, 8);  // a module a key: none of the record's loaded
    EXPECT_EQ(cache.stats().compiles, 0u);
}

TEST_F(WarmUpRecordTest, ARecordNamingMoreBundlesThanItsKeysFillIsNotUsed) {
    // Bundles of other code under the same keys, and a record naming them, then more than 8 keys
    // could fill: used, it would load them ahead of the plan.
    warm_up_and_bundle(items(8, 100));
    const auto warm = items(8);
    std::vector<util::Fingerprint> named = recorded(warm);
    ASSERT_FALSE(named.empty());
    for (std::uint64_t i = 0; named.size() <= warm.size() / 2; ++i) named.push_back({i, 7});
    put_record(warm, named);
    const int loads = fake_->loads();
    KernelCache cache(options());
    expect_all_ok(cache.warm_up(warm, 2));
    EXPECT_EQ(cache.stats().compiles, 8u);
    EXPECT_EQ(fake_->loads() - loads, 8);  // a module a key, nothing loaded ahead
}

}  // namespace
}  // namespace kcache
