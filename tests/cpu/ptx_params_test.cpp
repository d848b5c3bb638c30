// SPDX-License-Identifier: Apache-2.0
// Parameter sizes read from PTX `.entry` declarations; whatever is not read completely is left to
// the driver.
#include "compile/ptx_params.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ptx_kernels.hpp"

namespace kcache::compile {
namespace {

using Sizes = std::vector<std::size_t>;

// The sizes read for `kernel`, or {999} if it was left out.
Sizes sizes_of(const std::string& ptx, const std::string& kernel) {
    for (const auto& [name, sizes] : ptx_param_sizes(ptx)) {
        if (name == kernel) return sizes;
    }
    return {999};
}

TEST(PtxParams, TheExampleKernels) {
    EXPECT_EQ(sizes_of(examples::residual_add_ptx(), "residual_add"), (Sizes{8, 8, 8, 4}));
    EXPECT_EQ(sizes_of(examples::gelu_ptx(), "gelu"), (Sizes{8, 8, 4}));
    EXPECT_EQ(sizes_of(examples::softmax_rows_ptx(32), "softmax_rows"), (Sizes{8, 8, 4}));
    EXPECT_EQ(sizes_of(examples::scale_ptx(), "scale_kernel"), (Sizes{8, 4, 4}));
}

TEST(PtxParams, AnArrayWhoseSizeWouldWrapIsLeftToTheDriver) {
    const std::string ptx =
        ".visible .entry k(.param .b64 p[2305843009213693953], .param .b128 q[4])\n{\n  ret;\n}\n";
    EXPECT_EQ(sizes_of(ptx, "k"), (Sizes{999})) << "8 x (2^61 + 1) wraps to 8";
    const std::string fits = ".visible .entry k(.param .b128 q[4])\n{\n  ret;\n}\n";
    EXPECT_EQ(sizes_of(fits, "k"), (Sizes{64}));
}

TEST(PtxParams, ASizesLineWithATrailingSeparatorDoesNotRead) {
    EXPECT_TRUE(parse_param_sizes_line("a=1;b=2").has_value());
    EXPECT_FALSE(parse_param_sizes_line("a=1;").has_value());
    EXPECT_FALSE(parse_param_sizes_line("a=1;b=2;").has_value());
}

TEST(PtxParams, EveryFundamentalTypeHasItsSize) {
    const std::string ptx =
        ".visible .entry k(\n"
        "  .param .b8 a, .param .u16 b, .param .s32 c, .param .f64 d,\n"
        "  .param .f16 e, .param .bf16x2 f, .param .b128 g, .param .s8 h\n"
        ")\n{\n  ret;\n}\n";
    EXPECT_EQ(sizes_of(ptx, "k"), (Sizes{1, 2, 4, 8, 2, 4, 16, 1}));
}

TEST(PtxParams, ByteArraysPointersAndAlignment) {
    // What NVVM writes for a struct by value and for annotated pointers.
    const std::string ptx =
        ".visible .entry _Z4stepP5Stater(\n"
        "\t.param .align 8 .b8 _Z4stepP5Stater_param_0[24],\n"
        "\t.param .u64 .ptr .global .align 16 _Z4stepP5Stater_param_1,\n"
        "\t.param .u32 .ptr .align 32 _Z4stepP5Stater_param_2,\n"
        "\t.param .align 4 .b8 _Z4stepP5Stater_param_3 [ 12 ]\n"
        ")\n.maxntid 128, 1, 1\n{\n\tret;\n}\n";
    EXPECT_EQ(sizes_of(ptx, "_Z4stepP5Stater"), (Sizes{24, 8, 4, 12}));
}

TEST(PtxParams, NoParameters) {
    EXPECT_EQ(sizes_of(".entry none()\n{\n ret;\n}\n", "none"), Sizes{});
    EXPECT_EQ(sizes_of(".entry bare\n{\n ret;\n}\n", "bare"), Sizes{});
    EXPECT_EQ(sizes_of(".entry spaced ( \n )\n{\n ret;\n}\n", "spaced"), Sizes{});
    EXPECT_EQ(sizes_of(".entry bounded\n.maxntid 128, 1, 1\n{\n ret;\n}\n", "bounded"), Sizes{});
}

TEST(PtxParams, SeveralEntriesEachGetTheirOwn) {
    const std::string ptx =
        ".func (.param .b32 r) helper(.param .b64 x)\n{\n ret;\n}\n"
        ".visible .entry first(.param .u64 p)\n{\n ret;\n}\n"
        ".weak .entry second(.param .u32 a, .param .u32 b)\n{\n ret;\n}\n";
    const PtxParamSizes all = ptx_param_sizes(ptx);
    ASSERT_EQ(all.size(), 2u) << "a .func is no kernel";
    EXPECT_EQ(all[0], (std::pair<std::string, Sizes>{"first", {8}}));
    EXPECT_EQ(all[1], (std::pair<std::string, Sizes>{"second", {4, 4}}));
}

// Anything not understood is left to the driver, never guessed.
TEST(PtxParams, WhatIsNotUnderstoodIsLeftOut) {
    const char* lists[] = {
        "(.param .texref t)",              // opaque
        "(.param .samplerref s)",          // opaque
        "(.param .pred p)",                // not a parameter type
        "(.param .u32)",                   // no name
        "(.param .u32 .u64 twice)",        // two types
        "(.param .b8 a[])",                // no count
        "(.param .b8 a[0])",               // empty
        "(.param .b8 a[x])",               // no number
        "(.reg .u32 r)",                   // not .param
        "(.param .u32 a // why\n)",        // a comment in the list
        "(.param .u32 a,)",                // an empty declaration
        "(.param .u32 a",                  // unclosed
        "(.param .v2 .u32 a)",             // a vector, which kernels cannot take
        "(.param .b8 a[010])",             // octal in PTX, as in C: 8 bytes, not 10
        "(.param .b8 a[0x10])",            // hex
        "(.param .b8 a[16U])",             // suffixed
        " // takes (a)\n(.param .u32 a)",  // a comment before the list
    };
    for (const char* list : lists) {
        const std::string ptx = std::string(".entry k") + list + "\n{\n ret;\n}\n";
        EXPECT_EQ(sizes_of(ptx, "k"), Sizes{999}) << list;
    }
}

TEST(PtxParams, CommentsHideNothingAndFakeNothing) {
    const std::string line =
        "// .entry k(.param .u64 a)\n"
        ".entry k(.param .u32 a)\n{\n ret;\n}\n";
    EXPECT_EQ(sizes_of(line, "k"), Sizes{4});
    const std::string block =
        "/* an old version:\n.entry k(.param .u64 a)\n*/\n"
        ".entry k(.param .u32 a /* n */)\n{\n ret;\n}\n";
    EXPECT_EQ(sizes_of(block, "k"), Sizes{4});
    const std::string only_in_comment = "/* .entry ghost(.param .u32 a) */\n";
    EXPECT_TRUE(ptx_param_sizes(only_in_comment).empty());
}

TEST(PtxParams, AKernelDeclaredTwiceIsLeftOut) {
    const std::string ptx =
        ".entry k(.param .u32 a);\n"
        ".entry k(.param .u64 a)\n{\n ret;\n}\n";
    EXPECT_EQ(sizes_of(ptx, "k"), Sizes{999});
}

// Thousands of kernels in one module: each is read once, and the result is sorted by name.
TEST(PtxParams, ManyKernelsAreReadInOnePassSortedByName) {
    std::string ptx;
    for (int i = 2999; i >= 0; --i) {
        ptx += ".entry k" + std::to_string(i) + "(.param .u32 a, .param .u64 b)\n{\n ret;\n}\n";
    }
    const PtxParamSizes all = ptx_param_sizes(ptx);
    ASSERT_EQ(all.size(), 3000u);
    EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                               [](const auto& a, const auto& b) { return a.first < b.first; }));
    for (const auto& [name, sizes] : all) EXPECT_EQ(sizes, (Sizes{4, 8})) << name;
}

