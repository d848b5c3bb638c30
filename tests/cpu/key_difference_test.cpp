// SPDX-License-Identifier: Apache-2.0
// Naming what differs between two sets of key material: the fields, their order, and one short
// readable line that still shows the part that changed.
#include "store/key_difference.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcache::store {
namespace {

using Names = std::vector<std::string>;

KeyMaterial softmax_material() {
    KeyMaterial key;
    key.arch = "sm_90";
    key.source_kind = "cuda";
    key.source_hash = "3fa2b1c4d5e6f708192a3b4c5d6e7f80";
    key.options = "-O3 -DN=4";
    key.toolchain = "nvrtc 13.0; nvjitlink 13.0; driver 13000; format 1";
    key.caller_key = "softmax";
    key.kernel_names = {"softmax_rows"};
    return key;
}

TEST(KeyDifference, NothingDiffersForEqualMaterial) {
    EXPECT_EQ(differing_fields(softmax_material(), softmax_material()), Names{});
    EXPECT_EQ(describe_difference(softmax_material(), softmax_material()), "");
}

TEST(KeyDifference, OptionsChangeIsNamed) {
    KeyMaterial wanted = softmax_material();
    wanted.options = "-O3 -DN=8";
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{"options"});
    EXPECT_EQ(describe_difference(softmax_material(), wanted),
              "options differ (stored \"-O3 -DN=4\", now \"-O3 -DN=8\")");
}

TEST(KeyDifference, NameExpressionChangeIsNamed) {
    KeyMaterial wanted = softmax_material();
    wanted.names = "fill<float, 64>; fill<int, 8>";
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{"name expressions"});
    EXPECT_NE(describe_difference(softmax_material(), wanted).find("fill<int, 8>"),
              std::string::npos);
}

TEST(KeyDifference, ToolchainChangeIsNamed) {
    KeyMaterial wanted = softmax_material();
    wanted.toolchain = "nvrtc 13.1; nvjitlink 13.1; driver 13010; format 1";
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{"toolchain"});
    EXPECT_EQ(describe_difference(softmax_material(), wanted),
              "toolchain differs (stored \"nvrtc 13.0; nvjitlink 13.0; driver 13000; format 1\", "
              "now \"nvrtc 13.1; nvjitlink 13.1; driver 13010; format 1\")");
}

TEST(KeyDifference, ArchChangeIsNamed) {
    KeyMaterial wanted = softmax_material();
    wanted.arch = "sm_100";
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{"arch"});
    EXPECT_EQ(describe_difference(softmax_material(), wanted),
              "arch differs (stored \"sm_90\", now \"sm_100\")");
}

TEST(KeyDifference, SourceChangeShowsShortenedHashes) {
    KeyMaterial wanted = softmax_material();
    wanted.source_hash = "0011223344556677889900aabbccddee";
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{"source"});
    EXPECT_EQ(describe_difference(softmax_material(), wanted),
              "source differs (stored \"3fa2b1c4d5e6\", now \"001122334455\")");
}

TEST(KeyDifference, SourceHashesSharingTheirFirstDigitsAreShownWhole) {
    KeyMaterial wanted = softmax_material();
    wanted.source_hash = "3fa2b1c4d5e6f708192a3b4c5d6e7f81";  // last digit only
    EXPECT_EQ(describe_difference(softmax_material(), wanted),
              "source differs (stored \"3fa2b1c4d5e6f708192a3b4c5d6e7f80\", "
              "now \"3fa2b1c4d5e6f708192a3b4c5d6e7f81\")");
}

TEST(KeyDifference, SeveralChangesNamedInOrder) {
    KeyMaterial wanted = softmax_material();
    // Changed in the reverse of the reporting order, so that order of change cannot leak through.
    wanted.toolchain = "nvrtc 13.1";
    wanted.options = "-O2";
    wanted.source_kind = "ptx";
    wanted.arch = "sm_80";
    EXPECT_EQ(differing_fields(softmax_material(), wanted),
              (Names{"arch", "source kind", "options", "toolchain"}));
    const std::string line = describe_difference(softmax_material(), wanted);
    const auto arch = line.find("arch differs");
    const auto kind = line.find("; source kind differs (stored \"cuda\", now \"ptx\")");
    const auto options = line.find("; options differ");
    const auto toolchain = line.find("; toolchain differs");
    ASSERT_NE(toolchain, std::string::npos) << line;
    EXPECT_EQ(arch, 0u) << line;
    EXPECT_LT(arch, kind) << line;
    EXPECT_LT(kind, options) << line;
    EXPECT_LT(options, toolchain) << line;
}

