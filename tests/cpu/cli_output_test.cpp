// SPDX-License-Identifier: Apache-2.0
// The kcache command's output writer (tools/kcache/output.hpp): text that cannot drive a
// terminal, tables that fit one, and JSON that parses back to the bytes it was given.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

#include "tools/kcache/output.hpp"

namespace kcache::tool {
namespace {

std::string random_bytes(std::mt19937& rng, std::size_t max) {
    std::uniform_int_distribution<std::size_t> length(0, max);
    std::uniform_int_distribution<int> byte(0, 255);
    std::string out(length(rng), '\0');
    for (char& c : out) c = static_cast<char>(byte(rng));
    return out;
}

// What may reach a terminal: no C0 control byte, no DEL, nothing but well-formed UTF-8, and none
// of the C1 controls (U+0080..U+009F) or bidirectional marks escape_text escapes.
void expect_terminal_safe(const std::string& text) {
    for (unsigned char c : text) {
        ASSERT_TRUE(c >= 0x20 && c != 0x7f) << "control byte " << int(c) << " in " << text;
    }
    ASSERT_TRUE(is_utf8(text)) << text;
    for (const char* mark : {"\xc2\x9b", "\xc2\x80", "\xe2\x80\xae", "\xe2\x81\xa6"}) {
        ASSERT_EQ(text.find(mark), std::string::npos) << text;
    }
}

TEST(EscapeText, TerminalEscapesAndOtherControlsAreWrittenAsEscapes) {
    EXPECT_EQ(escape_text("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
    EXPECT_EQ(escape_text("a\nb\tc\rd\x07"), "a\\nb\\tc\\rd\\x07");
    EXPECT_EQ(escape_text("\x7f"), "\\x7f");
    EXPECT_EQ(escape_text("\xc2\x9b"
                          "2J"),
              "\\u009b2J");  // CSI as a UTF-8 character
    EXPECT_EQ(escape_text("\xe2\x80\xae"
                          "txt.exe"),
              "\\u202etxt.exe");  // right-to-left override
    EXPECT_EQ(escape_text("\x9b"
                          "2J"),
              "\\x9b2J");  // CSI as a lone byte: not UTF-8
    EXPECT_EQ(escape_text("caf\xff\xfe"), "caf\\xff\\xfe");
    EXPECT_EQ(escape_text("\xc0\x80"), "\\xc0\\x80");  // an overlong NUL
    EXPECT_EQ(escape_text(std::string("a\0b", 3)), "a\\x00b");
}

TEST(EscapeText, PrintableTextPassesAndTheBackslashReadsOneWay) {
    EXPECT_EQ(escape_text("gemm_tiled:64x64x64"), "gemm_tiled:64x64x64");
    EXPECT_EQ(escape_text("softmax<float, 32>"), "softmax<float, 32>");
    EXPECT_EQ(escape_text("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"),
              "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
    EXPECT_EQ(escape_text("a\\x1b"), "a\\\\x1b");  // not to be read as an escape
}

TEST(EscapeText, AnyBytesComeOutSafeForATerminal) {
    std::mt19937 rng(16);
    for (int i = 0; i < 3000; ++i) expect_terminal_safe(escape_text(random_bytes(rng, 40)));
}

TEST(DisplayWidth, WideCharactersTakeTwoColumnsAndCombiningMarksNone) {
    EXPECT_EQ(display_width("abc"), 3u);
    EXPECT_EQ(display_width("\xe6\x97\xa5\xe6\x9c\xac"), 4u);  // two CJK ideographs
    EXPECT_EQ(display_width("e\xcc\x81"), 1u);                 // e + combining acute
}

TEST(Elide, LongTextKeepsBothEndsWithinTheWidth) {
    EXPECT_EQ(elide("gemm_tiled:64x64x64", 40), "gemm_tiled:64x64x64");
    EXPECT_EQ(elide("gemm_tiled:64x64x64", 11), "gemm...4x64");
    EXPECT_EQ(elide("gemm_tiled:64x64x64", 2), "..");
    EXPECT_EQ(display_width(elide("\xe6\x97\xa5\xe6\x9c\xac\xe6\x97\xa5\xe6\x9c\xac", 7)), 7u);
    std::mt19937 rng(7);
    for (int i = 0; i < 500; ++i) {
        const std::string text = escape_text(random_bytes(rng, 60));
        for (std::size_t width : {0u, 1u, 5u, 12u, 30u}) {
            const std::string cut = elide(text, width);
            EXPECT_LE(display_width(cut), width);
            EXPECT_TRUE(is_utf8(cut));
        }
    }
}

TEST(Table, ColumnsAlignAndCellsAreEscaped) {
    Table table({{"NAME"}, {"SIZE", true}, {"KEY", false, true}});
    table.add_row({"a", "1", "softmax:32"});
    table.add_row({"bbb", "100", "\x1b]0;owned\x07"});
    EXPECT_EQ(table.render(0),
              "NAME SIZE KEY\n"
              "a       1 softmax:32\n"
              "bbb   100 \\x1b]0;owned\\x07\n");
}

TEST(Table, AWidthShortensTheElasticColumnsOnly) {
    Table table({{"FINGERPRINT"}, {"KEY", false, true}, {"KERNELS", false, true}});
    const std::string key(70, 'k');
    table.add_row({"0123456789abcdef", key, "softmax_rows, gelu, residual_add"});
    const std::string full = table.render(0);
    EXPECT_NE(full.find(key), std::string::npos);
    const std::string fitted = table.render(60);
    std::istringstream lines(fitted);
    for (std::string line; std::getline(lines, line);) {
        EXPECT_LE(display_width(line), 60u) << line;
        EXPECT_EQ(line.find("0123456789abcdef") == 0 || line.find("FINGERPRINT") == 0, true);
    }
    EXPECT_NE(fitted.find("..."), std::string::npos);
    // Too narrow for even the fixed columns: the elastic ones stop at a few characters.
    EXPECT_NE(table.render(10).find("0123456789abcdef"), std::string::npos);
}

std::string printed(const Json& document) {
    char* buffer = nullptr;
    std::size_t size = 0;
    std::FILE* stream = open_memstream(&buffer, &size);
    print_json(document, stream);
    std::fclose(stream);
    std::string text(buffer, size);
    std::free(buffer);
    return text;
}

std::string unbase64(const std::string& text) {
    static const std::string kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::uint32_t group = 0;
    int bits = 0;
    for (char c : text) {
        if (c == '=') break;
        group = (group << 6) | static_cast<std::uint32_t>(kAlphabet.find(c));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((group >> bits) & 0xff);
        }
    }
    return out;
}

TEST(Json, DocumentsCarryTheSchemaVersionFirst) {
    Json document = json_document();
    document["entries"] = Json::array();
    const std::string text = printed(document);
    EXPECT_EQ(text.find("\"schema_version\": 1"), 4u) << text;
    EXPECT_EQ(Json::parse(text)["schema_version"], kJsonSchemaVersion);
}

TEST(Json, UnicodeTextIsKeptAsTextAndNeedsNoExtraField) {
    Json document = json_document();
    put_bytes(document, "key", "caf\xc3\xa9 \x1b[31m");
    const Json back = Json::parse(printed(document));
    EXPECT_EQ(back["key"], "caf\xc3\xa9 \x1b[31m");
    EXPECT_FALSE(back.contains("key_base64"));
}

TEST(Json, BytesThatAreNotUtf8ParseBackExactlyFromTheirBase64) {
    Json document = json_document();
    const std::string key = "caf\xff\xfe\x1b[0m\xc0\x80";
    put_bytes(document, "key", key);
    put_byte_list(document, "kernels", {"ok", "bad\x9b"});
    const std::string text = printed(document);
    for (unsigned char c : text) ASSERT_TRUE(c < 0x80) << "not ASCII: " << text;
    const Json back = Json::parse(text);
    EXPECT_EQ(back["key"], "caf\xef\xbf\xbd\xef\xbf\xbd\x1b[0m\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(unbase64(back["key_base64"]), key);
    ASSERT_EQ(back["kernels_base64"].size(), 2u);
    EXPECT_EQ(unbase64(back["kernels_base64"][1]), "bad\x9b");
    EXPECT_EQ(back["kernels"][0], "ok");
}

TEST(Json, AnyBytesMakeValidJsonThatGivesThemBack) {
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        const std::string bytes = random_bytes(rng, 24);
        Json document = json_document();
        put_bytes(document, "path", bytes);
        const Json back = Json::parse(printed(document));  // throws, failing the test, if invalid
        const std::string exact = back.contains("path_base64") ? unbase64(back["path_base64"])
                                                               : std::string(back["path"]);
        ASSERT_EQ(exact, bytes);
        ASSERT_EQ(back.contains("path_base64"), !is_utf8(bytes));
    }
}

TEST(Json, Utf8IsCheckedStrictly) {
    EXPECT_TRUE(is_utf8(""));
    EXPECT_TRUE(is_utf8("\xf0\x9f\x98\x80"));   // U+1F600
    EXPECT_FALSE(is_utf8("\xc0\x80"));          // overlong
    EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // a surrogate
    EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
    EXPECT_FALSE(is_utf8("\xe2\x82"));          // cut short
    EXPECT_EQ(base64("f"), "Zg==");
    EXPECT_EQ(base64("fo"), "Zm8=");
    EXPECT_EQ(base64("foo"), "Zm9v");
}

}  // namespace
}  // namespace kcache::tool
