// SPDX-License-Identifier: Apache-2.0
// The remote tier against a real redis-server that each test starts and breaks on purpose: PTX
// compiled on the host by the real nvJitLink, the fake driver loading the real cubins, every
// node a KernelCache with its own empty disk directory.
#include "store/remote/remote_tier.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "driver/compiler_api.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/remote/remote_config.hpp"
#include "store/remote/signature.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "testing/redis_server.hpp"

namespace kcache {
namespace {

using namespace std::chrono_literals;
using fakes::RedisServer;
using fakes::RedisServerOptions;

Source gelu() {
    return Source::ptx(examples::gelu_ptx());
}

// softmax_rows with `cols` columns, under its "softmax:<cols>" key.
Result<KernelHandle> softmax(KernelCache& cache, int cols) {
    return cache.kernel(
        test::softmax_key(cols), [cols] { return test::softmax_source(cols); }, test::kSoftmax);
}

class RemoteTierTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvjitlink_api().ok()) {
            GTEST_SKIP() << driver::nvjitlink_api().error().describe();
        }
        if (!RedisServer::available()) GTEST_SKIP() << RedisServer::unavailable_reason();
    }

    std::unique_ptr<RedisServer> start(RedisServerOptions options = {}) {
        auto server = RedisServer::start(std::move(options));
        EXPECT_TRUE(server.ok()) << server.error().describe();
        return server.ok() ? std::move(*server) : nullptr;
    }

    // A node: its own (empty) disk directory, the remote setting given.
    CacheOptions node(const std::string& remote, const std::string& name = "node") {
        CacheOptions o;
        o.driver = fake_;
        o.disk_directory = temp_.path() + "/" + name + "-" + std::to_string(++nodes_);
        o.remote = remote;
        return o;
    }

    // The keys the server holds under kcache's default prefix (values, not leases).
    static std::vector<std::string> value_keys(const RedisServer& server) {
        std::vector<std::string> keys;
        const fakes::RespValue reply = server.command({"KEYS", "kcache:*"});
        for (const auto& key : reply.elements) {
            if (key.text.find(":lease:") == std::string::npos) keys.push_back(key.text);
        }
        return keys;
    }

    std::shared_ptr<fakes::FakeDriver> fake_ = std::make_shared<fakes::FakeDriver>();
    test::TempDir temp_;
    int nodes_ = 0;
};

