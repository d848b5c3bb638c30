// The bytes of one stored artifact, the same on disk and (later) in Redis:
//   header (magic, format version, payload kind, compression, lengths)
//   key material (readable "name: value" lines)
//   payload (raw, or zstd)
//   XXH3-128 of everything before it
// Anything that does not decode exactly is corrupt: a bad entry is a miss, never a wrong kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::store {

// 2: the payload may be stored raw. Part of every fingerprint, so that processes of different
// versions sharing a directory use different entries rather than deleting each other's.
inline constexpr std::uint16_t kFormatVersion = 2;

// How the payload is stored. Raw is the disk tier's choice: a warm start is judged against loading
// the cubin from memory, and zstd's decompression alone (15 us for a 10 KiB cubin on the H200
// host, more than a third of the cubin's load) cost more than the target allows. zstd is for
// where bytes cost more than time (a remote tier).
enum class Compression : std::uint8_t { kNone = 0, kZstd = 1 };

enum class PayloadKind : std::uint8_t { kCubin = 1, kFatbin = 2, kPtx = 3 };

// What an artifact was built from, kept readable so that `kcache inspect` can show it and a miss
// can say which part differed from the nearest entry. Values must not contain newlines.
struct KeyMaterial {
    std::string arch;         // "sm_90"
    std::string source_kind;  // "cuda", "ptx", "cubin", "fatbin"
    std::string source_hash;  // XXH3-128 hex of the source bytes and headers
    std::string options;      // normalized compile options
    std::string names;        // CUDA C++ name expressions, sorted, "; "-separated
    std::string toolchain;    // NVRTC, nvJitLink and driver versions, entry format
    std::string caller_key;   // the key the caller looked it up by
    std::vector<std::string> kernel_names;

    std::string serialize() const;
    static Result<KeyMaterial> parse(std::string_view text);
    bool operator==(const KeyMaterial&) const = default;
};

struct StoredEntry {
    PayloadKind kind = PayloadKind::kCubin;
    KeyMaterial key;
    std::string payload;  // uncompressed

    bool operator==(const StoredEntry&) const = default;
};

std::string encode(const StoredEntry& entry, Compression compression = Compression::kNone,
                   int zstd_level = 3);
// kCorruptEntry, saying what was wrong, for anything but an exact, checksummed entry.
Result<StoredEntry> decode(std::string_view bytes);

}  // namespace kcache::store
