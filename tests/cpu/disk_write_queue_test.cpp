// SPDX-License-Identifier: Apache-2.0
// A lookup's compile is written to disk behind its caller: the queue that writes it, and the
// build layer's use of it (the compile lock held until the entry is on disk; a prebuild still
// written before it returns).
#include "store/disk_write_queue.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "build/artifact_builder.hpp"
#include "build/plan.hpp"
#include "test_support.hpp"

namespace kcache::store {
namespace {

using namespace std::chrono_literals;

// Closed until open(): whoever waits() stays until then, or at most a while, so that a write
// that should not have waited fails its test instead of hanging it.
class Gate {
public:
    void wait() {
        std::unique_lock lock(mutex_);
        ++waiting_;
        changed_.notify_all();
        changed_.wait_for(lock, 20s, [&] { return open_; });
    }
    void wait_for_waiters(int n) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return waiting_ >= n; });
    }
    void open() {
        std::lock_guard lock(mutex_);
        open_ = true;
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    int waiting_ = 0;
    bool open_ = false;
};

DiskWrite write_of(std::uint64_t n, std::atomic<int>* ok_count = nullptr,
                   std::atomic<int>* failed_count = nullptr) {
    DiskWrite write{util::Fingerprint{n, n}, VerifiedArtifact::of(test::sample()), {}};
    write.then = [ok_count, failed_count](const Result<void>& written) {
        if (written && ok_count != nullptr) ++*ok_count;
        if (!written && failed_count != nullptr) ++*failed_count;
    };
    return write;
}

// A disk that answers each write only once `gate` opens.
DiskWriteQueue::Write gated_disk(Gate& gate) {
    return [&gate](const DiskWrite&) {
        gate.wait();
        return kcache::ok();
    };
}

TEST(DiskWriteQueue, AQueuedWriteIsWrittenAndItsThenToldSo) {
    std::atomic<int> writes{0}, ok{0};
    DiskWriteQueue queue(
        [&](const DiskWrite&) {
            ++writes;
            return kcache::ok();
        },
        2, 16, 1 << 20);
    for (std::uint64_t n = 1; n <= 5; ++n) {
        DiskWrite write = write_of(n, &ok);
        ASSERT_TRUE(queue.push(write));
    }
    queue.drain();
    EXPECT_EQ(writes.load(), 5);
    EXPECT_EQ(ok.load(), 5);
}

TEST(DiskWriteQueue, AFullQueueRefusesAndLeavesTheWriteToItsCaller) {
    Gate gate;
    DiskWriteQueue queue(gated_disk(gate), 1, 1, 1 << 20);
    std::atomic<int> ok{0};
    DiskWrite first = write_of(1, &ok);
    ASSERT_TRUE(queue.push(first));
    gate.wait_for_waiters(1);  // the one thread is writing the first
    DiskWrite second = write_of(2, &ok);
    ASSERT_TRUE(queue.push(second));  // queued: the one entry the queue holds
    DiskWrite third = write_of(3, &ok);
    EXPECT_FALSE(queue.push(third));
    // Refused untouched: its caller still has the entry and the continuation to run.
    ASSERT_NE(third.entry, nullptr);
    EXPECT_TRUE(static_cast<bool>(third.then));
    gate.open();
    queue.drain();
    EXPECT_EQ(ok.load(), 2);
}

TEST(DiskWriteQueue, WritesBeyondOneThreadRunAtOnce) {
    Gate gate;
    DiskWriteQueue queue(gated_disk(gate), 3, 16, 1 << 20);
    std::atomic<int> ok{0};
    for (std::uint64_t n = 1; n <= 3; ++n) {
        DiskWrite write = write_of(n, &ok);
        ASSERT_TRUE(queue.push(write));
    }
    gate.wait_for_waiters(3);  // three writes waiting on the disk at once, not one after another
    gate.open();
    queue.drain();
    EXPECT_EQ(ok.load(), 3);
}

TEST(DiskWriteQueue, FinishingWritesWhatIsQueuedAndRefusesLaterWrites) {
    std::atomic<int> ok{0};
    DiskWriteQueue queue([&](const DiskWrite&) { return kcache::ok(); }, 2, 16, 1 << 20);
    for (std::uint64_t n = 1; n <= 4; ++n) {
        DiskWrite write = write_of(n, &ok);
        ASSERT_TRUE(queue.push(write));
    }
    EXPECT_EQ(queue.finish(std::chrono::milliseconds::max()), 0u);
    EXPECT_EQ(ok.load(), 4);
    DiskWrite late = write_of(5, &ok);
    EXPECT_FALSE(queue.push(late));
}