TEST_F(RemoteTierTest, AMissWritesOneKeyAndANodeWithAnEmptyDiskGetsItWithoutCompiling) {
    auto server = start();
    ASSERT_TRUE(server);
    {
        KernelCache first(node(server->url()));
        ASSERT_TRUE(first.kernel("gelu:16", gelu, "gelu").ok());
        first.wait_for_uploads();
        const CacheStats stats = first.stats();
        EXPECT_EQ(stats.compiles, 1u);
        EXPECT_EQ(stats.remote_misses, 1u);
        EXPECT_EQ(stats.remote_writes, 1u);
        EXPECT_TRUE(stats.remote_enabled);
    }
    ASSERT_EQ(value_keys(*server).size(), 1u);

    const CacheOptions second_options = node(server->url());
    {
        KernelCache second(second_options);
        auto kernel = second.kernel("gelu:16", gelu, "gelu");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        second.wait_for_uploads();  // and the remote hit's write to disk, off the lookup's path
        const CacheStats stats = second.stats();
        EXPECT_EQ(stats.compiles, 0u) << "the fleet compiled it once";
        EXPECT_EQ(stats.remote_hits, 1u);
        EXPECT_EQ(stats.disk_misses, 1u);
        EXPECT_EQ(stats.disk_writes, 1u) << "the remote hit was written to the node's disk";
    }
    EXPECT_EQ(test::entry_files(second_options.disk_directory).size(), 1u)
        << "the remote hit refilled the node's disk";
    // The node's next process finds it on its own disk, and asks the server nothing.
    server->kill();
    KernelCache third(second_options);
    ASSERT_TRUE(third.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(third.stats().disk_hits, 1u);
    EXPECT_EQ(third.stats().remote_errors + third.stats().remote_timeouts, 0u);
}

TEST_F(RemoteTierTest, WithReshareADiskHitIsUploadedWhereTheServerLacksItAndOnlyThere) {
    auto server = start();
    ASSERT_TRUE(server);
    // A node compiled two kernels before the fleet had a Redis: they are on its disk only.
    CacheOptions local = node("");
    {
        KernelCache before(local);
        ASSERT_TRUE(before.kernel("gelu:16", gelu, "gelu").ok());
        ASSERT_TRUE(softmax(before, 1024).ok());
    }
    // Without reshare, its disk hits stay its own.
    {
        CacheOptions plain = local;
        plain.remote = server->url();
        KernelCache cache(plain);
        ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
        cache.wait_for_uploads();
        EXPECT_EQ(cache.stats().disk_hits, 1u);
        EXPECT_EQ(cache.stats().remote_writes, 0u);
    }
    EXPECT_TRUE(value_keys(*server).empty());
    // With it, each is uploaded once, as a compile would have.
    CacheOptions sharing = local;
    sharing.remote = server->url() + "|reshare";
    {
        KernelCache cache(sharing);
        for (int i = 0; i < 3; ++i) {  // the same hit again is not sent again
            cache.clear();
            ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
        }
        cache.wait_for_uploads();
        const CacheStats stats = cache.stats();
        EXPECT_EQ(stats.compiles, 0u);
        EXPECT_EQ(stats.disk_hits, 3u);
        EXPECT_EQ(stats.remote_writes, 1u);
    }
    ASSERT_EQ(value_keys(*server).size(), 1u);
    // A value the server has already is asked about, not sent again.
    {
        KernelCache cache(sharing);
        ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
        ASSERT_TRUE(softmax(cache, 1024).ok());
        cache.wait_for_uploads();
        EXPECT_EQ(cache.stats().remote_writes, 1u) << "only the softmax the server lacked";
        EXPECT_EQ(cache.stats().remote_writes_exists, 0u) << "gelu was never sent";
    }
    EXPECT_EQ(value_keys(*server).size(), 2u);
    // And a node with an empty disk now gets both from the server.
    KernelCache fresh(node(server->url()));
    ASSERT_TRUE(fresh.kernel("gelu:16", gelu, "gelu").ok());
    ASSERT_TRUE(softmax(fresh, 1024).ok());
    EXPECT_EQ(fresh.stats().remote_hits, 2u);
    EXPECT_EQ(fresh.stats().compiles, 0u);
}

TEST_F(RemoteTierTest, AReadOnlyBackendIsNeverReshared) {
    auto server = start();
    ASSERT_TRUE(server);
    CacheOptions local = node("");
    {
        KernelCache before(local);
        ASSERT_TRUE(before.kernel("gelu:16", gelu, "gelu").ok());
    }
    local.remote = server->url() + "|reshare|read-only";
    KernelCache cache(local);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    EXPECT_EQ(cache.stats().remote_writes, 0u);
    EXPECT_TRUE(value_keys(*server).empty());
}

TEST_F(RemoteTierTest, TheStoredValueIsExactlyTheDiskEntry) {
    auto server = start();
    ASSERT_TRUE(server);
    const CacheOptions options = node(server->url());
    KernelCache cache(options);
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    const auto keys = value_keys(*server);
    ASSERT_EQ(keys.size(), 1u);
    const auto files = test::entry_files(options.disk_directory);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(server->get(keys[0]), test::read_file(files[0].string()));
    const std::string name = files[0].parent_path().filename().string() + files[0].stem().string();
    EXPECT_EQ(keys[0], "kcache:" + name) << "one value per fingerprint, named by it";
}

TEST_F(RemoteTierTest, APasswordFromAFileOrTheEnvironmentWorksAndIsNeverPrinted) {
    RedisServerOptions secured;
    secured.password = "s3cret-Pa55";
    auto server = start(secured);
    ASSERT_TRUE(server);
    const std::string file = temp_.path() + "/password";
    test::write_file(file, "s3cret-Pa55\n");
    const std::string log = temp_.path() + "/log";
    test::LogToFile logging(log);
    {
        KernelCache cache(node(server->url() + "|password-file=" + file));
        ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
        cache.wait_for_uploads();
        EXPECT_EQ(cache.stats().remote_writes, 1u);
    }
    {
        // A wrong password in the URL: the lookup still works (fail open), the error is counted
        // and said, and the password is not in what is said.
        const std::string url = "redis://:wrong-Pa55@127.0.0.1:" + std::to_string(server->port());
        KernelCache cache(node(url));
        ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
        EXPECT_EQ(cache.stats().compiles, 1u);
        EXPECT_GE(cache.stats().remote_errors, 1u);
    }
    const std::string text = logging.text();
    EXPECT_EQ(text.find("s3cret-Pa55"), std::string::npos) << text;
    EXPECT_EQ(text.find("wrong-Pa55"), std::string::npos) << text;
    EXPECT_NE(text.find("***"), std::string::npos) << "the server is named, redacted: " << text;
}

TEST_F(RemoteTierTest, AnAclUserWithItsPasswordReadsAndWrites) {
    RedisServerOptions acl;
    acl.config_lines = {"user builder on >b-pass ~kcache:* +@all"};
    auto server = start(acl);
    ASSERT_TRUE(server);
    const std::string url = "redis://builder:b-pass@127.0.0.1:" + std::to_string(server->port());
    {
        KernelCache writer(node(url));
        ASSERT_TRUE(writer.kernel("gelu:16", gelu, "gelu").ok());
        writer.wait_for_uploads();
        EXPECT_EQ(writer.stats().remote_writes, 1u);
    }
    KernelCache reader(node(url));
    ASSERT_TRUE(reader.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_EQ(reader.stats().remote_hits, 1u);
}

TEST_F(RemoteTierTest, AReaderUserRefusedWritesMakesTheBackendReadOnlyOnce) {
    RedisServerOptions acl;
    acl.config_lines = {"user reader on >r-pass ~kcache:* +get +ping +exists +strlen +scan"};
    auto server = start(acl);
    ASSERT_TRUE(server);
    const std::string url = "redis://reader:r-pass@127.0.0.1:" + std::to_string(server->port());
    KernelCache cache(node(url));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    ASSERT_TRUE(softmax(cache, 32).ok());
    cache.wait_for_uploads();
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles, 2u);
    EXPECT_EQ(stats.remote_writes, 0u);
    EXPECT_EQ(stats.remote_write_errors, 1u) << "NOPERM once: read-only for the process after";
    EXPECT_TRUE(value_keys(*server).empty());
}

TEST_F(RemoteTierTest, AReadOnlyBackendIsReadAndNeverWritten) {
    auto server = start();
    ASSERT_TRUE(server);
    {
        KernelCache writer(node(server->url()));
        ASSERT_TRUE(writer.kernel("gelu:16", gelu, "gelu").ok());
        writer.wait_for_uploads();
    }
    KernelCache cache(node(server->url() + "|read-only"));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    ASSERT_TRUE(softmax(cache, 32).ok());
    cache.wait_for_uploads();
    EXPECT_EQ(cache.stats().remote_hits, 1u);
    EXPECT_EQ(cache.stats().remote_writes + cache.stats().remote_write_errors, 0u);
    EXPECT_EQ(value_keys(*server).size(), 1u);
}

TEST_F(RemoteTierTest, AnUnreachableServerCostsOneConnectAttemptPerBackOffNotPerLookup) {
    // A port nothing listens on: refused at once.
    auto server = start();
    ASSERT_TRUE(server);
    const std::string url = server->url();
    server->kill();
    KernelCache cache(node(url));
    for (int cols = 1; cols <= 8; ++cols) {
        ASSERT_TRUE(softmax(cache, cols).ok());
    }
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles, 8u);
    EXPECT_EQ(stats.remote_breaker_openings, 1u);
    EXPECT_GE(stats.remote_skipped, 7u) << "the breaker set the server aside";
    EXPECT_LE(stats.remote_errors, 2u);
}

