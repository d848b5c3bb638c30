// SPDX-License-Identifier: Apache-2.0
// The real file system below a held directory: what it reads, writes and removes, and that no
// link, FIFO or oversized file below the directory can lead it astray.
#include "util/files.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "test_support.hpp"

namespace kcache::util {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::TempDir;

constexpr std::uint64_t kLimit = 1 << 20;

OpenDirectory held(const std::string& path) {
    auto opened = real_files().open_directory(path);
    EXPECT_TRUE(opened.ok()) << opened.error().describe();
    return opened ? std::move(*opened) : OpenDirectory();
}

// A folder outside the held one, with a file in it that nothing may read, change or remove.
struct Outside {
    TempDir dir;
    std::string file = dir.path() + "/victim";
    Outside() { test::write_file(file, "keep me"); }
    bool untouched() const {
        return fs::exists(file) && *read_named_file(file, kLimit).value() == "keep me";
    }
};

TEST(Files, ReadsAFileBelowTheHeldDirectoryAndNamesTheWholePathInErrors) {
    TempDir dir;
    fs::create_directories(dir.path() + "/ab/cd");
    test::write_file(dir.path() + "/ab/entry", "bytes");
    const OpenDirectory base = held(dir.path());
    auto bytes = real_files().read(base, "ab/entry", kLimit, kNeverStamp);
    ASSERT_TRUE(bytes.ok() && bytes->has_value());
    EXPECT_EQ(**bytes, "bytes");
    auto missing = real_files().read(base, "ab/none", kLimit, kNeverStamp);
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing->has_value());
    auto folder = real_files().read(base, "ab/cd", kLimit, kNeverStamp);
    ASSERT_FALSE(folder.ok());  // a directory is not read as a file
    EXPECT_NE(folder.error().message().find(dir.path() + "/ab/cd"), std::string::npos)
        << folder.error().message();
}

TEST(Files, ReadsAWholeFileLargerThanOneBuffer) {
    TempDir dir;
    std::string text;
    for (int i = 0; i < 100000; ++i) text += std::to_string(i) + ",";
    test::write_file(dir.path() + "/big", text);
    auto bytes = real_files().read(held(dir.path()), "big", kLimit, 600s);
    ASSERT_TRUE(bytes.ok() && bytes->has_value());
    EXPECT_EQ(**bytes, text);
}

TEST(Files, ANamedFileIsReadToItsEndEvenWhenItReportsNoSize) {
    // /proc files stat as empty; a read trusting st_size would return nothing.
    auto bytes = read_named_file("/proc/self/status", kLimit);
    ASSERT_TRUE(bytes.ok() && bytes->has_value());
    EXPECT_NE((*bytes)->find("Pid:"), std::string::npos);
    EXPECT_FALSE(read_named_file("/proc/self/status", 4).ok()) << "larger than the bound";
}

TEST(Files, AFifoIsNeitherOpenedForAWriterNorRead) {
    TempDir dir;
    ASSERT_EQ(mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
    // Without O_NONBLOCK the open would wait for a writer forever, and this test with it.
    auto bytes = real_files().read(held(dir.path()), "fifo", kLimit, kNeverStamp);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.error().code(), Errc::kCorruptEntry);
    EXPECT_NE(bytes.error().message().find("FIFO"), std::string::npos) << bytes.error().message();
}

TEST(Files, AFileLargerThanItsBoundIsRefusedBeforeAnythingIsRead) {
    TempDir dir;
    const std::string path = dir.path() + "/huge";
    {
        const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(ftruncate(fd, off_t{8} << 30), 0);  // 8 GiB, sparse
        close(fd);
    }
    auto bytes = real_files().read(held(dir.path()), "huge", kLimit, kNeverStamp);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.error().code(), Errc::kCorruptEntry);
}

