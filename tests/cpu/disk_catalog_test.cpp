// SPDX-License-Identifier: Apache-2.0
// store::list_entries, find_entry and verify_entries: what `kcache ls`, `inspect` and `verify`
// show of a disk cache directory.
#include "store/disk_catalog.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/disk_store.hpp"
#include "test_support.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;

Artifact entry_for(const std::string& key) {
    Artifact entry;
    entry.key.arch = "sm_90";
    entry.key.source_kind = "ptx";
    entry.key.source_hash = "00112233445566778899aabbccddeeff";
    entry.key.toolchain = "nvJitLink build-id 1234; entry format 2";
    entry.key.caller_key = key;
    entry.key.kernel_names = {"softmax_rows"};
    entry.payload =
        "\x7f"
        "ELF cubin for " +
        key;
    return entry;
}

class DiskCatalogTest : public ::testing::Test {
protected:
    void SetUp() override {
        DiskOptions options;
        options.directory = dir_.path();
        auto opened = DiskStore::open(options);
        ASSERT_TRUE(opened.ok()) << opened.error().describe();
        store_ = std::move(*opened);
    }
    void put(std::uint64_t n, const std::string& key) {
        ASSERT_TRUE(store_->put(util::Fingerprint{n, n}, entry_for(key)).ok());
    }

    test::TempDir dir_;
    std::unique_ptr<DiskStore> store_;
};

TEST_F(DiskCatalogTest, ListsEveryEntryWithItsKeyMaterialSortedByFingerprint) {
    put(0xbb, "softmax:2");
    put(0xaa, "softmax:1");
    auto entries = list_entries(*test::cache_directory(dir_.path()));
    ASSERT_TRUE(entries.ok()) << entries.error().describe();
    ASSERT_EQ(entries->size(), 2u);
    EXPECT_EQ((*entries)[0].fingerprint, (util::Fingerprint{0xaa, 0xaa}.hex()));
    EXPECT_EQ((*entries)[0].key.caller_key, "softmax:1");
    EXPECT_EQ((*entries)[1].key.caller_key, "softmax:2");
    EXPECT_EQ((*entries)[0].key.kernel_names, std::vector<std::string>{"softmax_rows"});
    EXPECT_GT((*entries)[0].size, 0u);
    EXPECT_TRUE((*entries)[0].problem.empty());
}

TEST_F(DiskCatalogTest, CudaCppWithoutNameExpressionsIsListedWithTheCubinsKernels) {
    // A cubin nvcc made of three kernels (extern "C" scale, a template instance, a plain
    // __global__) and a device function, kept as a fuzz seed.
    Artifact entry = entry_for("cuda-file");
    entry.key.source_kind = "cuda";
    entry.key.kernel_names.clear();
    entry.payload =
        test::read_file(std::string(KCACHE_SOURCE_DIR) + "/fuzz/corpus/elf_symbols/cuda_cpp.cubin");
    ASSERT_TRUE(store_->put(util::Fingerprint{1, 1}, entry).ok());
    put(2, "named");  // key material with names: those, not the payload's (not an ELF image)
    auto entries = list_entries(*test::cache_directory(dir_.path()));
    ASSERT_TRUE(entries.ok()) << entries.error().describe();
    ASSERT_EQ(entries->size(), 2u);
    EXPECT_EQ((*entries)[0].kernels,
              (std::vector<std::string>{"_Z4tmplIfEvPT_", "_Z4usesPi", "scale"}));
    EXPECT_EQ((*entries)[1].kernels, std::vector<std::string>{"softmax_rows"});
}

TEST(CubinKernelNames, WhatIsNotACubinHasNone) {
    EXPECT_TRUE(cubin_kernel_names("").empty());
    EXPECT_TRUE(cubin_kernel_names("\x7f"
                                   "ELF but nothing more")
                    .empty());
}

TEST_F(DiskCatalogTest, ForeignFilesAreNotListed) {
    put(0xaa, "softmax:1");
    std::ofstream(dir_.path() + "/kcache.conf") << "max_size = 1G\n";
    fs::create_directories(dir_.path() + "/keys/ab");
    std::ofstream(dir_.path() + "/keys/ab/cd") << "x";
    std::ofstream(store_->path_of(util::Fingerprint{0xaa, 0xaa}) + ".lock");
    auto entries = list_entries(*test::cache_directory(dir_.path()));
    ASSERT_TRUE(entries.ok());
    EXPECT_EQ(entries->size(), 1u);
}