TEST_F(RemoteTierTest, AStoppedServerCostsOneTimeoutThenTheNodeRecoversWhenItResumes) {
    auto server = start();
    ASSERT_TRUE(server);
    KernelCache cache(node(server->url() + "|timeout=200ms|connect-timeout=200ms"));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());  // a connection in the pool
    cache.wait_for_uploads();
    server->stop();
    const auto start_time = std::chrono::steady_clock::now();
    for (int cols = 1; cols <= 4; ++cols) {
        ASSERT_TRUE(softmax(cache, cols).ok());
    }
    const double elapsed = test::elapsed_ms(start_time);
    CacheStats stats = cache.stats();
    EXPECT_EQ(stats.remote_breaker_openings, 1u);
    EXPECT_EQ(stats.remote_timeouts, 1u) << "one timeout, then the server is skipped";
    // Four compiles and one timeout; never four timeouts (generous for a busy machine).
    EXPECT_LT(elapsed, 4 * 200.0 + 5000.0);
    cache.wait_for_uploads();
    server->resume();
    std::this_thread::sleep_for(1200ms);  // past the first back-off
    ASSERT_TRUE(softmax(cache, 64).ok());
    cache.wait_for_uploads();
    stats = cache.stats();
    EXPECT_GE(stats.remote_writes, 2u) << "writing again after the probe succeeded";
}

