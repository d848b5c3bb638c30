// util::elf_build_id: the exact build of a compiler library, read from its file without loading it.
#include "util/elf_build_id.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "driver/compiler_api.hpp"
#include "test_support.hpp"

namespace kcache::util {
namespace {

std::string self_path() {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

TEST(ElfBuildId, ThisTestBinaryHasOne) {
    // Debian's toolchain links with --build-id (SHA-1: 20 bytes, 40 hex digits).
    auto id = elf_build_id(self_path());
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(id->size(), 40u);
    EXPECT_EQ(id->find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(ElfBuildId, AMissingFileHasNone) {
    EXPECT_FALSE(elf_build_id("/no/such/library.so").has_value());
}

TEST(ElfBuildId, ANonElfFileHasNone) {
    test::TempDir dir;
    const std::string path = dir.path() + "/text.so";
    std::ofstream(path) << "not an ELF file at all, just some text that is long enough";
    EXPECT_FALSE(elf_build_id(path).has_value());
}

TEST(ElfBuildId, ATruncatedElfFileHasNone) {
    std::ifstream in(self_path(), std::ios::binary);
    std::string head(256, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    test::TempDir dir;
    const std::string path = dir.path() + "/truncated.so";
    std::ofstream(path, std::ios::binary) << head.substr(0, 100);
    EXPECT_FALSE(elf_build_id(path).has_value());
}

TEST(CompilerIdentity, NamesTheFileThatIsThenLoadedWithoutLoadingIt) {
    const auto& identity = driver::nvjitlink_identity();
    if (!identity.ok()) GTEST_SKIP() << identity.error().describe();
    EXPECT_FALSE(identity->path.empty());
    EXPECT_EQ(identity->build.rfind("build-id ", 0), 0u) << identity->build;
    const auto& api = driver::nvjitlink_api();
    ASSERT_TRUE(api.ok()) << api.error().describe();
    EXPECT_EQ((*api)->library_path, identity->path);
}

TEST(CompilerIdentity, NvrtcHasABuildIdToo) {
    const auto& identity = driver::nvrtc_identity();
    if (!identity.ok()) GTEST_SKIP() << identity.error().describe();
    EXPECT_EQ(identity->build.rfind("build-id ", 0), 0u) << identity->build;
    EXPECT_EQ(identity->build, "build-id " + *elf_build_id(identity->path));
}

}  // namespace
}  // namespace kcache::util