TEST(Files, NoSymbolicLinkIsFollowedAtAnyLevel) {
    TempDir dir;
    Outside outside;
    fs::create_directory_symlink(outside.dir.path(), dir.path() + "/ab");
    fs::create_symlink(outside.file, dir.path() + "/leaf");
    fs::create_symlink("/dev/zero", dir.path() + "/zero");
    const OpenDirectory base = held(dir.path());

    EXPECT_FALSE(real_files().read(base, "ab/victim", kLimit, kNeverStamp).ok());
    EXPECT_FALSE(real_files().read(base, "leaf", kLimit, kNeverStamp).ok());
    EXPECT_FALSE(real_files().read(base, "zero", kLimit, kNeverStamp).ok());
    EXPECT_FALSE(real_files().write_atomic(base, "ab/victim", "evil", Durability::kSynced).ok());
    EXPECT_FALSE(real_files().write_atomic(base, "ab/new", "evil", Durability::kSynced).ok());
    EXPECT_FALSE(real_files().touch(base, "ab/victim").ok());
    EXPECT_FALSE(real_files().list_directory(base, "ab").ok());
    EXPECT_FALSE(real_files().make_directories(base, "ab/x", 0700).ok());
    EXPECT_FALSE(real_files().open_below(base, "ab").ok());
    auto status = real_files().status(base, "ab/victim");
    EXPECT_FALSE(status.ok() && status->has_value());
    EXPECT_FALSE(real_files().remove(base, "ab/victim").ok() && !outside.untouched());
    EXPECT_TRUE(outside.untouched());
    EXPECT_FALSE(fs::exists(outside.dir.path() + "/new"));

    // At the last level a link is what is there: reported as such, and removed itself.
    auto link = real_files().status(base, "leaf");
    ASSERT_TRUE(link.ok() && link->has_value());
    EXPECT_EQ((*link)->kind, FileKind::kOther);
    ASSERT_TRUE(real_files().remove(base, "leaf").ok());
    ASSERT_TRUE(real_files().remove(base, "ab").ok());
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir.path() + "/leaf")));
    EXPECT_TRUE(outside.untouched());
}

TEST(Files, AWriteOverALinkReplacesTheLinkNotItsTarget) {
    TempDir dir;
    Outside outside;
    fs::create_symlink(outside.file, dir.path() + "/entry");
    ASSERT_TRUE(
        real_files().write_atomic(held(dir.path()), "entry", "new", Durability::kSynced).ok());
    EXPECT_TRUE(outside.untouched());
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir.path() + "/entry")));
}

TEST(Files, PathsThatLeaveTheDirectoryAreRefused) {
    TempDir dir;
    const OpenDirectory base = held(dir.path());
    for (const char* path : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/"}) {
        EXPECT_FALSE(is_relative_below(path)) << path;
        auto bytes = real_files().read(base, path, kLimit, kNeverStamp);
        ASSERT_FALSE(bytes.ok()) << path;
        EXPECT_EQ(bytes.error().code(), Errc::kInvalidArgument) << path;
    }
    EXPECT_TRUE(is_relative_below("ab/cdef.kc"));
}

TEST(Files, RemoveTakesAFolderWithEverythingInItButNothingALinkInItPointsTo) {
    TempDir dir;
    Outside outside;
    fs::create_directories(dir.path() + "/ab/cdef.kc/deeper");
    test::write_file(dir.path() + "/ab/cdef.kc/deeper/x", "x");
    fs::create_directory_symlink(outside.dir.path(), dir.path() + "/ab/cdef.kc/out");
    auto as_file = real_files().remove(held(dir.path()), "ab/cdef.kc");
    ASSERT_FALSE(as_file.ok()) << "remove takes files and links, never a tree";
    EXPECT_EQ(as_file.error().code(), Errc::kInvalidArgument);
    EXPECT_TRUE(fs::exists(dir.path() + "/ab/cdef.kc/deeper/x"));
    ASSERT_TRUE(real_files().remove_tree(held(dir.path()), "ab/cdef.kc").ok());
    EXPECT_FALSE(fs::exists(dir.path() + "/ab/cdef.kc"));
    EXPECT_TRUE(outside.untouched());
    EXPECT_TRUE(real_files().remove(held(dir.path()), "ab/missing").ok());
    EXPECT_TRUE(real_files().remove_tree(held(dir.path()), "no/such/folder").ok());
    std::string deep = dir.path() + "/deep";
    for (int level = 0; level <= kMaxTreeDepth + 1; ++level) deep += "/d";
    fs::create_directories(deep);
    EXPECT_FALSE(real_files().remove_tree(held(dir.path()), "deep").ok()) << "too deep";
}