TEST_F(RemoteTierTest, AServerKilledAndRestartedIsFoundAgain) {
    auto server = start();
    ASSERT_TRUE(server);
    KernelCache cache(node(server->url()));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    server->kill();
    ASSERT_TRUE(softmax(cache, 1).ok());
    cache.wait_for_uploads();
    ASSERT_TRUE(server->restart().ok());
    std::this_thread::sleep_for(1200ms);
    ASSERT_TRUE(softmax(cache, 2).ok());
    cache.wait_for_uploads();
    EXPECT_EQ(value_keys(*server).size(), 1u) << "the new kernel reached the restarted server";
}

TEST_F(RemoteTierTest, ATricklingServerCannotStretchTheTimeout) {
    // A valid bulk reply, one byte every 100 ms: about 3 s in all.
    fakes::TricklingServer trickling("$20\r\n01234567890123456789\r\n", 100ms);
    KernelCache cache(node(trickling.url() + "|timeout=250ms|connect-timeout=250ms"));
    const auto start_time = std::chrono::steady_clock::now();
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    const double elapsed = test::elapsed_ms(start_time);
    EXPECT_EQ(cache.stats().remote_timeouts, 1u);
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_LT(elapsed, 2500.0) << "one lookup paid the 250 ms timeout (plus a compile), no more";
}

TEST_F(RemoteTierTest, ABlackholedAddressCostsTheConnectTimeout) {
    fakes::BlackholeListener blackhole;
    if (!blackhole.ready()) GTEST_SKIP() << "the listen queue could not be filled here";
    KernelCache cache(node(blackhole.url() + "|connect-timeout=200ms"));
    const auto start_time = std::chrono::steady_clock::now();
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    EXPECT_LT(test::elapsed_ms(start_time), 2500.0);
    EXPECT_EQ(cache.stats().remote_timeouts, 1u);
}

// Values planted in the server: each a miss, counted, never loaded; removed, and the good value
// the node then compiled takes its place.
TEST_F(RemoteTierTest, CorruptValuesAreMissesNeverLoadedAndAreReplaced) {
    auto server = start();
    ASSERT_TRUE(server);
    std::string key, good;
    {
        KernelCache writer(node(server->url()));
        ASSERT_TRUE(writer.kernel("gelu:16", gelu, "gelu").ok());
        writer.wait_for_uploads();
        key = value_keys(*server).at(0);
        good = server->get(key).value();
    }
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x20;
    std::string bad_magic = good;
    bad_magic[0] ^= 0xff;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"empty", ""},
        {"truncated", good.substr(0, good.size() / 2)},
        {"flipped byte", flipped},
        {"bad magic", bad_magic}};
    for (const auto& [what, value] : cases) {
        ASSERT_TRUE(server->set(key, value)) << what;
        const int loads_before = fake_->loads();
        KernelCache cache(node(server->url()));
        auto kernel = cache.kernel("gelu:16", gelu, "gelu");
        ASSERT_TRUE(kernel.ok()) << what << ": " << kernel.error().describe();
        cache.wait_for_uploads();
        const CacheStats stats = cache.stats();
        EXPECT_EQ(stats.remote_corrupt, 1u) << what;
        EXPECT_EQ(stats.remote_hits, 0u) << what;
        EXPECT_EQ(stats.compiles, 1u) << what;
        EXPECT_EQ(fake_->loads(), loads_before + 1) << what << ": only the compiled cubin loaded";
        EXPECT_EQ(server->get(key), good) << what << ": the bad value was replaced by a good one";
    }
}

