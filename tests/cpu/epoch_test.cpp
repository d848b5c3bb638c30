// SPDX-License-Identifier: Apache-2.0
// util::EpochDomain: a retired object is freed only once no reader pinned before its retirement
// can still be looking at it.
#include "util/epoch.hpp"

#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_support.hpp"

namespace kcache::util {
namespace {

// A second thread that pins the global domain (optionally `depth` times, nested), reports that it
// is pinned, and holds the pin until told to let go. Unpinning is observable as the end of
// release(), which joins the thread.
class PinnedReader {
public:
    explicit PinnedReader(int depth = 1, int unpin_before_report = 0)
        : thread_([this, depth, unpin_before_report] {
              auto& domain = EpochDomain::global();
              std::optional<EpochDomain::Guard> guards[4];
              for (int i = 0; i < depth; ++i) guards[i].emplace(domain);
              // Drop the innermost pins first, as nested scopes would.
              for (int i = depth - 1; i >= depth - unpin_before_report; --i) guards[i].reset();
              pinned_.count_down();
              go_.wait();
              for (int i = depth - 1; i >= 0; --i) guards[i].reset();
          }) {
        pinned_.wait();
    }
    ~PinnedReader() { release(); }

    void release() {
        if (thread_.joinable()) {
            go_.count_down();
            thread_.join();
        }
    }

private:
    std::latch pinned_{1};
    std::latch go_{1};
    std::thread thread_;
};

TEST(EpochDomain, DeleterWaitsForReaderPinnedBeforeRetire) {
    auto& domain = EpochDomain::global();
    std::atomic<bool> freed{false};
    PinnedReader reader;

    domain.retire([&] { freed = true; });
    for (int i = 0; i < 16; ++i) domain.collect();

    EXPECT_FALSE(freed.load()) << "deleter ran while a reader pinned before retire() was pinned";
    reader.release();
    domain.synchronize();
}

TEST(EpochDomain, DeleterRunsOnCollectAfterReaderUnpins) {
    auto& domain = EpochDomain::global();
    std::atomic<bool> freed{false};
    PinnedReader reader;
    domain.retire([&] { freed = true; });
    domain.collect();
    ASSERT_FALSE(freed.load());

    reader.release();
    // No thread is pinned now, so one collect() can advance the epoch past the retirement.
    domain.collect();

    EXPECT_TRUE(freed.load());
}

TEST(EpochDomain, SynchronizeRunsEveryDeleterRetiredBeforeIt) {
    auto& domain = EpochDomain::global();
    std::atomic<int> freed{0};
    {
        PinnedReader reader;
        for (int i = 0; i < 3; ++i) domain.retire([&] { freed.fetch_add(1); });
        EXPECT_EQ(freed.load(), 0);
    }  // the reader unpins

    domain.synchronize();

    EXPECT_EQ(freed.load(), 3);
    EXPECT_EQ(domain.pending(), 0u);
}

TEST(EpochDomain, DeleterRunsExactlyOnce) {
    auto& domain = EpochDomain::global();
    std::atomic<int> runs{0};
    domain.retire([&] { runs.fetch_add(1); });

    domain.synchronize();
    domain.collect();
    domain.synchronize();

    EXPECT_EQ(runs.load(), 1);
}

TEST(EpochDomain, PendingCountsDeletersHeldBackByAReader) {
    auto& domain = EpochDomain::global();
    domain.synchronize();
    PinnedReader reader;

    domain.retire([] {});
    domain.retire([] {});

    EXPECT_EQ(domain.pending(), 2u);
    reader.release();
    domain.synchronize();
    EXPECT_EQ(domain.pending(), 0u);
}

// A writer retiring many objects at once collects once, at the batch's end, not once an object
// (two heavy barriers each).
TEST(EpochDomain, ABatchQueuesItsRetirementsAndItsOutermostEndCollects) {
    auto& domain = EpochDomain::global();
    domain.synchronize();
    std::atomic<int> freed{0};
    {
        EpochDomain::Batch outer(domain);
        {
            EpochDomain::Batch inner(domain);
            for (int i = 0; i < 3; ++i) domain.retire([&] { ++freed; });
        }
        EXPECT_EQ(freed.load(), 0) << "an inner batch's end collected";
        EXPECT_EQ(domain.pending(), 3u);
        domain.retire([&] { ++freed; });
        EXPECT_EQ(freed.load(), 0) << "a retirement in a batch collected at once";
    }
    EXPECT_EQ(freed.load(), 4) << "the batch's end left deleters no reader holds back";
    // Outside a batch, a retirement with no reader pinned is collected at once, as before.
    domain.retire([&] { ++freed; });
    EXPECT_EQ(freed.load(), 5);
}

// Another thread's batch does not hold back this thread's retirements.
TEST(EpochDomain, ABatchOnAnotherThreadLeavesThisThreadsRetirementsCollectedAtOnce) {
    auto& domain = EpochDomain::global();
    domain.synchronize();
    std::latch opened{1};
    std::latch done{1};
    std::thread batching([&] {
        EpochDomain::Batch batch(domain);
        opened.count_down();
        done.wait();
    });
    opened.wait();
    std::atomic<bool> freed{false};
    domain.retire([&] { freed = true; });
    EXPECT_TRUE(freed.load());
    done.count_down();
    batching.join();
}

TEST(EpochDomain, NestedPinHoldsUntilOutermostGuardEnds) {
    auto& domain = EpochDomain::global();
    std::atomic<bool> freed{false};
    // Pinned twice; the inner pin is dropped before retire(), the outer one is still held.
    PinnedReader reader(/*depth=*/2, /*unpin_before_report=*/1);

    domain.retire([&] { freed = true; });
    for (int i = 0; i < 16; ++i) domain.collect();

    EXPECT_FALSE(freed.load()) << "ending an inner guard unpinned the thread";
    reader.release();
    domain.synchronize();
    EXPECT_TRUE(freed.load());
}

TEST(EpochDomain, NestedPinOnCallingThreadHoldsBackDeleter) {
    auto& domain = EpochDomain::global();
    std::atomic<bool> freed{false};
    std::optional<EpochDomain::Guard> outer(std::in_place, domain);
    { auto inner = domain.pin(); }

    domain.retire([&] { freed = true; });
    for (int i = 0; i < 16; ++i) domain.collect();  // collect() may be called while pinned

    EXPECT_FALSE(freed.load());
    outer.reset();
    domain.synchronize();  // never while pinned: it would wait for itself
    EXPECT_TRUE(freed.load());
}

TEST(EpochDomain, ReaderPinnedAfterRetireDoesNotHoldBackOlderDeleter) {
    auto& domain = EpochDomain::global();
    domain.synchronize();  // start from an empty retire list, so the epoch only moves below
    std::atomic<bool> freed{false};
    std::optional<PinnedReader> early(std::in_place);
    domain.retire([&] { freed = true; });
    early.reset();  // the only reader that could see the object unpins

    PinnedReader late;  // pins after the retirement
    for (int i = 0; i < 16 && !freed.load(); ++i) domain.collect();

    EXPECT_TRUE(freed.load()) << "a reader pinned after retire() blocked the deleter";
    late.release();
    domain.synchronize();
}

// Whether this kernel lets this process register for membarrier's private expedited command
// (a sandbox may answer the query and refuse the registration). Registering here changes nothing
// the tests look at: a domain keeps its own account of the switch.
bool membarrier_available() {
    static const bool available = [] {
        const long supported = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        return supported >= 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
               syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }();
    return available;
}

bool fences_forced_here() {
    const char* value = std::getenv("KCACHE_EPOCH_FENCES");
    return value != nullptr && std::string_view(value) == "1";
}

// Waits up to five seconds for the domain's readers to be allowed to skip their fence.
bool becomes_asymmetric(const EpochDomain& domain) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!domain.asymmetric() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return domain.asymmetric();
}

// Registering for membarrier in a process with threads waits for an RCU grace period (several
// ms): a new process's first hit must not pay it, so the first pins fence and the switch comes
// from a background thread once a thread has pinned often.
TEST(EpochDomainBarrier, AFreshProcessFencesUntilAThreadHasPinnedOftenThenSwitchesInTheBackground) {
    if (!membarrier_available() || fences_forced_here()) GTEST_SKIP() << "no membarrier here";
    test::expect_in_child_process([] {
        std::latch done{1};
        std::thread other([&] { done.wait(); });  // a process with threads, as a CUDA one is
        auto& domain = EpochDomain::global();
        { auto guard = domain.pin(); }
        EXPECT_FALSE(domain.asymmetric()) << "the first pin registered for membarrier itself";
        for (std::uint32_t i = 2; i < EpochDomain::kPinsBeforeRegistering; ++i) {
            auto guard = domain.pin();
        }
        EXPECT_FALSE(domain.asymmetric()) << "registered before the thread pinned often";
        { auto guard = domain.pin(); }
        EXPECT_TRUE(becomes_asymmetric(domain)) << "no switch after enough pins";
        EXPECT_TRUE(domain.register_membarrier_now()) << "a second registration failed";
        done.count_down();
        other.join();
    });
}

TEST(EpochDomainBarrier, FencesForcedByTheEnvironmentStayFences) {
    test::expect_in_child_process([] {
        ::setenv("KCACHE_EPOCH_FENCES", "1", 1);
        auto& domain = EpochDomain::global();
        for (std::uint32_t i = 0; i < 2 * EpochDomain::kPinsBeforeRegistering; ++i) {
            auto guard = domain.pin();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_FALSE(domain.asymmetric());
        EXPECT_FALSE(domain.register_membarrier_now());
        EXPECT_FALSE(domain.asymmetric());
    });
}

// Readers and a writer across the switch from fences to membarrier: a reader pinned while it
// looks at an object never sees that object's deleter run, before, during or after the switch.
TEST(EpochDomainBarrier, NoDeleterRunsUnderAPinnedReaderAcrossTheSwitch) {
    test::expect_in_child_process([] {
        struct Node {
            std::atomic<bool> alive{true};
        };
        auto& domain = EpochDomain::global();
        std::atomic<Node*> current{new Node()};
        std::mutex graveyard_mutex;
        std::vector<Node*> graveyard;  // freed at the end: a late reader's check stays defined
        std::atomic<bool> stop{false};
        std::atomic<long> violations{0}, reads{0};
        std::vector<std::thread> readers;
        for (int t = 0; t < 4; ++t) {
            readers.emplace_back([&] {
                while (!stop.load(std::memory_order_relaxed)) {
                    auto guard = domain.pin();
                    Node* node = current.load(std::memory_order_acquire);
                    for (int spin = 0; spin < 16; ++spin) {
                        if (!node->alive.load(std::memory_order_acquire)) ++violations;
                    }
                    reads.fetch_add(1, std::memory_order_relaxed);
                }
            });
        }
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        long replaced = 0;
        while (std::chrono::steady_clock::now() < end && replaced < 50000) {
            Node* old = current.exchange(new Node(), std::memory_order_acq_rel);
            domain.retire([old, &graveyard, &graveyard_mutex] {
                old->alive.store(false, std::memory_order_release);
                const std::lock_guard lock(graveyard_mutex);
                graveyard.push_back(old);
            });
            ++replaced;
        }
        stop = true;
        for (auto& reader : readers) reader.join();
        domain.synchronize();
        EXPECT_EQ(violations.load(), 0) << "a deleter ran under a pinned reader";
        EXPECT_GT(replaced, 100);
        EXPECT_GT(reads.load(), 4L * EpochDomain::kPinsBeforeRegistering);
        if (membarrier_available() && !fences_forced_here()) {
            EXPECT_TRUE(becomes_asymmetric(domain)) << "the run never reached the switch";
        }
        delete current.load();
        for (Node* node : graveyard) delete node;
    });
}

// A child forked while the background registration is under way has no thread finishing it: its
// readers must be able to ask again, or they would fence for ever.
TEST(EpochDomainBarrier, AChildForkedDuringTheSwitchSwitchesByItself) {
    if (!membarrier_available() || fences_forced_here()) GTEST_SKIP() << "no membarrier here";
    if (test::kThreadSanitizer) GTEST_SKIP() << "ThreadSanitizer cannot follow this fork";
    // The fork comes while the registering thread starts, which allocates.
    if (test::kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer's allocator may hang this child";
    test::expect_in_child_process([] {
        std::latch done{1};
        std::thread other([&] { done.wait(); });  // registering then waits for a grace period
        auto& domain = EpochDomain::global();
        for (std::uint32_t i = 0; i < EpochDomain::kPinsBeforeRegistering; ++i) {
            auto guard = domain.pin();
        }
        // The registration has started on its thread; fork before it ends (it takes ms).
        const pid_t child = ::fork();
        if (child == 0) {
            auto& forked = EpochDomain::global();
            for (std::uint32_t i = 0; i < 2 * EpochDomain::kPinsBeforeRegistering; ++i) {
                auto guard = forked.pin();
            }
            std::_Exit(becomes_asymmetric(forked) ? 0 : 3);
        }
        ASSERT_GT(child, 0);
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "the forked child never switched to membarrier (status " << status << ")";
        EXPECT_TRUE(becomes_asymmetric(domain));
        done.count_down();
        other.join();
    });
}

}  // namespace
}  // namespace kcache::util