TEST_F(DiskCatalogTest, ABadEntryIsListedWithItsProblem) {
    put(0xaa, "softmax:1");
    std::ofstream(store_->path_of(util::Fingerprint{0xaa, 0xaa}), std::ios::app) << "junk";
    auto entries = list_entries(*test::cache_directory(dir_.path()));
    ASSERT_TRUE(entries.ok());
    ASSERT_EQ(entries->size(), 1u);
    EXPECT_NE((*entries)[0].problem.find("corrupt"), std::string::npos) << (*entries)[0].problem;
}

TEST_F(DiskCatalogTest, FindsAnEntryByAUniquePrefix) {
    put(0xaa00000000000000ull, "a");
    put(0xbb00000000000000ull, "b");
    auto found = find_entry(*test::cache_directory(dir_.path()), "bb00");
    ASSERT_TRUE(found.ok()) << found.error().describe();
    EXPECT_EQ(found->key.caller_key, "b");
}

TEST_F(DiskCatalogTest, AnAmbiguousShortOrUnknownPrefixIsAnError) {
    put(0xaa00000000000000ull, "a");
    put(0xaa00000000000001ull, "b");
    EXPECT_EQ(find_entry(*test::cache_directory(dir_.path()), "aa00").error().code(),
              Errc::kInvalidArgument);
    EXPECT_EQ(find_entry(*test::cache_directory(dir_.path()), "aa").error().code(),
              Errc::kInvalidArgument);
    EXPECT_EQ(find_entry(*test::cache_directory(dir_.path()), "XYZW").error().code(),
              Errc::kInvalidArgument);
    EXPECT_EQ(find_entry(*test::cache_directory(dir_.path()), "cccc").error().code(),
              Errc::kIoError);
}

TEST_F(DiskCatalogTest, VerifyReportsBadEntriesAndRemovesThemOnlyWhenRepairing) {
    put(0xaa, "good");
    put(0xbb, "bad");
    const std::string bad = store_->path_of(util::Fingerprint{0xbb, 0xbb});
    {
        std::fstream file(bad, std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(40);
        file.put('!');
    }
    auto report = verify_entries(*test::cache_directory(dir_.path()), false);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->checked, 2u);
    EXPECT_EQ(report->bad, 1u);
    EXPECT_EQ(report->removed, 0u);
    ASSERT_EQ(report->problems.size(), 1u);
    EXPECT_NE(report->problems[0].find(bad), std::string::npos);
    EXPECT_TRUE(fs::exists(bad));

    auto repaired = verify_entries(*test::cache_directory(dir_.path()), true);
    ASSERT_TRUE(repaired.ok());
    EXPECT_EQ(repaired->removed, 1u);
    EXPECT_FALSE(fs::exists(bad));
    EXPECT_TRUE(fs::exists(store_->path_of(util::Fingerprint{0xaa, 0xaa})));
}

TEST_F(DiskCatalogTest, VerifyTellsOfEachEntryBeforeReadingIt) {
    put(0xbb, "b");
    put(0xaa, "a");
    std::vector<std::string> told;
    auto report =
        verify_entries(*test::cache_directory(dir_.path()), false,
                       [&](const std::string& path, std::size_t index, std::size_t total) {
                           EXPECT_EQ(index, told.size());
                           EXPECT_EQ(total, 2u);
                           told.push_back(path);
                       });
    ASSERT_TRUE(report.ok()) << report.error().describe();
    ASSERT_EQ(told.size(), 2u);
    const std::string aa = util::Fingerprint{0xaa, 0xaa}.hex();
    EXPECT_EQ(told[0], dir_.path() + "/" + aa.substr(0, 2) + "/" + aa.substr(2) + ".kc");
}

TEST_F(DiskCatalogTest, AMissingDirectoryIsAnError) {
    // A directory that is not there is not accepted, so nothing can be listed in it.
    EXPECT_FALSE(
        CacheDirectory::open(dir_.path() + "/nope", DirectoryPolicy{false, false, false}).ok());
}

}  // namespace
}  // namespace kcache::store