TEST_F(RemoteTierTest, ShardsSpreadKeysAndADownShardLosesOnlyItsKeys) {
    std::vector<std::unique_ptr<RedisServer>> servers;
    RedisServerOptions with_socket;
    with_socket.unix_socket = true;
    // Three servers as shards: the URL's `*` is replaced by each shard's name, here a link to
    // the server's socket.
    const std::vector<std::string> names = {"a", "b", "c"};
    for (const auto& name : names) {
        servers.push_back(start(with_socket));
        ASSERT_TRUE(servers.back());
        std::filesystem::create_symlink(servers.back()->unix_socket(),
                                        temp_.path() + "/shard-" + name + ".sock");
    }
    const std::string url = "redis+unix:" + temp_.path() + "/shard-*.sock|shards=a,b,c";
    constexpr int kKernels = 24;
    {
        KernelCache writer(node(url));
        for (int cols = 1; cols <= kKernels; ++cols) {
            ASSERT_TRUE(softmax(writer, cols).ok());
        }
        writer.wait_for_uploads();
        EXPECT_EQ(writer.stats().remote_writes, static_cast<std::uint64_t>(kKernels));
    }
    std::size_t total = 0;
    for (const auto& server : servers) {
        const std::size_t held = value_keys(*server).size();
        EXPECT_GT(held, 0u) << "every shard holds some keys";
        total += held;
    }
    EXPECT_EQ(total, static_cast<std::size_t>(kKernels)) << "each key on one shard";
    const std::size_t lost = value_keys(*servers[1]).size();
    servers[1]->kill();
    KernelCache reader(node(url));
    for (int cols = 1; cols <= kKernels; ++cols) {
        ASSERT_TRUE(softmax(reader, cols).ok());
    }
    EXPECT_EQ(reader.stats().remote_hits, kKernels - lost);
    EXPECT_EQ(reader.stats().compiles, lost);
}

TEST_F(RemoteTierTest, AFullServerUnderNoevictionIsACountedFailedWrite) {
    RedisServerOptions full;
    full.config_lines = {"maxmemory 1mb", "maxmemory-policy noeviction"};
    auto server = start(full);
    ASSERT_TRUE(server);
    // Filled until it refuses (OOM refuses every write from then on).
    int filled = 0;
    while (filled < 4096 &&
           server->set("filler" + std::to_string(filled), std::string(1 << 10, 'x'))) {
        ++filled;
    }
    ASSERT_LT(filled, 4096) << "the server never filled up";
    KernelCache cache(node(server->url()));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    // The lease and the value: both writes refused, counted; the lookup served all the same.
    EXPECT_EQ(cache.stats().remote_write_errors, 2u);
    EXPECT_EQ(cache.stats().remote_writes, 0u);
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(RemoteTierTest, AnLruServerTakesWritesByEvicting) {
    RedisServerOptions lru;
    lru.config_lines = {"maxmemory 4mb", "maxmemory-policy allkeys-lru"};
    auto server = start(lru);
    ASSERT_TRUE(server);
    for (int i = 0; i < 8; ++i)
        server->set("filler" + std::to_string(i), std::string(512 << 10, 'x'));
    KernelCache cache(node(server->url()));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    EXPECT_EQ(cache.stats().remote_writes, 1u);
    EXPECT_EQ(cache.stats().remote_write_errors, 0u);
}

TEST_F(RemoteTierTest, AnEntryOverTheSizeCapIsNeitherSentNorRead) {
    auto server = start();
    ASSERT_TRUE(server);
    KernelCache cache(node(server->url() + "|max-size=1k"));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    EXPECT_EQ(cache.stats().remote_too_large, 1u);
    EXPECT_TRUE(value_keys(*server).empty());
}

// A value planted over the cap (another node's larger max-size, anyone who may write) is a miss
// for its key alone: the server stays in use for every other key.
TEST_F(RemoteTierTest, AValueOverTheCapIsAMissThatDoesNotSetTheServerAside) {
    auto server = start();
    ASSERT_TRUE(server);
    std::string key;
    {
        KernelCache writer(node(server->url()));
        ASSERT_TRUE(writer.kernel("gelu:16", gelu, "gelu").ok());
        ASSERT_TRUE(softmax(writer, 8).ok());
        writer.wait_for_uploads();
    }
    for (const auto& k : value_keys(*server)) {
        if (server->get(k)->find("gelu") != std::string::npos) key = k;
    }
    ASSERT_FALSE(key.empty());
    ASSERT_TRUE(server->set(key, std::string(2 << 20, 'x')));
    KernelCache cache(node(server->url() + "|max-size=1M"));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    ASSERT_TRUE(softmax(cache, 8).ok());
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.remote_too_large, 1u);
    EXPECT_EQ(stats.remote_breaker_openings, 0u);
    EXPECT_EQ(stats.remote_hits, 1u) << "the other key is still read";
}

