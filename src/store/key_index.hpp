// SPDX-License-Identifier: Apache-2.0
// Which entry was stored last under each caller's key, so that a miss can be compared with its
// nearest entry (usually the same kernel before the user changed its source, options, arch or
// toolchain) and say what differs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store {

// One small file per caller's key: $DIR/keys/ab/cdef..., named by the XXH3-128 of the key (as
// util::FingerprintBuilder computes it), holding the fingerprint's hex on the first line and the
// key itself on the second, so that two keys whose hashes collide are told apart rather than
// mixed up. The disk cleaner only walks two-hex-digit folders of $DIR, so it leaves keys/ alone.
//
// Holds no mutable state: several threads and processes may use it at once. Two processes
// recording the same key race; the last rename wins, and either fingerprint is a fair "last".
class KeyIndex {
public:
    // Creates nothing yet: keys/ appears with the first record(). Records nothing in a
    // read-only directory.
    static KeyIndex at(std::shared_ptr<const CacheDirectory> directory);

    // Remembers `fingerprint` as the entry last stored under `caller_key`. Never fails the
    // caller: the index only makes miss explanations better, so a write that fails is logged and
    // otherwise ignored.
    void record(std::string_view caller_key, const util::Fingerprint& fingerprint);

    // The fingerprint last recorded for `caller_key`; nullopt if none, if the file cannot be read,
    // or if it belongs to another key. A malformed index file is removed.
    std::optional<util::Fingerprint> last_stored(std::string_view caller_key);

    // Where `caller_key`'s record lives: "keys/ab/cdef…" below the cache directory.
    static std::string relative_path_of(std::string_view caller_key);
    std::string path_of(std::string_view caller_key) const;
    const std::string& directory() const noexcept { return directory_->path(); }

private:
    explicit KeyIndex(std::shared_ptr<const CacheDirectory> directory)
        : directory_(std::move(directory)) {}

    std::shared_ptr<const CacheDirectory> directory_;  // records live under keys/
};

// A record's text, "<32 hex digits>\n<caller's key>\n"; the key may itself hold newlines, so it is
// everything between the first newline and the last. nullopt for anything else (the text is
// untrusted: it lives in the cache directory). The key is a view into `text`.
struct KeyRecord {
    util::Fingerprint fingerprint;
    std::string_view caller_key;
};
std::optional<KeyRecord> parse_key_record(std::string_view text);
std::string format_key_record(const util::Fingerprint& fingerprint, std::string_view caller_key);

// The inverse of Fingerprint::hex(): exactly 32 lowercase hex digits, high word first; nullopt for
// anything else. (Here rather than in util/fingerprint so that only the index depends on it.)
std::optional<util::Fingerprint> parse_fingerprint(std::string_view hex);

// Reads the key material of the entry with a given fingerprint; nullopt if it is gone or bad.
using KeyMaterialReader = std::function<std::optional<KeyMaterial>(const util::Fingerprint&)>;

// One line for a miss on `wanted` (whose entry would be `wanted_fingerprint`) comparing it with the
// entry last stored under the same caller's key, such as
//   nearest entry for key 'softmax' (3fa2b1c4d5e6…): options differ (stored "...", now "...")
// or "... : its entry is gone" when that entry no longer reads. Empty when the key has no nearest
// entry or it is the wanted one. Reads a file or two: call it only when the line will be logged.
std::string explain_miss(KeyIndex& index, const KeyMaterialReader& read_key_material,
                         const KeyMaterial& wanted, const util::Fingerprint& wanted_fingerprint);

// The index grows by one small record per caller key and is outside the budgets: a cleanup
// removes records older than kStaleIndexRecordAge and temporaries of writers that died (older
// than kStaleTemporaryAge). Its folders (keys/ab/) are never followed if they are links. Each
// failure goes to `failed`; returns how many were removed (in a dry run, would be).
std::uint64_t sweep_key_index(const CacheDirectory& directory, bool dry_run,
                              std::chrono::system_clock::time_point now,
                              const std::function<void(const Error&)>& failed);

}  // namespace kcache::store
