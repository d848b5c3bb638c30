// The stored entry format: round trips, and every corruption is caught (flip any byte, cut at any
// length), so that a damaged entry can only ever be a miss.
#include "store/entry_format.hpp"

#include <gtest/gtest.h>

namespace kcache::store {
namespace {

StoredEntry small_entry() {
    StoredEntry entry;
    entry.kind = PayloadKind::kCubin;
    entry.key.arch = "sm_90";
    entry.key.source_kind = "cuda";
    entry.key.source_hash = "0123456789abcdef0123456789abcdef";
    entry.key.options = "-std=c++17 -DN=4";
    entry.key.toolchain = "nvrtc 13.0; driver 13000; format 1";
    entry.key.caller_key = "softmax:32";
    entry.key.kernel_names = {"softmax_rows", "softmax_rows_tail"};
    entry.payload = std::string(
                        "\x7f"
                        "ELF",
                        4) +
                    std::string(200, 'x') + "cubin bytes";
    return entry;
}

TEST(EntryFormat, RoundTripsEveryField) {
    const StoredEntry entry = small_entry();
    auto decoded = decode(encode(entry));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(*decoded, entry);
}

TEST(EntryFormat, RoundTripsAnEmptyPayloadAndNoKernels) {
    StoredEntry entry = small_entry();
    entry.payload.clear();
    entry.key.kernel_names.clear();
    auto decoded = decode(encode(entry));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(*decoded, entry);
}

TEST(EntryFormat, PayloadIsCompressed) {
    StoredEntry entry = small_entry();
    entry.payload = std::string(1 << 20, 'a');
    EXPECT_LT(encode(entry).size(), 10000u);
}

TEST(EntryFormat, KeyMaterialIsReadableText) {
    const std::string bytes = encode(small_entry());
    EXPECT_NE(bytes.find("key: softmax:32\n"), std::string::npos);
    EXPECT_NE(bytes.find("arch: sm_90\n"), std::string::npos);
}

TEST(EntryFormat, EveryFlippedByteIsDetected) {
    const std::string bytes = encode(small_entry());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        std::string damaged = bytes;
        damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
        auto decoded = decode(damaged);
        ASSERT_FALSE(decoded.ok()) << "flipping byte " << i << " went unnoticed";
        EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
    }
}

TEST(EntryFormat, EveryTruncationIsDetected) {
    const std::string bytes = encode(small_entry());
    for (std::size_t length = 0; length < bytes.size(); ++length) {
        auto decoded = decode(std::string_view(bytes).substr(0, length));
        ASSERT_FALSE(decoded.ok()) << "cut at " << length << " bytes went unnoticed";
        EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
    }
}

TEST(EntryFormat, TrailingBytesAreDetected) {
    EXPECT_FALSE(decode(encode(small_entry()) + "x").ok());
}

TEST(KeyMaterialText, RejectsFieldsOutOfOrder) {
    EXPECT_FALSE(KeyMaterial::parse("source-kind: ptx\narch: sm_90\n").ok());
}

}  // namespace
}  // namespace kcache::store