// A holder that ends without a value (its compile failed) leaves a marker: the nodes waiting on
// its lease compile at once instead of taking it over one after another.
TEST_F(RemoteTierTest, ALeaseReleasedWithoutAValueSendsItsWaitersToCompileAtOnce) {
    auto server = start();
    ASSERT_TRUE(server);
    auto backends = store::remote::parse_remote_setting(server->url());
    ASSERT_TRUE(backends.ok());
    store::remote::RemoteOptions options;
    options.backends = std::move(*backends);
    auto holder = store::remote::RemoteTier::open(options);
    ASSERT_TRUE(holder.ok());
    const util::Fingerprint fingerprint{7, 7};
    store::remote::Lease lease;
    ASSERT_EQ((*holder)->take_lease(fingerprint, lease),
              store::remote::RemoteTier::LeaseState::kWon);
    auto other = store::remote::RemoteTier::open(options);
    ASSERT_TRUE(other.ok());
    store::remote::Lease none;
    EXPECT_EQ((*other)->take_lease(fingerprint, none),
              store::remote::RemoteTier::LeaseState::kHeld);
    EXPECT_EQ((*other)->look_at_lease(fingerprint), store::remote::RemoteTier::LeaseSeen::kHeld);
    lease.release(/*value_there=*/false);
    EXPECT_EQ((*other)->look_at_lease(fingerprint), store::remote::RemoteTier::LeaseSeen::kNoValue);
    store::remote::Lease second;
    ASSERT_EQ((*holder)->take_lease(util::Fingerprint{8, 8}, second),
              store::remote::RemoteTier::LeaseState::kWon);
    second.release(/*value_there=*/true);
    EXPECT_EQ((*other)->look_at_lease(util::Fingerprint{8, 8}),
              store::remote::RemoteTier::LeaseSeen::kNone)
        << "released with its value: nothing stands, and waiters find the value";
}

TEST_F(RemoteTierTest, ABackendThatRequiresSignaturesIsNeverWrittenByANodeThatCannotSign) {
    auto server = start();
    ASSERT_TRUE(server);
    const std::string pub = temp_.path() + "/k.pub";
    ASSERT_TRUE(store::remote::generate_ed25519_key(temp_.path() + "/k.key", pub).ok());
    KernelCache cache(node(server->url() + "|require-signature|verify-key=" + pub));
    ASSERT_TRUE(cache.kernel("gelu:16", gelu, "gelu").ok());
    cache.wait_for_uploads();
    EXPECT_EQ(cache.stats().remote_writes, 0u);
    EXPECT_TRUE(value_keys(*server).empty()) << "no unsigned value for the fleet to refuse forever";
}

TEST_F(RemoteTierTest, TheEndOfAProcessNeverWaitsLongForAStoppedServer) {
    auto server = start();
    ASSERT_TRUE(server);
    CacheOptions options = node(server->url() + "|timeout=300ms|connect-timeout=300ms");
    std::optional<KernelCache> cache(std::in_place, options);
    ASSERT_TRUE(cache->kernel("gelu:16", gelu, "gelu").ok());
    cache->wait_for_uploads();
    server->stop();
    for (int cols = 1; cols <= 6; ++cols) {
        ASSERT_TRUE(cache
                        ->kernel(
                            test::softmax_key(cols), [cols] { return test::softmax_source(cols); },
                            test::kSoftmax)
                        .ok());
    }
    const auto start_time = std::chrono::steady_clock::now();
    cache.reset();  // the end: a grace period for the queue, then what is left is dropped
    EXPECT_LT(test::elapsed_ms(start_time), 2000.0 + 300.0 + 3000.0);
    server->resume();
}

