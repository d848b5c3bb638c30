// SPDX-License-Identifier: Apache-2.0
// build::source_digest and util::FingerprintBuilder: what identifies a compiled module.
#include "util/fingerprint.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>

#include "build/fingerprints.hpp"
#include "kcache/source.hpp"
#include "ptx_kernels.hpp"

namespace kcache::util {
namespace {

using build::source_digest;

TEST(Fingerprint, EqualForEqualSourceAndArch) {
    const Source a = Source::ptx(examples::residual_add_ptx());
    const Source b = Source::ptx(examples::residual_add_ptx());
    EXPECT_EQ(source_digest(a, 90), source_digest(b, 90));
}

TEST(Fingerprint, DiffersForDifferentBytes) {
    EXPECT_NE(source_digest(Source::ptx(examples::softmax_rows_ptx(32)), 90),
              source_digest(Source::ptx(examples::softmax_rows_ptx(33)), 90));
}

TEST(Fingerprint, DiffersForOneFlippedByte) {
    std::string text = examples::residual_add_ptx();
    const Fingerprint before = source_digest(Source::ptx(text), 90);
    text[text.size() / 2] ^= 1;
    EXPECT_NE(source_digest(Source::ptx(text), 90), before);
}

TEST(Fingerprint, DiffersForDifferentKind) {
    const std::string bytes = examples::residual_add_ptx();
    EXPECT_NE(source_digest(Source::ptx(bytes), 90), source_digest(Source::fatbin(bytes), 90));
}

TEST(Fingerprint, DiffersForDifferentArch) {
    const Source source = Source::ptx(examples::residual_add_ptx());
    EXPECT_NE(source_digest(source, 80), source_digest(source, 90));
}

// The bytes are hashed once per request and handed on: the fingerprint from that hash is the one
// computed from the source, and it still tells one flipped byte apart.
TEST(Fingerprint, FromTheBytesHashIsTheSourcesOwn) {
    const Source source = Source::ptx(examples::gelu_ptx());
    EXPECT_EQ(source_digest(source, 90, bytes_hash(source.bytes)), source_digest(source, 90));
    std::string flipped = source.bytes;
    flipped[flipped.size() / 2] ^= 1;
    EXPECT_NE(bytes_hash(flipped), bytes_hash(source.bytes));
    EXPECT_NE(source_digest(source, 90, bytes_hash(flipped)), source_digest(source, 90));
}

TEST(Fingerprint, HexIs32LowercaseHexDigits) {
    const std::string hex = source_digest(Source::ptx(examples::gelu_ptx()), 90).hex();
    ASSERT_EQ(hex.size(), 32u);
    for (char c : hex) {
        EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))
            << "not a lowercase hex digit: '" << c << "' in " << hex;
    }
}

TEST(Fingerprint, HexWritesHighWordFirstZeroPadded) {
    const Fingerprint fingerprint{0x1, 0xabc};
    EXPECT_EQ(fingerprint.hex(),
              "0000000000000001"
              "0000000000000abc");
}

TEST(FingerprintBuilder, FieldBoundariesArePartOfTheHash) {
    FingerprintBuilder ab_c;
    ab_c.add("ab").add("c");
    FingerprintBuilder a_bc;
    a_bc.add("a").add("bc");
    EXPECT_NE(ab_c.finish(), a_bc.finish());
}

TEST(FingerprintBuilder, SameFieldsGiveSameFingerprint) {
    FingerprintBuilder first;
    first.add("key").add(std::uint64_t{90});
    FingerprintBuilder second;
    second.add("key").add(std::uint64_t{90});
    EXPECT_EQ(first.finish(), second.finish());
}

TEST(FingerprintBuilder, EmptyFieldStillCounts) {
    FingerprintBuilder with_empty;
    with_empty.add("a").add("");
    FingerprintBuilder without;
    without.add("a");
    EXPECT_NE(with_empty.finish(), without.finish());
}

TEST(HashKey, DiffersForDifferentArch) {
    EXPECT_NE(hash_key("softmax:32", 80), hash_key("softmax:32", 90));
}

TEST(HashKey, EqualForEqualKeyAndArch) {
    EXPECT_EQ(hash_key("softmax:32", 90), hash_key(std::string("softmax:") + "32", 90));
}

TEST(Fingerprint, HexIsHighWordThenLowWordZeroPadded) {
    EXPECT_EQ((Fingerprint{0x0123456789abcdefULL, 0x00000000000000ffULL}.hex()),
              "0123456789abcdef00000000000000ff");
}

}  // namespace
}  // namespace kcache::util
