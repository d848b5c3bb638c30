// SPDX-License-Identifier: Apache-2.0
// The bytes of one stored artifact, the same on disk and (later) in Redis:
//   header (magic, format version, payload kind, compression, lengths)
//   key material (readable "name: value" lines), zero bytes up to a 16-byte boundary
//   payload (raw, or zstd)
//   XXH3-128 of everything before it
// Anything that does not decode exactly is corrupt: a bad entry is a miss, never a wrong kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "util/file_bytes.hpp"

namespace kcache::store {

// 2: the payload may be stored raw. 3: the payload starts 16-byte aligned (zero padding after the
// key material). 4: the key material has a param-sizes line. Part of every fingerprint, so that
// processes of different versions sharing a directory use different entries rather than deleting
// each other's.
inline constexpr std::uint16_t kFormatVersion = 4;

// How the payload is stored. Raw is the disk tier's choice: a warm start is judged against loading
// the cubin from memory, and zstd's decompression alone costs more than the target allows
// (docs/performance.md). zstd is for where bytes cost more than time (a remote tier).
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
    // Not part of the key but read from the source when it was compiled: a PTX module's kernels'
    // parameter sizes (compile::param_sizes_line), so that a hit need not read its source again.
    std::string param_sizes;
    std::vector<std::string> kernel_names;

    std::string serialize() const;
    static Result<KeyMaterial> parse(std::string_view text);
    bool operator==(const KeyMaterial&) const = default;
};

struct Artifact {
    PayloadKind kind = PayloadKind::kCubin;
    KeyMaterial key;
    std::string payload;  // uncompressed

    bool operator==(const Artifact&) const = default;
};

// Key material as views into the bytes of a decoded entry (see VerifiedArtifact): a hit compares it
// with what it wants without building a string per field.
struct KeyMaterialView {
    std::string_view arch, source_kind, source_hash, options, names, toolchain, caller_key,
        param_sizes;
    // The "kernel: <name>\n" lines, each checked when the entry was decoded.
    std::string_view kernel_lines;

    std::vector<std::string_view> kernel_names() const;
    KeyMaterial owned() const;
    // The checks of KeyMaterial::parse, which is this plus owned().
    static Result<KeyMaterialView> parse(std::string_view text);
};

// An entry decoded in place: its key material and (raw) payload are views into the bytes it was
// read from, which it keeps. The tiers hand it around shared, so that a disk hit reaches the
// memory tier and the caller without a copy of its payload, and a memory hit copies nothing.
// Neither copyable nor movable: the views point into the entry itself.
class VerifiedArtifact {
    struct Private {
        explicit Private() = default;
    };

public:
    // The checks of decode(); `bytes` (a file's, moved in, read or mapped) become the entry's own.
    static Result<std::shared_ptr<const VerifiedArtifact>> decode(util::FileBytes bytes);
    static Result<std::shared_ptr<const VerifiedArtifact>> decode(std::string bytes) {
        return decode(util::FileBytes(std::move(bytes)));
    }
    // An entry made in this process (a compile's), encoded raw and decoded like one read back.
    static std::shared_ptr<const VerifiedArtifact> of(const Artifact& entry);

    // Public for make_shared; only decode() can name a Private.
    explicit VerifiedArtifact(Private) {}
    // Hands its bytes, when read rather than mapped, to this thread's spare buffer
    // (util/spare_buffer.hpp) for the next read.
    ~VerifiedArtifact();
    VerifiedArtifact(const VerifiedArtifact&) = delete;
    VerifiedArtifact& operator=(const VerifiedArtifact&) = delete;

    PayloadKind kind() const noexcept { return kind_; }
    const KeyMaterialView& key() const noexcept { return key_; }
    std::string_view payload() const noexcept { return payload_; }  // uncompressed
    // The entry's bytes as read (or encoded): what a tier that copies it writes.
    std::string_view encoded() const noexcept { return bytes_.view(); }
    // Its payload and key material text: what the memory tier's budget counts (as it did for a
    // Artifact; a zstd entry's compressed bytes, also kept, are not counted).
    std::size_t cost() const noexcept { return payload_.size() + key_text_bytes_; }
    Artifact owned() const;

private:
    util::FileBytes bytes_;  // the encoded entry, which the views point into
    std::string inflated_;   // a zstd payload, decompressed; empty for a raw one
    PayloadKind kind_ = PayloadKind::kCubin;
    KeyMaterialView key_;
    std::string_view payload_;  // into bytes_ (raw) or inflated_ (zstd)
    std::size_t key_text_bytes_ = 0;
};

std::string encode(const Artifact& entry, Compression compression = Compression::kNone,
                   int zstd_level = 3);
// kCorruptEntry, saying what was wrong, for anything but an exact, checksummed entry.
Result<Artifact> decode(std::string_view bytes);

}  // namespace kcache::store
