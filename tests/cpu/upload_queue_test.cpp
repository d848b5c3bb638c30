// SPDX-License-Identifier: Apache-2.0
// The remote tier's upload queue: off the caller's path, bounded, and never holding up the end.
#include "store/remote/upload_queue.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace kcache::store::remote {
namespace {

using namespace std::chrono_literals;

Upload upload_of(std::uint64_t n, std::size_t bytes = 10) {
    return Upload{util::Fingerprint{n, n}, std::string(bytes, 'x'), false, {}};
}

// A sender that blocks until the test opens its gate.
struct GatedSender {
    std::promise<void> gate;
    std::shared_future<void> opened{gate.get_future().share()};
    std::mutex mutex;
    std::vector<std::uint64_t> sent;
    std::atomic<int> started{0};

    UploadQueue::Send send() {
        return [this](const Upload& upload) {
            ++started;
            opened.wait();
            std::lock_guard lock(mutex);
            sent.push_back(upload.fingerprint.high);
            return true;
        };
    }
};

TEST(UploadQueueTest, EverythingQueuedIsSentInOrder) {
    GatedSender sender;
    UploadQueue queue(sender.send(), 100, 1 << 20);
    for (std::uint64_t i = 1; i <= 5; ++i) EXPECT_TRUE(queue.push(upload_of(i)));
    sender.gate.set_value();
    queue.drain();
    EXPECT_EQ(sender.sent, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
}

TEST(UploadQueueTest, PushNeverWaitsForTheSender) {
    GatedSender sender;
    UploadQueue queue(sender.send(), 100, 1 << 20);
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t i = 1; i <= 50; ++i) queue.push(upload_of(i));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the sender is blocked throughout";
    sender.gate.set_value();
}

TEST(UploadQueueTest, AFullQueueDropsByEntriesAndByBytesAndRunsTheFollowUp) {
    GatedSender sender;
    UploadQueue queue(sender.send(), 3, 1000);
    ASSERT_TRUE(queue.push(upload_of(1)));
    while (sender.started.load() == 0) std::this_thread::yield();  // 1 is being sent
    EXPECT_TRUE(queue.push(upload_of(2)));
    EXPECT_TRUE(queue.push(upload_of(3)));
    EXPECT_TRUE(queue.push(upload_of(4)));
    EXPECT_FALSE(queue.push(upload_of(5))) << "three queued: full by entries";
    bool followed_up = false;
    Upload big = upload_of(6, 2000);
    big.then = [&](bool there) { followed_up = !there; };
    EXPECT_FALSE(queue.push(std::move(big))) << "over the byte bound";
    EXPECT_TRUE(followed_up) << "a dropped upload's lease is released at once";
    sender.gate.set_value();
    queue.drain();
    EXPECT_EQ(sender.sent.size(), 4u);
}

TEST(UploadQueueTest, FinishGivesTheGraceThenDropsTheRestWithoutWaitingForThem) {
    GatedSender sender;
    UploadQueue queue(sender.send(), 100, 1 << 20);
    std::atomic<int> followed_up{0}, there{0};
    for (std::uint64_t i = 1; i <= 4; ++i) {
        Upload upload = upload_of(i);
        upload.then = [&](bool sent) {
            ++followed_up;
            if (sent) ++there;
        };
        queue.push(std::move(upload));
    }
    while (sender.started.load() == 0) std::this_thread::yield();
    // The one being sent finishes when its request does; the gate opens after the grace.
    std::thread opener([&] {
        std::this_thread::sleep_for(300ms);
        sender.gate.set_value();
    });
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(queue.finish(100ms), 3u) << "three never sent";
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    opener.join();
    EXPECT_EQ(followed_up.load(), 4) << "every upload's follow-up ran, sent or dropped";
    EXPECT_EQ(there.load(), 1) << "and was told whether its value is there";
    EXPECT_FALSE(queue.push(upload_of(9))) << "nothing is taken after the end";
}

TEST(UploadQueueTest, FinishReturnsAtOnceWhenEverythingWasSent) {
    GatedSender sender;
    sender.gate.set_value();
    UploadQueue queue(sender.send(), 100, 1 << 20);
    for (std::uint64_t i = 1; i <= 3; ++i) queue.push(upload_of(i));
    EXPECT_EQ(queue.finish(60s), 0u);
    EXPECT_EQ(sender.sent.size(), 3u);
}

}  // namespace
}  // namespace kcache::store::remote

namespace kcache::store::remote {
namespace {

// A forked child has none of the parent's threads: its queue refuses uploads (telling their
// follow-up), and its end neither waits for nor joins the parent's sender.
TEST(UploadQueueTest, AForkedChildNeitherUsesNorWaitsForTheParentsThread) {
    if (test::kThreadSanitizer)
        GTEST_SKIP() << "ThreadSanitizer cannot follow a fork of a process with threads";
    GatedSender sender;
    auto queue = std::make_unique<UploadQueue>(sender.send(), 100, 1 << 20);
    ASSERT_TRUE(queue->push(upload_of(1)));
    while (sender.started.load() == 0) std::this_thread::sleep_for(1ms);  // sending, unlocked
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        bool told = false;
        Upload more = upload_of(2);
        more.then = [&told](bool there) { told = !there; };
        const bool refused = !queue->push(std::move(more));
        queue->drain();
        queue.reset();
        _exit(refused && told ? 0 : 1);
    }
    const std::optional<int> status = test::wait_for_child(child);
    ASSERT_TRUE(status.has_value()) << "the child hung at its queue's end";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    sender.gate.set_value();
    queue->drain();
    EXPECT_EQ(sender.sent, (std::vector<std::uint64_t>{1}));
}

}  // namespace
}  // namespace kcache::store::remote
