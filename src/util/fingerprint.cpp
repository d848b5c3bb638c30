// SPDX-License-Identifier: Apache-2.0
// XXH3 is compiled inline (XXH_INLINE_ALL) so that kcache carries no run-time libxxhash
// dependency onto machines that only have the CUDA driver. Bulk hashing goes through the
// variant this CPU runs best (xxh3_kernels.hpp); the short keys of the hit path stay here.
#include "util/fingerprint.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace kcache::util {

std::string Fingerprint::hex() const {
    // By hand rather than snprintf: every disk lookup names its file by this (a warm start's
    // profile showed the formatting).
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text(32, '0');
    for (int i = 0; i < 16; ++i) {
        text[static_cast<std::size_t>(15 - i)] = kDigits[(high >> (4 * i)) & 15];
        text[static_cast<std::size_t>(31 - i)] = kDigits[(low >> (4 * i)) & 15];
    }
    return text;
}

FingerprintBuilder::FingerprintBuilder()
    : kernels_(&xxh3::kernels()), state_(kernels_->create_state()) {
    kernels_->reset(state_);
}

FingerprintBuilder::~FingerprintBuilder() {
    kernels_->free_state(state_);
}

FingerprintBuilder& FingerprintBuilder::add(std::string_view field) {
    add(static_cast<std::uint64_t>(field.size()));
    kernels_->update(state_, field.data(), field.size());
    return *this;
}

FingerprintBuilder& FingerprintBuilder::add(std::uint64_t field) {
    kernels_->update(state_, &field, sizeof field);
    return *this;
}

Fingerprint FingerprintBuilder::finish() const {
    const xxh3::Hash128 digest = kernels_->digest(state_);
    return {digest.high, digest.low};
}

Fingerprint bytes_hash(std::string_view bytes) {
    const xxh3::Hash128 digest = xxh3::kernels().hash128(bytes.data(), bytes.size());
    return {digest.high, digest.low};
}

std::uint64_t hash_key(std::string_view key, int arch) noexcept {
    return XXH3_64bits_withSeed(key.data(), key.size(), static_cast<XXH64_hash_t>(arch));
}

}  // namespace kcache::util