TEST(Files, AtomicWritesLeaveNoTemporaryBehind) {
    TempDir dir;
    const OpenDirectory base = held(dir.path());
    ASSERT_TRUE(real_files().write_atomic(base, "file", "one", Durability::kSynced).ok());
    ASSERT_TRUE(real_files().write_atomic(base, "file", "two", Durability::kUnsynced).ok());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
    EXPECT_EQ(**real_files().read(base, "file", kLimit, kNeverStamp), "two");
}

TEST(Files, MakeDirectoriesMakesEveryMissingLevelAndAcceptsThoseThere) {
    TempDir dir;
    const OpenDirectory base = held(dir.path());
    ASSERT_TRUE(real_files().make_directories(base, "a/b/c", 0700).ok());
    EXPECT_TRUE(fs::is_directory(dir.path() + "/a/b/c"));
    ASSERT_TRUE(real_files().make_directories(base, "a/b/c", 0700).ok());  // all there already
    ASSERT_TRUE(real_files().make_directories(base, "a/d", 0700).ok());
    test::write_file(dir.path() + "/file", "x");
    EXPECT_FALSE(real_files().make_directories(base, "file/e", 0700).ok());
}

TEST(Files, StatusGivesKindSizeOwnerAndModifiedTime) {
    TempDir dir;
    test::write_file(dir.path() + "/file", "12345");
    fs::create_directories(dir.path() + "/folder");
    const OpenDirectory base = held(dir.path());
    auto status = real_files().status(base, "file");
    ASSERT_TRUE(status.ok() && status->has_value());
    EXPECT_EQ((*status)->kind, FileKind::kRegular);
    EXPECT_EQ((*status)->size, 5u);
    EXPECT_EQ((*status)->owner, geteuid());
    EXPECT_LT(std::chrono::system_clock::now() - (*status)->modified, 1min);
    EXPECT_EQ((*real_files().status(base, "folder"))->kind, FileKind::kDirectory);
    auto missing = real_files().status(base, "none/file");
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing->has_value());
}

TEST(Files, ListNamesEverythingButTheDots) {
    TempDir dir;
    test::write_file(dir.path() + "/a", "");
    fs::create_directories(dir.path() + "/b");
    auto names = real_files().list_directory(held(dir.path()), "");
    ASSERT_TRUE(names.ok());
    std::sort(names->begin(), names->end());
    EXPECT_EQ(*names, std::vector<std::string>({"a", "b"}));
    EXPECT_FALSE(real_files().list_directory(held(dir.path()), "missing").ok());
}

TEST(Files, TouchSetsTheModifiedTimeToNowAndLeavesTheAccessTime) {
    TempDir dir;
    const std::string path = dir.path() + "/file";
    test::write_file(path, "x");
    const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), long_ago, 0), 0);
    ASSERT_TRUE(real_files().touch(held(dir.path()), "file").ok());
    struct stat info {};
    ASSERT_EQ(stat(path.c_str(), &info), 0);
    EXPECT_GT(info.st_mtim.tv_sec, 1000000000 + 3600);
    EXPECT_EQ(info.st_atim.tv_sec, 1000000000);
    EXPECT_FALSE(real_files().touch(held(dir.path()), "missing").ok());
}

TEST(Files, AReadStampsAnOldFileOnlyWhenAsked) {
    TempDir dir;
    const std::string path = dir.path() + "/file";
    test::write_file(path, "x");
    const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), long_ago, 0), 0);
    struct stat info {};
    ASSERT_TRUE(real_files().read(held(dir.path()), "file", kLimit, kNeverStamp).ok());
    ASSERT_EQ(stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mtim.tv_sec, 1000000000);
    ASSERT_TRUE(real_files().read(held(dir.path()), "file", kLimit, 600s).ok());
    ASSERT_EQ(stat(path.c_str(), &info), 0);
    EXPECT_GT(info.st_mtim.tv_sec, 1000000000 + 3600);
}

TEST(Files, AHeldDirectoryKnowsWhenItsPathNamesAnotherOne) {
    TempDir dir;
    const std::string path = dir.path() + "/held";
    fs::create_directories(path);
    const OpenDirectory base = held(path);
    EXPECT_TRUE(base.still_at_its_path());
    fs::remove(path);
    EXPECT_FALSE(base.still_at_its_path());
    fs::create_directories(path);
    EXPECT_FALSE(base.still_at_its_path());
}

}  // namespace
}  // namespace kcache::util