TEST(DiskWriteQueue, WhatAStuckDiskLeftQueuedAtTheBoundIsToldItWasNotWritten) {
    Gate gate;
    std::atomic<int> ok{0}, failed{0};
    DiskWriteQueue queue(gated_disk(gate), 1, 16, 1 << 20);
    DiskWrite first = write_of(1, &ok, &failed);
    ASSERT_TRUE(queue.push(first));
    gate.wait_for_waiters(1);
    DiskWrite second = write_of(2, &ok, &failed);
    ASSERT_TRUE(queue.push(second));
    // The write under way ends when the disk answers; the queued one is given up at the bound.
    std::thread disk([&] {
        std::this_thread::sleep_for(200ms);
        gate.open();
    });
    EXPECT_EQ(queue.finish(0ms), 1u);
    disk.join();
    EXPECT_EQ(ok.load(), 1);
    EXPECT_EQ(failed.load(), 1);
}

// A forked child has none of the parent's writing threads: its queue refuses writes (its caller
// writes them) and its end neither waits for nor joins them.
TEST(DiskWriteQueue, AForkedChildNeitherUsesNorWaitsForTheParentsThreads) {
    if (test::kThreadSanitizer)
        GTEST_SKIP() << "ThreadSanitizer cannot follow a fork of a process with threads";
    Gate gate;
    std::atomic<int> ok{0};
    auto queue = std::make_unique<DiskWriteQueue>(gated_disk(gate), 1, 16, 1 << 20);
    DiskWrite first = write_of(1, &ok);
    ASSERT_TRUE(queue->push(first));
    gate.wait_for_waiters(1);  // a thread is writing, and holds no lock of the queue's
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        DiskWrite more = write_of(2);
        const bool refused = !queue->push(more);
        queue->drain();
        const bool nothing_left = queue->finish(std::chrono::milliseconds::max()) == 0;
        queue.reset();
        _exit(refused && nothing_left ? 0 : 1);
    }
    const std::optional<int> status = test::wait_for_child(child);
    ASSERT_TRUE(status.has_value()) << "the child hung at its queue's end";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    gate.open();
    queue->drain();
    EXPECT_EQ(ok.load(), 1);
}

// The real file system, but entries (".kc") are written only once the gate opens, and the
// threads that wrote them are noted.
class GatedEntries final : public test::ForwardingFiles {
public:
    Gate gate;
    std::atomic<bool> fail{false};  // entries' writes fail once the gate opens
    std::mutex mutex;
    std::vector<std::thread::id> writers;  // guarded by mutex

    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        if (relative.ends_with(".kc")) {
            {
                std::lock_guard lock(mutex);
                writers.push_back(std::this_thread::get_id());
            }
            gate.wait();
            if (fail) return Error(Errc::kIoError, "the disk is full");
        }
        return ForwardingFiles::write_atomic(base, relative, bytes, durability);
    }
};

class WriteBehindTest : public ::testing::Test {
protected:
    void SetUp() override {
        auto plan = build::plan_build(90, source, true);
        ASSERT_TRUE(plan.ok()) << plan.error().describe();
        if (!*plan) GTEST_SKIP() << "no nvJitLink here";
        fingerprint = (*plan)->fingerprint;
    }
    // The disk answers only after a while, from another thread: whoever must wait for the write
    // is seen to wait.
    std::thread open_gate_later() {
        return std::thread([this] {
            std::this_thread::sleep_for(100ms);
            files_.gate.open();
        });
    }
    build::BuildOptions options() {
        build::BuildOptions o;
        o.memory_bytes = 64 << 20;
        o.disk.directory = dir_.path() + "/cache";
        o.disk.files = &files_;
        return o;
    }
    const Source source = test::residual_add_source();
    util::Fingerprint fingerprint{};
    test::TempDir dir_;
    GatedEntries files_;
};

TEST_F(WriteBehindTest, ALookupHasItsArtifactWhileTheDiskWriteWaitsAndTheLockIsHeldUntilWritten) {
    build::ArtifactBuilder builder(options());
    // The gate is closed: the entry's write cannot end, and the lookup still returns.
    auto built = builder.build("residual_add", 90, source);
    ASSERT_TRUE(built.ok()) << built.error().describe();
    EXPECT_EQ(built->provenance, Provenance::kCompiled);
    ASSERT_NE(built->artifact, nullptr);
    EXPECT_FALSE(built->not_stored.has_value());
    files_.gate.wait_for_waiters(1);
    {
        std::lock_guard lock(files_.mutex);
        ASSERT_EQ(files_.writers.size(), 1u);
        EXPECT_NE(files_.writers[0], std::this_thread::get_id());
    }
    DiskStore* disk = builder.tiers()->disk();
    ASSERT_NE(disk, nullptr);
    // Another process asking now would wait on the compile's lock, then find the entry on disk.
    EXPECT_FALSE(disk->lock(fingerprint, 0ms).has_value());
    // This process finds it in memory meanwhile.
    auto again = builder.build("residual_add", 90, source);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->provenance, Provenance::kMemoryTier);

    files_.gate.open();
    builder.tiers()->drain_writes();
    EXPECT_TRUE(disk->lock(fingerprint, 0ms).has_value());
    EXPECT_NE(disk->get(fingerprint), nullptr);
    EXPECT_EQ(disk->stats().writes, 1u);
}