TEST(PtxParams, EntryMustBeAWholeToken) {
    const std::string ptx = ".visible .entrypoint k(.param .u32 a)\n{\n ret;\n}\n";
    EXPECT_TRUE(ptx_param_sizes(ptx).empty());
}

// The line an entry records them in reads back as it was written, kernels without parameters and
// several kernels included; anything else is refused, and the caller reads the PTX instead.
TEST(PtxParams, TheEntrysLineReadsBackAsWritten) {
    const PtxParamSizes sizes = {{"a_kernel", {8, 8, 4}}, {"b", {}}, {"c", {16}}};
    EXPECT_EQ(param_sizes_line(sizes), "a_kernel=8,8,4;b=;c=16");
    EXPECT_EQ(parse_param_sizes_line(param_sizes_line(sizes)), sizes);
    EXPECT_EQ(parse_param_sizes_line(""), PtxParamSizes{});
    EXPECT_EQ(param_sizes_line(ptx_param_sizes(examples::residual_add_ptx())),
              "residual_add=8,8,8,4");
    for (const char* bad : {"a", "=8", "a=8,", "a=,8", "a=0", "a=08", "a=x", "a=8;a=4", "b=8;a=4",
                            "a b=8", "a=8;;b=4", "a=-1"}) {
        EXPECT_FALSE(parse_param_sizes_line(bad)) << bad;
    }
}

}  // namespace
}  // namespace kcache::compile
