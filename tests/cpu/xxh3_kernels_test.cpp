// SPDX-License-Identifier: Apache-2.0
// The XXH3 variants (baseline and AVX2) give xxhash's own hashes, one-shot and streamed, at every
// length around the algorithm's internal block sizes.
#include <gtest/gtest.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/fingerprint.hpp"
#include "util/xxh3_kernels.hpp"

namespace kcache::util::xxh3 {
namespace {

std::string pattern(std::size_t size) {
    std::string bytes(size, '\0');
    std::uint32_t x = 2463534242u;
    for (auto& c : bytes) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        c = static_cast<char>(x);
    }
    return bytes;
}

std::vector<std::size_t> lengths() {
    std::vector<std::size_t> out;
    for (std::size_t n = 0; n <= 300; ++n) out.push_back(n);
    for (std::size_t n : {1023u, 1024u, 1025u, 4095u, 4096u, 4097u, 10936u, 65536u, 100003u}) {
        out.push_back(n);
    }
    return out;
}

bool cpu_has_avx2() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

void expect_reference(const Kernels& kernels, const char* name) {
    for (std::size_t n : lengths()) {
        const std::string bytes = pattern(n);
        const XXH128_hash_t want = XXH3_128bits(bytes.data(), bytes.size());
        const Hash128 got = kernels.hash128(bytes.data(), bytes.size());
        ASSERT_EQ(got.high, want.high64) << name << ", " << n << " bytes";
        ASSERT_EQ(got.low, want.low64) << name << ", " << n << " bytes";
        // Streamed in uneven pieces.
        void* state = kernels.create_state();
        kernels.reset(state);
        for (std::size_t at = 0, piece = 1; at < n; at += piece, piece = piece * 3 + 1) {
            kernels.update(state, bytes.data() + at, std::min(piece, n - at));
        }
        const Hash128 streamed = kernels.digest(state);
        kernels.free_state(state);
        ASSERT_EQ(streamed.high, want.high64) << name << " streamed, " << n << " bytes";
        ASSERT_EQ(streamed.low, want.low64) << name << " streamed, " << n << " bytes";
    }
}

TEST(Xxh3Kernels, BaselineGivesXxhashsOwnHashes) {
    expect_reference(baseline_kernels(), "baseline");
}

TEST(Xxh3Kernels, Avx2GivesXxhashsOwnHashes) {
    if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
    expect_reference(avx2_kernels(), "avx2");
}

TEST(Xxh3Kernels, TheChosenVariantIsTheBestThisCpuRuns) {
    EXPECT_EQ(&kernels(), cpu_has_avx2() ? &avx2_kernels() : &baseline_kernels());
}

// A fingerprint is the same whichever variant computed it: caches are shared across machines.
TEST(Xxh3Kernels, AFingerprintDoesNotDependOnTheVariant) {
    const std::string field = pattern(5000);
    FingerprintBuilder builder;
    builder.add("x").add(field).add(std::uint64_t{7});
    const Fingerprint got = builder.finish();
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    auto add = [&](const void* data, std::size_t size) { XXH3_128bits_update(state, data, size); };
    std::uint64_t size = 1;
    add(&size, sizeof size);
    add("x", 1);
    size = field.size();
    add(&size, sizeof size);
    add(field.data(), field.size());
    std::uint64_t seven = 7;
    add(&seven, sizeof seven);
    const XXH128_hash_t want = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    EXPECT_EQ(got.high, want.high64);
    EXPECT_EQ(got.low, want.low64);
}

}  // namespace
}  // namespace kcache::util::xxh3
