// SPDX-License-Identifier: Apache-2.0
// The caller's-key index: tiny files written atomically, read back strictly, and never allowed to
// fail a store or a lookup.
#include "store/key_index.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "store/disk_cleaner.hpp"
#include "store/key_difference.hpp"
#include "util/log.hpp"

namespace kcache::store {
namespace {

constexpr std::size_t kHexDigits = 32;
constexpr std::size_t kShownKeyBytes = 60;
constexpr std::size_t kShownFingerprintDigits = 12;

}  // namespace

std::optional<KeyRecord> parse_key_record(std::string_view text) {
    if (text.size() < kHexDigits + 2 || text[kHexDigits] != '\n' || text.back() != '\n') {
        return std::nullopt;
    }
    auto fingerprint = parse_fingerprint(text.substr(0, kHexDigits));
    if (!fingerprint) return std::nullopt;
    return KeyRecord{*fingerprint, text.substr(kHexDigits + 1, text.size() - kHexDigits - 2)};
}

std::string format_key_record(const util::Fingerprint& fingerprint, std::string_view caller_key) {
    std::string text = fingerprint.hex();
    text += '\n';
    text += caller_key;
    text += '\n';
    return text;
}

namespace {

std::optional<std::uint64_t> parse_word(std::string_view hex) {
    std::uint64_t value = 0;
    for (const char c : hex) {
        std::uint64_t digit = 0;
        if (c >= '0' && c <= '9') {
            digit = static_cast<std::uint64_t>(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            digit = static_cast<std::uint64_t>(c - 'a') + 10;
        } else {
            return std::nullopt;
        }
        value = (value << 4) | digit;
    }
    return value;
}

}  // namespace

std::optional<util::Fingerprint> parse_fingerprint(std::string_view hex) {
    if (hex.size() != kHexDigits) return std::nullopt;
    const auto high = parse_word(hex.substr(0, kHexDigits / 2));
    const auto low = parse_word(hex.substr(kHexDigits / 2));
    if (!high || !low) return std::nullopt;
    return util::Fingerprint{*high, *low};
}

KeyIndex KeyIndex::at(std::shared_ptr<const CacheDirectory> directory) {
    return KeyIndex(std::move(directory));
}

std::string KeyIndex::relative_path_of(std::string_view caller_key) {
    util::FingerprintBuilder builder;
    const std::string hex = builder.add(caller_key).finish().hex();
    return "keys/" + hex.substr(0, 2) + "/" + hex.substr(2);
}

std::string KeyIndex::path_of(std::string_view caller_key) const {
    return directory_->path_of(relative_path_of(caller_key));
}

void KeyIndex::record(std::string_view caller_key, const util::Fingerprint& fingerprint) {
    if (directory_->read_only()) return;
    const std::string text = format_key_record(fingerprint, caller_key);
    // Unsynced: a record lost in a crash only costs a later miss its explanation, while an
    // fsync would cost every compile a second wait for the disk.
    auto written =
        directory_->write_atomic(relative_path_of(caller_key), text, util::Durability::kUnsynced);
    // Ignored on purpose: the entry itself is stored (or not) regardless, and a missing record
    // only costs a later miss its explanation. Logged so that a broken index is not invisible.
    if (!written && util::log_enabled(util::LogLevel::kInfo)) {
        util::log_line(
            util::LogLevel::kInfo,
            "key index not updated, a later miss may not say why: " + written.error().message());
    }
}

std::optional<util::Fingerprint> KeyIndex::last_stored(std::string_view caller_key) {
    const std::string relative = relative_path_of(caller_key);
    const std::string path = directory_->path_of(relative);
    auto bytes = directory_->read(relative, kMaxSmallFileBytes);
    if (!bytes) {
        util::log_line(util::LogLevel::kInfo, "key index unreadable: " + bytes.error().message());
        return std::nullopt;
    }
    if (!*bytes) return std::nullopt;
    const auto record = parse_key_record(**bytes);
    if (!record) {
        // Records are replaced by rename, so a running reader never sees half of one; a malformed
        // file is damage (or a record a crash left empty: they are not fsynced) and only gets in
        // the way. (Removing it can race with a concurrent record() and
        // take the new file instead; that loses one explanation, nothing more.)
        util::log_line(util::LogLevel::kInfo, path + ": malformed key index record; removed");
        if (directory_->read_only()) return std::nullopt;
        if (auto removed = directory_->remove(relative); !removed) {
            util::log_line(util::LogLevel::kInfo, removed.error().message());
        }
        return std::nullopt;
    }
    if (record->caller_key != caller_key) {
        // Two keys with one XXH3-128: the file is the other key's, valid, and stays.
        util::log_line(util::LogLevel::kInfo, path + ": key index record belongs to another key");
        return std::nullopt;
    }
    return record->fingerprint;
}

std::string explain_miss(KeyIndex& index, const KeyMaterialReader& read_key_material,
                         const KeyMaterial& wanted, const util::Fingerprint& wanted_fingerprint) {
    const auto nearest = index.last_stored(wanted.caller_key);
    if (!nearest || *nearest == wanted_fingerprint) return {};
    std::string line = "nearest entry for key '" + printable(wanted.caller_key, kShownKeyBytes) +
                       "' (" + nearest->hex().substr(0, kShownFingerprintDigits) + "\u2026): ";
    const auto stored = read_key_material(*nearest);
    if (!stored) return line + "its entry is gone";
    const std::string difference = describe_difference(*stored, wanted);
    // Equal material under another fingerprint means the fingerprint covers something the key
    // material does not record; say so rather than nothing.
    return line + (difference.empty() ? "its key material is the same" : difference);
}

std::uint64_t sweep_key_index(const CacheDirectory& directory, bool dry_run,
                              std::chrono::system_clock::time_point now,
                              const std::function<void(const Error&)>& failed) {
    std::uint64_t removed_records = 0;
    auto folders = directory.list("keys");
    if (!folders) return 0;  // no index yet (or a stray, which the cleaner's scan removes)
    for (const auto& folder : *folders) {
        if (!is_entry_folder(folder)) continue;
        auto held = directory.folder("keys/" + folder);
        if (!held) continue;  // a link or a file: never followed
        auto names = held->list();
        if (!names) continue;
        for (const auto& name : *names) {
            if (!is_hex(name) && name.find(".tmp.") == std::string::npos) continue;
            auto status = held->status(name);
            if (!status || !*status || (*status)->kind != util::FileKind::kRegular) continue;
            const bool temporary = name.find(".tmp.") != std::string::npos;
            const auto age = now - (*status)->modified;
            if (age <= (temporary
                            ? std::chrono::duration_cast<std::chrono::hours>(kStaleTemporaryAge)
                            : kStaleIndexRecordAge)) {
                continue;
            }
            if (!dry_run) {
                if (auto removed = held->remove(name); !removed) {
                    failed(removed.error());
                    continue;
                }
            }
            ++removed_records;
        }
    }
    return removed_records;
}

}  // namespace kcache::store
