// SPDX-License-Identifier: Apache-2.0
// util::EpochDomain: a retired object is freed only once no reader pinned before its retirement
// can still be looking at it.
#include "util/epoch.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <optional>
#include <thread>

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

}  // namespace
}  // namespace kcache::util
