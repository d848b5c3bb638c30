// SPDX-License-Identifier: Apache-2.0
// FileLock across real processes: a stopped holder is not waited for, a live one is, a dead one
// frees the lock at once; a silent cleaner's lock can be broken; nothing but a regular file is
// ever locked.
#include "util/file_lock.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "test_support.hpp"
#include "util/log.hpp"

namespace kcache::util {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The state letter of /proc/<pid>/stat: 'T' for stopped.
char state_of(pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

class FileLockTest : public ::testing::Test {
protected:
    void SetUp() override { FileLock::set_heartbeat_period(200ms); }
    void TearDown() override {
        if (child_ > 0) {
            kill(child_, SIGKILL);
            int status = 0;
            waitpid(child_, &status, 0);
        }
        FileLock::set_heartbeat_period(1000ms);
    }

    // Forks a child that takes the lock, says so on a pipe, then does `then`; returns once the
    // child holds the lock.
    template <class Then>
    void child_holds(Then&& then, bool for_cleanup = false) {
        int ready[2];
        ASSERT_EQ(pipe(ready), 0);
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(ready[0]);
            std::optional<FileLock> lock;
            if (for_cleanup) {
                auto taken = FileLock::try_acquire(path_, FileLock::IfSilent::kBreak);
                if (taken && *taken) lock = std::move(**taken);
            } else {
                lock = FileLock::acquire(path_, 1s);
            }
            const char held = lock ? 'y' : 'n';
            std::ignore = write(ready[1], &held, 1);
            then();
            _exit(0);
        }
        close(ready[1]);
        char held = 0;
        ASSERT_EQ(read(ready[0], &held, 1), 1);
        close(ready[0]);
        ASSERT_EQ(held, 'y');
    }

    void child_stops_once_holding(bool for_cleanup = false) {
        child_holds([] { raise(SIGSTOP); }, for_cleanup);
        int status = 0;
        ASSERT_EQ(waitpid(child_, &status, WUNTRACED), child_);  // the gate: it is stopped
        ASSERT_TRUE(WIFSTOPPED(status));
    }

    test::TempDir temp_;
    std::string path_ = temp_.path() + "/entry.kc.lock";
    pid_t child_ = -1;
};

TEST_F(FileLockTest, TheHolderIsNamedInTheLockFile) {
    auto lock = FileLock::acquire(path_, 1s);
    ASSERT_TRUE(lock);
    const std::string record = read_file(path_);
    EXPECT_EQ(record.rfind("pid " + std::to_string(getpid()) + " host ", 0), 0u) << record;
}

TEST_F(FileLockTest, AStoppedHolderIsNotWaitedForAndTheWaitIsLoggedNamingIt) {
    const std::string log = temp_.path() + "/log";
    set_log_setting(log);
    child_stops_once_holding();
    const auto start = std::chrono::steady_clock::now();
    auto lock = FileLock::acquire(path_, 10min);
    const auto waited = std::chrono::steady_clock::now() - start;
    reset_log();
    EXPECT_FALSE(lock) << "the lock is still the stopped child's";
    EXPECT_LT(waited, 1min) << "it stopped waiting long before its patience ran out";
    EXPECT_EQ(state_of(child_), 'T') << "the child is still stopped";
    const std::string said = read_file(log);
    EXPECT_NE(said.find("pid " + std::to_string(child_)), std::string::npos) << said;
    EXPECT_NE(said.find(path_), std::string::npos) << said;
}

TEST_F(FileLockTest, ALiveHolderThatStampsItsLockIsWaitedFor) {
    const auto hold = FileLock::heartbeat_period() * FileLock::kSilentPeriods * 3;
    child_holds([hold] { std::this_thread::sleep_for(hold); });
    const auto start = std::chrono::steady_clock::now();
    auto lock = FileLock::acquire(path_, 10min);
    EXPECT_TRUE(lock) << "released by the child after its hold";
    EXPECT_GE(std::chrono::steady_clock::now() - start,
              FileLock::heartbeat_period() * FileLock::kSilentPeriods)
        << "waited past the point where a silent holder is given up on";
}

TEST_F(FileLockTest, ADeadHoldersLockIsFreeAtOnce) {
    child_holds([] {});
    int status = 0;
    ASSERT_EQ(waitpid(child_, &status, 0), child_);
    child_ = -1;
    auto lock = FileLock::try_acquire(path_);
    ASSERT_TRUE(lock.ok()) << lock.error().describe();
    EXPECT_TRUE(*lock) << "one attempt, no waiting, finds it free";
}

TEST_F(FileLockTest, ASilentCleanersLockIsBrokenButALiveOnesIsKept) {
    child_stops_once_holding(/*for_cleanup=*/true);
    auto kept = FileLock::try_acquire(path_, FileLock::IfSilent::kKeep);
    ASSERT_TRUE(kept.ok());
    EXPECT_FALSE(*kept) << "without kBreak a held lock is left to its holder";
    std::optional<FileLock> broken;
    for (auto deadline = std::chrono::steady_clock::now() + 1min;
         !broken && std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(FileLock::heartbeat_period())) {
        auto taken = FileLock::try_acquire(path_, FileLock::IfSilent::kBreak);
        ASSERT_TRUE(taken.ok()) << taken.error().describe();
        if (*taken) broken = std::move(**taken);
    }
    EXPECT_TRUE(broken) << "broken once the stopped child missed its heartbeats";
    EXPECT_EQ(state_of(child_), 'T');
    // A live holder's lock (this process's, stamped) is never broken by another opening.
    auto again = FileLock::try_acquire(path_, FileLock::IfSilent::kBreak);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(*again);
}

TEST_F(FileLockTest, TheHeartbeatKeepsStampingAHeldLock) {
    auto lock = FileLock::acquire(path_, 1s);
    ASSERT_TRUE(lock);
    const timespec old[2] = {{1000, 0}, {1000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path_.c_str(), old, 0), 0);
    struct stat status {};
    for (auto deadline = std::chrono::steady_clock::now() + 1min;
         std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(FileLock::heartbeat_period() / 2)) {
        ASSERT_EQ(stat(path_.c_str(), &status), 0);
        if (status.st_mtim.tv_sec != 1000) break;
    }
    EXPECT_NE(status.st_mtim.tv_sec, 1000);
}

TEST_F(FileLockTest, AFifoAtTheLocksPathIsRefusedWithoutHanging) {
    ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
    EXPECT_FALSE(FileLock::acquire(path_, 10min));
    EXPECT_FALSE(FileLock::try_acquire(path_).ok());
    const int dir = open(temp_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir, 0);
    EXPECT_FALSE(FileLock::acquire(dir, "entry.kc.lock", 10min));
    EXPECT_FALSE(FileLock::try_acquire(dir, "entry.kc.lock").ok());
    close(dir);
}

TEST_F(FileLockTest, ALinkAtTheLocksPathIsNotFollowed) {
    const std::string outside = temp_.path() + "/outside";
    ASSERT_EQ(symlink(outside.c_str(), path_.c_str()), 0);
    EXPECT_FALSE(FileLock::acquire(path_, 1s));
    const int dir = open(temp_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir, 0);
    EXPECT_FALSE(FileLock::acquire(dir, "entry.kc.lock", 1s));
    EXPECT_FALSE(FileLock::try_acquire(dir, "entry.kc.lock").ok());
    close(dir);
    struct stat status {};
    EXPECT_NE(lstat(outside.c_str(), &status), 0) << "nothing was created through the link";
}

TEST_F(FileLockTest, ALockTakenBelowAHeldFolderExcludesOneTakenByPath) {
    const int dir = open(temp_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir, 0);
    auto lock = FileLock::acquire(dir, "entry.kc.lock", 1s);
    close(dir);
    ASSERT_TRUE(lock);
    auto other = FileLock::try_acquire(path_);
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(*other);
    lock.reset();
    other = FileLock::try_acquire(path_);
    ASSERT_TRUE(other.ok());
    EXPECT_TRUE(*other);
}

}  // namespace
}  // namespace kcache::util