TEST_F(RemoteTierTest, UploadsStillQueuedAtTheEndAreDroppedAndCountedNotWaitedFor) {
    auto server = start();
    ASSERT_TRUE(server);
    auto backends = store::remote::parse_remote_setting(server->url() + "|timeout=300ms");
    ASSERT_TRUE(backends.ok());
    store::remote::RemoteOptions options;
    options.backends = std::move(*backends);
    auto tier = store::remote::RemoteTier::open(std::move(options));
    ASSERT_TRUE(tier.ok()) << tier.error().describe();
    server->stop();  // the first upload waits out its timeout; the rest stay queued
    for (std::uint64_t n = 1; n <= 10; ++n) {
        (*tier)->put(util::Fingerprint{n, n}, std::string(1000, 'x'));
    }
    const auto start_time = std::chrono::steady_clock::now();
    (*tier)->finish_uploads(0ms);
    EXPECT_LT(test::elapsed_ms(start_time), 300.0 + 3000.0) << "one request's timeout at most";
    const store::remote::RemoteStats stats = (*tier)->stats();
    EXPECT_GE(stats.writes_dropped, 8u);
    EXPECT_EQ(stats.writes, 0u);
    (*tier)->put(util::Fingerprint{11, 11}, "late");
    EXPECT_EQ((*tier)->stats().writes_dropped, stats.writes_dropped + 1) << "none taken after";
    server->resume();
}

// ---- signatures ----

class SignedRemoteTest : public RemoteTierTest {
protected:
    void SetUp() override {
        RemoteTierTest::SetUp();
        if (IsSkipped()) return;
        for (const std::string name : {"old", "new"}) {
            ASSERT_TRUE(store::remote::generate_ed25519_key(key(name), pub(name)).ok());
        }
        server_ = start();
        ASSERT_TRUE(server_);
    }
    std::string key(const std::string& name) const { return temp_.path() + "/" + name + ".key"; }
    std::string pub(const std::string& name) const { return temp_.path() + "/" + name + ".pub"; }
    // A build machine signing with `name`'s key.
    void publish(const std::string& name, const std::string& kernel_key, int cols) {
        KernelCache writer(node(server_->url() + "|sign-key=" + key(name)));
        ASSERT_TRUE(
            writer
                .kernel(
                    kernel_key, [cols] { return test::softmax_source(cols); }, test::kSoftmax)
                .ok());
        writer.wait_for_uploads();
    }
    // A fleet node that requires signatures by the given keys.
    CacheOptions verifying(const std::vector<std::string>& names) {
        std::string url = server_->url() + "|require-signature";
        for (const auto& name : names) url += "|verify-key=" + pub(name);
        return node(url);
    }
    std::string value_key_of(int cols) {
        // The single value written for softmax:<cols> by a fresh writer of its own.
        const auto before = value_keys(*server_);
        publish("new", "probe", cols);
        for (const auto& k : value_keys(*server_)) {
            if (std::find(before.begin(), before.end(), k) == before.end()) return k;
        }
        return {};
    }
    std::unique_ptr<RedisServer> server_;
};

TEST_F(SignedRemoteTest, ASignedValueIsTakenByANodeThatRequiresSignatures) {
    publish("new", "softmax:8", 8);
    KernelCache fleet(verifying({"new"}));
    ASSERT_TRUE(softmax(fleet, 8).ok());
    EXPECT_EQ(fleet.stats().remote_hits, 1u);
    EXPECT_EQ(fleet.stats().remote_signature_rejects, 0u);
}

TEST_F(SignedRemoteTest, AnUnsignedValueIsAMissWhereSignaturesAreRequired) {
    {
        KernelCache unsigned_writer(node(server_->url()));
        ASSERT_TRUE(softmax(unsigned_writer, 8).ok());
        unsigned_writer.wait_for_uploads();
    }
    KernelCache fleet(verifying({"new"}));
    ASSERT_TRUE(softmax(fleet, 8).ok());
    EXPECT_EQ(fleet.stats().remote_hits, 0u);
    EXPECT_EQ(fleet.stats().remote_signature_rejects, 1u);
    EXPECT_EQ(fleet.stats().compiles, 1u);
}

