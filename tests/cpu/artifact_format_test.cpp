// SPDX-License-Identifier: Apache-2.0
// The stored entry format: round trips, and every corruption is caught (flip any byte, cut at any
// length), so that a damaged entry can only ever be a miss.
#include "store/artifact_format.hpp"

#define XXH_INLINE_ALL
#include <gtest/gtest.h>
#include <xxhash.h>

namespace kcache::store {
namespace {

Artifact small_entry() {
    Artifact entry;
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

// Bytes that compress as code does, a few-fold: sixteen symbols in a pseudo-random order.
std::string compressible(std::size_t size) {
    std::string bytes(size, '\0');
    std::uint32_t state = 12345;
    for (char& byte : bytes) {
        state = state * 1103515245u + 12345u;
        byte = static_cast<char>('a' + ((state >> 16) & 15));
    }
    return bytes;
}

TEST(EntryFormat, RoundTripsEveryField) {
    const Artifact entry = small_entry();
    auto decoded = decode(encode(entry));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(*decoded, entry);
}

TEST(EntryFormat, RoundTripsAnEmptyPayloadAndNoKernels) {
    Artifact entry = small_entry();
    entry.payload.clear();
    entry.key.kernel_names.clear();
    auto decoded = decode(encode(entry));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(*decoded, entry);
}

TEST(EntryFormat, PayloadIsRawByDefault) {
    Artifact entry = small_entry();
    entry.payload = std::string(1 << 20, 'a');
    const std::string bytes = encode(entry);
    EXPECT_GT(bytes.size(), 1u << 20);
    EXPECT_NE(bytes.find(entry.payload), std::string::npos);
}

TEST(EntryFormat, ZstdPayloadIsCompressedAndRoundTrips) {
    Artifact entry = small_entry();
    entry.payload = compressible(1 << 20);
    const std::string bytes = encode(entry, Compression::kZstd);
    EXPECT_LT(bytes.size(), entry.payload.size() * 3 / 4);
    auto decoded = decode(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(*decoded, entry);
}

TEST(EntryFormat, EveryFlippedByteOfAZstdEntryIsDetected) {
    const std::string bytes = encode(small_entry(), Compression::kZstd);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        std::string damaged = bytes;
        damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
        ASSERT_FALSE(decode(damaged).ok()) << "flipping byte " << i << " went unnoticed";
    }
}

TEST(EntryFormat, EveryTruncationOfAZstdEntryIsDetected) {
    const std::string bytes = encode(small_entry(), Compression::kZstd);
    for (std::size_t length = 0; length < bytes.size(); ++length) {
        ASSERT_FALSE(decode(std::string_view(bytes).substr(0, length)).ok()) << length;
    }
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

TEST(VerifiedArtifact, RoundTripsEveryFieldInPlace) {
    const Artifact entry = small_entry();
    auto decoded = VerifiedArtifact::decode(encode(entry));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    const VerifiedArtifact& got = **decoded;
    EXPECT_EQ(got.owned(), entry);
    EXPECT_EQ(got.payload(), entry.payload);
    EXPECT_EQ(got.key().toolchain, entry.key.toolchain);
    EXPECT_EQ(got.key().caller_key, "softmax:32");
    EXPECT_EQ(got.key().kernel_names(),
              (std::vector<std::string_view>{"softmax_rows", "softmax_rows_tail"}));
    EXPECT_EQ(got.cost(), entry.payload.size() + entry.key.serialize().size());
}

TEST(VerifiedArtifact, RoundTripsAZstdEntry) {
    Artifact entry = small_entry();
    entry.payload = compressible(1 << 16);
    auto decoded = VerifiedArtifact::decode(encode(entry, Compression::kZstd));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ((*decoded)->owned(), entry);
}

TEST(VerifiedArtifact, EveryFlippedByteIsDetected) {
    for (Compression compression : {Compression::kNone, Compression::kZstd}) {
        const std::string bytes = encode(small_entry(), compression);
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            std::string damaged = bytes;
            damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
            auto decoded = VerifiedArtifact::decode(std::move(damaged));
            ASSERT_FALSE(decoded.ok()) << "flipping byte " << i << " went unnoticed";
            EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
        }
    }
}

TEST(VerifiedArtifact, EveryTruncationIsDetected) {
    for (Compression compression : {Compression::kNone, Compression::kZstd}) {
        const std::string bytes = encode(small_entry(), compression);
        for (std::size_t length = 0; length < bytes.size(); ++length) {
            auto decoded = VerifiedArtifact::decode(bytes.substr(0, length));
            ASSERT_FALSE(decoded.ok()) << "cut at " << length << " bytes went unnoticed";
            EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
        }
    }
}

TEST(KeyMaterialText, RejectsFieldsOutOfOrder) {
    EXPECT_FALSE(KeyMaterial::parse("source-kind: ptx\narch: sm_90\n").ok());
}

constexpr std::string_view kSingleFields =
    "arch: sm_90\nsource-kind: ptx\nsource-hash: ab\noptions: \nnames: \ntoolchain: t\nkey: k\n"
    "param-sizes: \n";

TEST(KeyMaterialText, RejectsAnyOtherFieldAmongOrAfterTheKernels) {
    const std::string text(kSingleFields);
    EXPECT_TRUE(KeyMaterialView::parse(text + "kernel: a\nkernel: b\n").ok());
    EXPECT_FALSE(KeyMaterialView::parse(text + "kernel: a\narch: sm_80\n").ok());
    EXPECT_FALSE(KeyMaterialView::parse(text + "kernel: a\nkernel b\n").ok());
    EXPECT_FALSE(KeyMaterialView::parse(text + "kernel: a\nkernel: b").ok());
    EXPECT_FALSE(KeyMaterialView::parse(text + "arch: sm_80\n").ok());
}

TEST(KeyMaterialText, ViewsSplitTheKernelLines) {
    // The views point into the text, which must outlive them.
    const std::string text = std::string(kSingleFields) + "kernel: a: b\nkernel: c\n";
    auto key = KeyMaterialView::parse(text);
    ASSERT_TRUE(key.ok());
    EXPECT_EQ(key->kernel_names(), (std::vector<std::string_view>{"a: b", "c"}));
    EXPECT_EQ(key->owned().kernel_names, (std::vector<std::string>{"a: b", "c"}));
    EXPECT_EQ(key->toolchain, "t");
    EXPECT_EQ(key->options, "");
}

}  // namespace
}  // namespace kcache::store

namespace kcache::store {
namespace {

// Rewrites a header field and fixes the checksum, as someone able to write the file could, so
// that the size checks themselves are what must catch it.
std::string with_field(std::string bytes, std::size_t offset, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) {
        bytes[offset + static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
    }
    const std::size_t body = bytes.size() - 16;
    const XXH128_hash_t digest = XXH3_128bits(bytes.data(), body);
    for (int i = 0; i < 8; ++i) {
        bytes[body + static_cast<std::size_t>(i)] =
            static_cast<char>((digest.high64 >> (8 * i)) & 0xff);
        bytes[body + 8 + static_cast<std::size_t>(i)] =
            static_cast<char>((digest.low64 >> (8 * i)) & 0xff);
    }
    return bytes;
}

TEST(EntryFormat, ARewrittenFieldWithAFixedChecksumStillDecodesWhenValid) {
    // The helper itself must produce entries that pass the checksum: rewrite a field to the
    // value it already has.
    const std::string bytes = encode(small_entry());
    EXPECT_TRUE(decode(with_field(bytes, 8, kFormatVersion, 2)).ok());
}

TEST(EntryFormat, WrappingLengthsAreRejectedNotTrusted) {
    const std::string bytes = encode(small_entry());
    // key_bytes (offset 12) at its maximum and compressed_bytes (offset 24) chosen so that
    // header + key + compressed wraps around to exactly the body's size.
    const std::uint64_t body = bytes.size() - 16;
    const std::uint64_t wrapped = body - 32 - 0xffffffffull;  // modulo 2^64
    auto decoded = decode(with_field(with_field(bytes, 12, 0xffffffffu, 4), 24, wrapped, 8));
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
}

TEST(EntryFormat, ThePayloadStartsSixteenByteAlignedWhateverTheKeyLength) {
    for (std::size_t length = 1; length <= 48; ++length) {
        Artifact entry = small_entry();
        entry.key.caller_key = std::string(length, 'k');
        const std::string bytes = encode(entry);
        const std::size_t at = bytes.find(entry.payload);
        ASSERT_NE(at, std::string::npos);
        EXPECT_EQ(at % 16, 0u) << "caller key of " << length << " bytes";
        auto decoded = VerifiedArtifact::decode(bytes);
        ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
        EXPECT_EQ((*decoded)->payload(), entry.payload);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>((*decoded)->payload().data()) % 16, 0u);
    }
}

TEST(EntryFormat, NonZeroPaddingIsCorruptEvenWithAValidChecksum) {
    Artifact entry = small_entry();
    entry.key.caller_key = "k";
    // A key length that leaves padding after the key material.
    auto padded = [](const std::string& bytes, const std::string& payload) {
        return bytes[bytes.find(payload) - 1] == '\0';
    };
    while (!padded(encode(entry), entry.payload)) entry.key.caller_key += "k";
    const std::string bytes = encode(entry);
    const std::size_t payload_at = bytes.find(entry.payload);
    ASSERT_GT(payload_at, 0u);
    ASSERT_EQ(bytes[payload_at - 1], '\0') << "no padding to damage";
    auto decoded = decode(with_field(bytes, payload_at - 1, 0x5a, 1));
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
}

TEST(EntryFormat, AZstdFrameClaimingMoreThanItsBytesCanHoldIsRejectedBeforeAllocating) {
    Artifact entry = small_entry();
    entry.payload.assign(std::size_t{16} << 20, '\0');  // 16 MiB of zeros: a frame of ~0.5 KiB
    std::string bytes = encode(entry, Compression::kZstd);
    // A real frame, but one no cubin makes: refused before its 16 MiB are allocated.
    auto whole = decode(bytes);
    ASSERT_FALSE(whole.ok());
    EXPECT_NE(whole.error().message().find("declares more than"), std::string::npos);
    // Cut to its header and first block, the stored size and the checksum fixed: a frame that
    // still says 16 MiB in 24 bytes.
    const std::size_t frame = bytes.find("\x28\xb5\x2f\xfd");
    ASSERT_NE(frame, std::string::npos);
    const std::size_t stored = bytes.size() - 16 - frame;
    bytes.erase(frame + 24, stored - 24);
    auto decoded = decode(with_field(bytes, 24, 24, 8));
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
    EXPECT_NE(decoded.error().message().find("declares more than"), std::string::npos)
        << decoded.error().message();
}

TEST(EntryFormat, AHugeDeclaredPayloadIsRejectedWithoutAllocatingIt) {
    const std::string bytes = encode(small_entry());
    // payload_bytes (offset 16, 8 bytes): 2^40.
    auto decoded = decode(with_field(bytes, 16, 1ull << 40, 8));
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code(), Errc::kCorruptEntry);
}

}  // namespace
}  // namespace kcache::store
