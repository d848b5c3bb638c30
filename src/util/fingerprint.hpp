// Content fingerprints: XXH3-128 over everything that determines a compiled kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kcache/source.hpp"
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

// XXH3-128 of a source's bytes alone: computed once per request, and taken by both the entry's
// fingerprint and source_fingerprint(), so that a large source is read once, not twice.
Fingerprint bytes_hash(std::string_view bytes);

// What the in-memory cache records for an entry: the kind of source, its bytes (by their
// bytes_hash: `bytes` when the caller has it, else computed here) and the arch it was loaded for.
Fingerprint source_fingerprint(const Source& source, int arch,
                               const std::optional<Fingerprint>& bytes = std::nullopt);

// 64-bit hash of a caller's key, for the lookup table.
std::uint64_t hash_key(std::string_view key, int arch) noexcept;

}  // namespace kcache::util
