// SPDX-License-Identifier: Apache-2.0
// A PTX module linked alone gets names of its own (build/unique_names.hpp): the rename itself, and
// a cache whose modules name their kernels alike, compiled by the real nvJitLink and loaded into
// the fake driver, which finds their kernels by the names their code gives them.
#include "build/unique_names.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "build/fingerprints.hpp"
#include "host_compile_test.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"

namespace kcache {
namespace {

// The kernels of the fake's live libraries whose names start with `prefix`, each once (the fake
// finds a real cubin's kernels by its sections, several of which name each kernel).
std::set<std::string> kernels_named(const fakes::FakeDriver& fake, const std::string& prefix) {
    std::set<std::string> names;
    for (auto& name : fake.kernel_names()) {
        if (name.starts_with(prefix)) names.insert(std::move(name));
    }
    return names;
}

constexpr const char* kModule =
    ".version 7.8\n.target sm_70\n.address_size 64\n\n"
    ".visible .global .align 4 .f32 offset;\n\n"
    ".func (.reg .f32 %out) twice(.reg .f32 %in)\n{\n    add.f32 %out, %in, %in;\n    ret;\n}\n\n"
    ".visible .entry add_offset(.param .u64 out)\n{\n"
    "    .reg .f32 %f<3>;\n    .reg .b64 %rd<3>;\n"
    "    ld.param.u64 %rd1, [out];\n    ld.global.f32 %f1, [offset];\n"
    "    call (%f2), twice, (%f1);\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n    st.global.f32 [%rd2], %f2;\n    ret;\n}\n";

TEST(UniqueNamesTest, EveryNameTheModuleDefinesEndsInTheSuffixWhereDefinedAndWhereUsed) {
    const auto renamed = build::with_unique_names(kModule, 42);
    ASSERT_TRUE(renamed.has_value());
    EXPECT_EQ(build::unique_names_suffix(42), "$ku42");
    for (const char* name : {"offset", "twice", "add_offset"}) {
        const std::string suffixed = std::string(name) + "$ku42";
        std::size_t uses = 0;
        for (std::size_t at = renamed->find(name); at != std::string::npos;
             at = renamed->find(name, at + 1)) {
            // Each whole-name occurrence is the suffixed one ("add_offset" holds "offset").
            const bool starts_a_name =
                at == 0 || !(std::isalnum(static_cast<unsigned char>((*renamed)[at - 1])) ||
                             (*renamed)[at - 1] == '_');
            if (!starts_a_name) continue;
            EXPECT_EQ(renamed->compare(at, suffixed.size(), suffixed), 0)
                << name << " unrenamed at " << at << " in\n"
                << *renamed;
            ++uses;
        }
        EXPECT_GE(uses, std::string(name) == "add_offset" ? 1u : 2u) << name;  // defined, used
    }
}

TEST(UniqueNamesTest, AModuleWhoseNamesAlreadyHoldTheMarkerOrDoNotReadIsLeftAsItIs) {
    std::string marked = kModule;
    marked.replace(marked.find("twice"), 5, "twice$ku7");
    EXPECT_FALSE(build::with_unique_names(marked, 42).has_value());
    EXPECT_FALSE(
        build::with_unique_names(".version 7.8\n.target sm_70\n.unknown_directive x;\n", 42)
            .has_value());
}

TEST(UniqueNamesTest, TheNumberIsTheSourceHashsAndDiffersWithIt) {
    const auto first = build::source_hash(Source::ptx(kModule), util::bytes_hash(kModule));
    const std::string other = std::string(kModule) + "\n";
    const auto second = build::source_hash(Source::ptx(other), util::bytes_hash(other));
    EXPECT_EQ(build::unique_names_number(first), build::unique_names_number(first));
    EXPECT_NE(build::unique_names_number(first), build::unique_names_number(second));
    EXPECT_LT(build::unique_names_number(first), std::size_t{1} << 48);
}

class UniqueNamesCacheTest : public test::HostCompileTest {};

TEST_F(UniqueNamesCacheTest, TwoSourcesThatNameTheirKernelAlikeLoadUnderNamesOfTheirOwn) {
    const std::string one = examples::softmax_rows_ptx(1000);
    const std::string two = examples::softmax_rows_ptx(1001);
    std::set<std::string> names;
    {
        KernelCache cache(options());
        auto first = cache.kernel(
            "softmax:1000", [&] { return Source::ptx(one); }, "softmax_rows");
        auto second = cache.kernel(
            "softmax:1001", [&] { return Source::ptx(two); }, "softmax_rows");
        ASSERT_TRUE(first.ok()) << first.error().describe();
        ASSERT_TRUE(second.ok()) << second.error().describe();
        names = kernels_named(*fake_, "softmax_rows");
        EXPECT_EQ(names.size(), 2u);  // one name each
        for (const auto& name : names) EXPECT_TRUE(name.starts_with("softmax_rows$ku")) << name;
    }
    // A new cache on the same directory (a new process) finds one on the disk, as renamed, and
    // asks for it by the caller's name.
    KernelCache again(options());
    auto found = again.kernel(
        "softmax:1001", [&] { return Source::ptx(two); }, "softmax_rows");
    ASSERT_TRUE(found.ok()) << found.error().describe();
    EXPECT_EQ(again.stats().compiles, 0u);
    const std::set<std::string> loaded = kernels_named(*fake_, "softmax_rows");
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_TRUE(names.contains(*loaded.begin())) << *loaded.begin();
}

TEST_F(UniqueNamesCacheTest, AModuleThatCouldNotBeRenamedIsAskedForByItsOwnNames) {
    // A name that holds the marker already: linked as it is.
    std::string ptx = examples::softmax_rows_ptx(1000);
    ptx.replace(ptx.find("softmax_rows("), 12, "softmax_rows$ku9");
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "odd", [&] { return Source::ptx(ptx); }, "softmax_rows$ku9");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(kernels_named(*fake_, "softmax_rows"), std::set<std::string>{"softmax_rows$ku9"});
}

}  // namespace
}  // namespace kcache
