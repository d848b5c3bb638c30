// SPDX-License-Identifier: Apache-2.0
// Files::read_bytes: which files come mapped rather than read (large, this user's, writable by no
// one else, on a local file system), that they read the same either way, and that a mapping keeps
// its bytes when kcache replaces or removes the file under it.
#include "util/file_bytes.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "test_support.hpp"
#include "util/files.hpp"

namespace kcache::util {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

constexpr std::uint64_t kLimit = std::uint64_t{1} << 24;
constexpr std::uint64_t kMapFrom = 64 << 10;

OpenDirectory held(const std::string& path) {
    auto opened = real_files().open_directory(path);
    EXPECT_TRUE(opened.ok()) << opened.error().describe();
    return opened ? std::move(*opened) : OpenDirectory();
}

std::string large_text() {
    std::string text;
    for (int i = 0; text.size() < (200 << 10); ++i) text += std::to_string(i) + ",";
    return text;
}

Result<std::optional<FileBytes>> read_bytes(Files& files, const std::string& dir,
                                            const std::string& name, std::uint64_t map_from,
                                            const Writers* writers = nullptr) {
    return files.read_bytes(held(dir), name, kLimit, kNeverStamp, writers, map_from);
}

TEST(FileBytes, ALargeFileOfThisUserIsMappedAndReadsAsARead) {
    TempDir dir;
    if (!test::maps_files_on(dir.path())) GTEST_SKIP() << "not a local file system kcache maps";
    const std::string text = large_text();
    test::write_file(dir.path() + "/large", text);
    test::write_file(dir.path() + "/small", "small");
    const Writers mine{geteuid(), false};

    auto mapped = read_bytes(real_files(), dir.path(), "large", kMapFrom, &mine);
    ASSERT_TRUE(mapped.ok() && mapped->has_value()) << mapped.error().describe();
    EXPECT_TRUE((*mapped)->mapped());
    EXPECT_EQ((*mapped)->view(), text);
    EXPECT_EQ(std::move(**mapped).take_text(), text);

    // Smaller than map_from, or no mapping asked for: read.
    auto small = read_bytes(real_files(), dir.path(), "small", kMapFrom, &mine);
    ASSERT_TRUE(small.ok() && small->has_value());
    EXPECT_FALSE((*small)->mapped());
    EXPECT_EQ((*small)->view(), "small");
    auto unasked = read_bytes(real_files(), dir.path(), "large", 0, &mine);
    ASSERT_TRUE(unasked.ok() && unasked->has_value());
    EXPECT_FALSE((*unasked)->mapped());
    EXPECT_EQ((*unasked)->view(), text);

    auto missing = read_bytes(real_files(), dir.path(), "none", kMapFrom, &mine);
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing->has_value());
}

TEST(FileBytes, AMappingKeepsItsBytesWhenTheFileIsReplacedOrRemoved) {
    TempDir dir;
    if (!test::maps_files_on(dir.path())) GTEST_SKIP() << "not a local file system kcache maps";
    const std::string text = large_text();
    test::write_file(dir.path() + "/entry", text);
    const OpenDirectory base = held(dir.path());
    auto first = real_files().read_bytes(base, "entry", kLimit, kNeverStamp, nullptr, kMapFrom);
    ASSERT_TRUE(first.ok() && first->has_value() && (*first)->mapped());
    // How kcache changes an entry: a new file renamed over the name, or the name removed.
    ASSERT_TRUE(
        real_files()
            .write_atomic(base, "entry", std::string(text.size(), 'x'), Durability::kUnsynced)
            .ok());
    auto second = real_files().read_bytes(base, "entry", kLimit, kNeverStamp, nullptr, kMapFrom);
    ASSERT_TRUE(second.ok() && second->has_value() && (*second)->mapped());
    ASSERT_TRUE(real_files().remove(base, "entry").ok());
    EXPECT_EQ((*first)->view(), text);
    EXPECT_EQ((*second)->view(), std::string(text.size(), 'x'));
}

TEST(FileBytes, AFileAnotherUserCouldCutShortIsReadNotMapped) {
    TempDir dir;
    if (!test::maps_files_on(dir.path())) GTEST_SKIP() << "not a local file system kcache maps";
    const std::string text = large_text();
    const std::string shared = dir.path() + "/group-writable";
    test::write_file(shared, text);
    ASSERT_EQ(chmod(shared.c_str(), 0664), 0);
    // Without a writers check (a shared directory) the read is allowed, but not mapped.
    auto bytes = read_bytes(real_files(), dir.path(), "group-writable", kMapFrom);
    ASSERT_TRUE(bytes.ok() && bytes->has_value());
    EXPECT_FALSE((*bytes)->mapped());
    EXPECT_EQ((*bytes)->view(), text);

    if (geteuid() != 0) return;  // only root can give a file away
    const std::string theirs = dir.path() + "/theirs";
    test::write_file(theirs, text);
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);  // nobody's
    auto other = read_bytes(real_files(), dir.path(), "theirs", kMapFrom);
    ASSERT_TRUE(other.ok() && other->has_value());
    EXPECT_FALSE((*other)->mapped());
    EXPECT_EQ((*other)->view(), text);
}

TEST(FileBytes, ReadBytesRefusesWhatReadRefuses) {
    TempDir dir;
    ASSERT_EQ(mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
    auto fifo = read_bytes(real_files(), dir.path(), "fifo", 1);
    ASSERT_FALSE(fifo.ok());
    EXPECT_EQ(fifo.error().code(), Errc::kCorruptEntry);
    const std::string text = large_text();
    test::write_file(dir.path() + "/large", text);
    auto too_large = real_files().read_bytes(held(dir.path()), "large", text.size() - 1,
                                             kNeverStamp, nullptr, kMapFrom);
    ASSERT_FALSE(too_large.ok());
    EXPECT_EQ(too_large.error().code(), Errc::kCorruptEntry);
    ASSERT_EQ(symlink("large", (dir.path() + "/link").c_str()), 0);
    auto link = read_bytes(real_files(), dir.path(), "link", kMapFrom);
    ASSERT_FALSE(link.ok());
    EXPECT_EQ(link.error().code(), Errc::kCorruptEntry);
}

TEST(FileBytes, AFilesThatOnlyReadsNeverMaps) {
    TempDir dir;
    const std::string text = large_text();
    test::write_file(dir.path() + "/large", text);
    test::ForwardingFiles reads_only;  // overrides read(), not read_bytes()
    auto bytes = read_bytes(reads_only, dir.path(), "large", kMapFrom);
    ASSERT_TRUE(bytes.ok() && bytes->has_value());
    EXPECT_FALSE((*bytes)->mapped());
    EXPECT_EQ((*bytes)->view(), text);
}

TEST(FileBytes, MovedBytesKeepTheirMapping) {
    TempDir dir;
    if (!test::maps_files_on(dir.path())) GTEST_SKIP() << "not a local file system kcache maps";
    const std::string text = large_text();
    test::write_file(dir.path() + "/large", text);
    auto bytes = read_bytes(real_files(), dir.path(), "large", kMapFrom);
    ASSERT_TRUE(bytes.ok() && bytes->has_value() && (*bytes)->mapped());
    FileBytes moved(std::move(**bytes));
    EXPECT_TRUE(moved.mapped());
    EXPECT_FALSE((*bytes)->mapped());
    EXPECT_TRUE((*bytes)->view().empty());
    FileBytes assigned(std::string("old"));
    assigned = std::move(moved);
    EXPECT_EQ(assigned.view(), text);
}

}  // namespace
}  // namespace kcache::util