TEST(KeyDifference, CallerKeyAndKernelNamesAreIgnored) {
    KeyMaterial wanted = softmax_material();
    wanted.caller_key = "softmax:v2";
    wanted.kernel_names = {"softmax_rows", "softmax_tail"};
    EXPECT_EQ(differing_fields(softmax_material(), wanted), Names{});
    EXPECT_EQ(describe_difference(softmax_material(), wanted), "");
}

TEST(KeyDifference, LongValuesShortened) {
    KeyMaterial stored = softmax_material();
    KeyMaterial wanted = softmax_material();
    stored.options = std::string(2000, 'a');
    wanted.options = std::string(3000, 'b');
    const std::string line = describe_difference(stored, wanted);
    EXPECT_LE(line.size(), 300u) << line;
    EXPECT_NE(line.find("\u2026"), std::string::npos) << line;
    EXPECT_EQ(line.rfind("options differ (stored \"aaaa", 0), 0u) << line;
    EXPECT_NE(line.find("now \"bbbb"), std::string::npos) << line;
}

TEST(KeyDifference, ShortenedValuesStillShowWhereTheyDiffer) {
    // Long option strings of two builds typically share most of their text.
    const std::string head(500, 'h');
    const std::string tail(500, 't');
    KeyMaterial stored = softmax_material();
    KeyMaterial wanted = softmax_material();
    stored.options = head + " -DN=4 " + tail;
    wanted.options = head + " -DN=8 " + tail;
    const std::string line = describe_difference(stored, wanted);
    EXPECT_LE(line.size(), 300u) << line;
    EXPECT_NE(line.find("-DN=4"), std::string::npos) << line;
    EXPECT_NE(line.find("-DN=8"), std::string::npos) << line;
    EXPECT_NE(line.find("stored \"\u2026"), std::string::npos) << line;  // cut at the front too
}

TEST(KeyDifference, AShortValueBesideALongOneIsShownWhole) {
    KeyMaterial stored = softmax_material();
    KeyMaterial wanted = softmax_material();
    stored.options = "-O3";
    wanted.options = "-O3 " + std::string(1000, 'x');
    const std::string line = describe_difference(stored, wanted);
    EXPECT_LE(line.size(), 300u) << line;
    EXPECT_NE(line.find("stored \"-O3\", now \"-O3 xxx"), std::string::npos) << line;
}

TEST(KeyDifference, EveryFieldLongStaysNearOneScreenLine) {
    KeyMaterial stored;
    KeyMaterial wanted;
    for (std::string* value : {&stored.arch, &stored.source_kind, &stored.source_hash,
                               &stored.options, &stored.toolchain}) {
        *value = std::string(1000, 's');
    }
    for (std::string* value : {&wanted.arch, &wanted.source_kind, &wanted.source_hash,
                               &wanted.options, &wanted.toolchain}) {
        *value = std::string(1000, 'w');
    }
    const std::string line = describe_difference(stored, wanted);
    EXPECT_EQ(differing_fields(stored, wanted).size(), 5u);
    // Each value keeps a readable minimum, so the line may run a little over its 300-byte aim.
    EXPECT_LE(line.size(), 450u) << line;
    EXPECT_NE(line.find("toolchain differs"), std::string::npos) << line;
}

TEST(KeyDifference, CutsNeverSplitACharacter) {
    KeyMaterial stored = softmax_material();
    KeyMaterial wanted = softmax_material();
    // Two-byte characters: any cut at an odd byte offset would split one.
    std::string greek;
    for (int i = 0; i < 400; ++i) greek += "\u03bb";
    stored.options = "-x" + greek;
    wanted.options = "-y" + greek;
    const std::string line = describe_difference(stored, wanted);
    // Every "\xce" lead byte of a lambda is followed by its "\xbb" continuation byte.
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\xce') {
            ASSERT_LT(i + 1, line.size());
            ASSERT_EQ(line[i + 1], '\xbb') << "split at byte " << i;
        }
        if (line[i] == '\xbb') {
            ASSERT_GT(i, 0u);
            ASSERT_EQ(line[i - 1], '\xce') << "split at byte " << i;
        }
    }
}

TEST(KeyDifference, ControlCharactersAreEscapedToKeepOneLine) {
    KeyMaterial stored = softmax_material();
    KeyMaterial wanted = softmax_material();
    wanted.options = "-O3\n-DN=8\t\x01";
    const std::string line = describe_difference(stored, wanted);
    EXPECT_EQ(line, "options differ (stored \"-O3 -DN=4\", now \"-O3\\n-DN=8\\t\\x01\")");
}

TEST(KeyDifference, PrintableCutsLongTextWithAnEllipsis) {
    EXPECT_EQ(printable("softmax", 60), "softmax");
    EXPECT_EQ(printable(std::string(100, 'k'), 20), std::string(17, 'k') + "\u2026");
    EXPECT_EQ(printable("a\nb", 60), "a\\nb");
}

}  // namespace
}  // namespace kcache::store
