// SPDX-License-Identifier: Apache-2.0
// Content fingerprints: XXH3-128 over everything that determines a compiled kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/xxh3_kernels.hpp"

namespace kcache::util {

struct Fingerprint {
    std::uint64_t high = 0;
    std::uint64_t low = 0;

    bool operator==(const Fingerprint&) const = default;
    // 32 lowercase hex digits, high word first.
    std::string hex() const;
};

// Incremental XXH3-128. Each field is length-prefixed so that ("ab","c") and ("a","bc") differ.
class FingerprintBuilder {
public:
    FingerprintBuilder();
    ~FingerprintBuilder();
    FingerprintBuilder(const FingerprintBuilder&) = delete;
    FingerprintBuilder& operator=(const FingerprintBuilder&) = delete;

    FingerprintBuilder& add(std::string_view field);
    FingerprintBuilder& add(std::uint64_t field);
    Fingerprint finish() const;

private:
    const xxh3::Kernels* kernels_;
    void* state_;  // XXH3_state_t, kept opaque so xxhash.h stays out of this header
};

// XXH3-128 of bytes alone: a large source's, hashed once per request and taken by every
// fingerprint recipe that covers it (build/fingerprints.hpp), so that it is read once.
Fingerprint bytes_hash(std::string_view bytes);

// 64-bit hash of a caller's key, for the lookup table.
std::uint64_t hash_key(std::string_view key, int arch) noexcept;

}  // namespace kcache::util
