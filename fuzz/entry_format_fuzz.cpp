// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the stored entry decoder (store::decode and store::VerifiedArtifact::decode), which
// reads bytes from the disk tier and, later, a remote one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "store/artifact_format.hpp"
#include "util/xxh3_kernels.hpp"

namespace {

using kcache::Errc;
using namespace kcache::store;

constexpr std::size_t kCompressionOffset = 11;  // magic (8), version (2), kind (1)
constexpr std::size_t kChecksumBytes = 16;

void check_entry(std::string_view bytes) {
    auto owned = decode(bytes);
    auto in_place = VerifiedArtifact::decode(std::string(bytes));
    // One set of checks behind both: they must agree on every input.
    KCACHE_FUZZ_CHECK(owned.ok() == in_place.ok());
    if (!owned) {
        KCACHE_FUZZ_CHECK(owned.error().code() == Errc::kCorruptEntry);
        KCACHE_FUZZ_CHECK(in_place.error().code() == Errc::kCorruptEntry);
        return;
    }
    const VerifiedArtifact& entry = **in_place;
    KCACHE_FUZZ_CHECK(entry.owned() == *owned);
    KCACHE_FUZZ_CHECK(entry.key().kernel_names().size() == owned->key.kernel_names.size());
    KCACHE_FUZZ_CHECK(entry.cost() >= entry.payload().size());

    const bool raw = bytes[kCompressionOffset] == static_cast<char>(Compression::kNone);
    if (raw) {
        // Nothing in a raw entry is free: encoding what was decoded gives the same bytes.
        KCACHE_FUZZ_CHECK(encode(*owned) == bytes);
    } else {
        // zstd may compress differently; what it compresses must decode to the same entry.
        auto again = decode(encode(*owned, Compression::kZstd));
        KCACHE_FUZZ_CHECK(again.ok() && *again == *owned);
    }
    auto made = VerifiedArtifact::of(*owned);
    KCACHE_FUZZ_CHECK(made != nullptr && made->owned() == *owned);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_entry(bytes);
    // Almost every mutation breaks the checksum, which is checked first. The same bytes with a
    // correct checksum reach the header and key material checks, as a writer of the file could.
    if (size >= kChecksumBytes) {
        std::string fixed(bytes);
        const std::size_t body = size - kChecksumBytes;
        const auto digest = kcache::util::xxh3::kernels().hash128(fixed.data(), body);
        for (std::size_t i = 0; i < 8; ++i) {
            fixed[body + i] = static_cast<char>((digest.high >> (8 * i)) & 0xff);
            fixed[body + 8 + i] = static_cast<char>((digest.low >> (8 * i)) & 0xff);
        }
        if (fixed != bytes) check_entry(fixed);
    }
    return 0;
}