TEST_F(SignedRemoteTest, AValueSignedByAnotherKeyIsRejectedThoughItsChecksumIsGood) {
    // "forged": a well-formed entry, signed, but not by a key the fleet trusts.
    ASSERT_TRUE(store::remote::generate_ed25519_key(key("mallory"), pub("mallory")).ok());
    publish("mallory", "softmax:8", 8);
    KernelCache fleet(verifying({"new"}));
    ASSERT_TRUE(softmax(fleet, 8).ok());
    EXPECT_EQ(fleet.stats().remote_hits, 0u);
    EXPECT_EQ(fleet.stats().remote_signature_rejects, 1u);
}

TEST_F(SignedRemoteTest, AValueReplayedUnderAnotherFingerprintIsRejected) {
    // softmax:8's signed value copied to where softmax:16's belongs.
    const std::string eight = value_key_of(8);
    const std::string sixteen = value_key_of(16);
    ASSERT_FALSE(eight.empty());
    ASSERT_FALSE(sixteen.empty());
    ASSERT_TRUE(server_->set(sixteen, server_->get(eight).value()));
    KernelCache fleet(verifying({"new"}));
    ASSERT_TRUE(softmax(fleet, 16).ok());
    EXPECT_EQ(fleet.stats().remote_hits, 0u);
    EXPECT_EQ(fleet.stats().remote_signature_rejects, 1u);
    EXPECT_EQ(fleet.stats().compiles, 1u);
}

TEST_F(SignedRemoteTest, ARotationAcceptsBothKeysWhileBothAreListed) {
    publish("old", "softmax:8", 8);
    publish("new", "softmax:16", 16);
    {
        KernelCache fleet(verifying({"old", "new"}));
        for (int cols : {8, 16}) {
            ASSERT_TRUE(softmax(fleet, cols).ok());
        }
        EXPECT_EQ(fleet.stats().remote_hits, 2u);
    }
    KernelCache retired(verifying({"new"}));
    for (int cols : {8, 16}) {
        ASSERT_TRUE(softmax(retired, cols).ok());
    }
    EXPECT_EQ(retired.stats().remote_hits, 1u) << "the old key's value is refused once retired";
    EXPECT_EQ(retired.stats().remote_signature_rejects, 1u);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// A child forked from a node that used the remote tier (a data-loader worker, a launcher) shares
// the node's sockets and has none of its threads: it compiles on its own without the remote tier,
// ends without waiting for the parent's threads, and the parent's conversation with the server is
// undisturbed.
TEST_F(RemoteTierTest, AForkedChildLeavesTheRemoteTierAloneAndEndsAtOnce) {
    if (test::kThreadSanitizer)
        GTEST_SKIP() << "ThreadSanitizer cannot follow a fork of a process with threads";
    auto server = start();
    ASSERT_TRUE(server);
    auto parent = std::make_unique<KernelCache>(node(server->url()));
    ASSERT_TRUE(parent->kernel("gelu:16", gelu, "gelu").ok());
    parent->wait_for_uploads();
    const std::uint64_t sent_before = parent->stats().remote_writes;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const bool compiled = softmax(*parent, 3).ok();
        parent->wait_for_uploads();
        const bool kept_away = parent->stats().remote_writes == sent_before;
        parent.reset();  // its end: the uploads' and the renewer's threads are the parent's
        std::exit(compiled && kept_away ? 0 : 1);
    }
    const std::optional<int> status = test::wait_for_child(child);
    ASSERT_TRUE(status.has_value()) << "the child hung at its end";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    // The parent's pooled connection still speaks in step with the server.
    ASSERT_TRUE(softmax(*parent, 5).ok());
    parent->wait_for_uploads();
    EXPECT_EQ(parent->stats().remote_writes, sent_before + 1);
    EXPECT_EQ(parent->stats().remote_errors, 0u);
    EXPECT_EQ(value_keys(*server).size(), 2u);
}

}  // namespace
}  // namespace kcache