TEST_F(WriteBehindTest, APrebuildIsOnDiskWhenItReturns) {
    files_.gate.open();
    build::ArtifactBuilder builder(options());
    auto built =
        builder.build("residual_add", 90, source, build::ArtifactBuilder::Asking::kPrebuild);
    ASSERT_TRUE(built.ok()) << built.error().describe();
    EXPECT_EQ(builder.tiers()->disk()->stats().writes, 1u);
    std::lock_guard lock(files_.mutex);
    ASSERT_EQ(files_.writers.size(), 1u);
    EXPECT_EQ(files_.writers[0], std::this_thread::get_id());  // written by the caller
}

TEST_F(WriteBehindTest, TheTiersEndOnlyOnceTheQueuedEntriesAreOnDisk) {
    std::thread disk_answers;
    {
        build::ArtifactBuilder builder(options());
        ASSERT_TRUE(builder.build("residual_add", 90, source).ok());
        files_.gate.wait_for_waiters(1);
        // The disk answers only after the builder began to end: its end must wait for the write.
        disk_answers = open_gate_later();
    }
    disk_answers.join();
    auto disk = DiskStore::open(options().disk);
    ASSERT_TRUE(disk.ok());
    EXPECT_NE((*disk)->get(fingerprint), nullptr);
}

// A prebuild is for the disk: one that finds in memory what a lookup compiled just before, its
// disk write still queued, returns once that write ended, and says so if it failed.
TEST_F(WriteBehindTest, APrebuildOfWhatALookupJustCompiledReturnsOnceItIsOnDisk) {
    build::ArtifactBuilder builder(options());
    ASSERT_TRUE(builder.build("residual_add", 90, source).ok());
    files_.gate.wait_for_waiters(1);
    std::thread disk_answers = open_gate_later();
    auto prebuilt =
        builder.build("residual_add", 90, source, build::ArtifactBuilder::Asking::kPrebuild);
    const bool on_disk = builder.tiers()->disk()->get(fingerprint) != nullptr;
    disk_answers.join();
    ASSERT_TRUE(prebuilt.ok()) << prebuilt.error().describe();
    EXPECT_FALSE(prebuilt->not_stored.has_value());
    EXPECT_TRUE(on_disk);
}

TEST_F(WriteBehindTest, APrebuildOfWhatALookupJustCompiledSaysWhenItsQueuedWriteFailed) {
    files_.fail = true;
    build::ArtifactBuilder builder(options());
    ASSERT_TRUE(builder.build("residual_add", 90, source).ok());
    files_.gate.wait_for_waiters(1);
    std::thread disk_answers = open_gate_later();
    auto prebuilt =
        builder.build("residual_add", 90, source, build::ArtifactBuilder::Asking::kPrebuild);
    disk_answers.join();
    ASSERT_TRUE(prebuilt.ok()) << prebuilt.error().describe();
    ASSERT_TRUE(prebuilt->not_stored.has_value()) << "a prebuild said stored what is not on disk";
    EXPECT_NE(prebuilt->not_stored->message().find("disk is full"), std::string::npos)
        << prebuilt->not_stored->message();
    // The failed write is counted, and a later memory hit still says it is not on disk.
    EXPECT_GE(builder.tiers()->stats().disk.errors, 1u);
    auto again = builder.build("residual_add", 90, source);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->provenance, Provenance::kMemoryTier);
    EXPECT_TRUE(again->not_stored.has_value());
}

// An entry the memory tier cannot keep, its write still queued: a lookup of it in the same
// process waits on the compile's lock until the write ends and reads it from disk; it neither
// waits on itself for ever nor compiles it again.
TEST_F(WriteBehindTest, ALookupOfAnEntryTooBigForMemoryWaitsForItsOwnProcesssWriteAndReadsIt) {
    build::BuildOptions o = options();
    o.memory_bytes = 1;
    build::ArtifactBuilder builder(o);
    ASSERT_TRUE(builder.build("residual_add", 90, source).ok());
    files_.gate.wait_for_waiters(1);
    std::thread disk_answers = open_gate_later();
    auto again = builder.build("residual_add", 90, source);
    disk_answers.join();
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(again->provenance, Provenance::kDiskTier);
    builder.tiers()->drain_writes();
    EXPECT_EQ(builder.tiers()->disk()->stats().writes, 1u);
}

}  // namespace
}  // namespace kcache::store
