// SPDX-License-Identifier: Apache-2.0
// The caller's-key index on a real temporary directory: what it remembers, what it refuses to
// believe, and the miss explanation built on it.
#include "store/key_index.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "test_support.hpp"
#include "util/files.hpp"
#include "util/log.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

const util::Fingerprint kFirst{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
const util::Fingerprint kSecond{0x1111111111111111ULL, 0x2222222222222222ULL};

void write_file(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

using test::LogToFile;

TEST(KeyIndex, RecordThenLastStoredReturnsFingerprint) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    index.record("softmax", kFirst);
    EXPECT_EQ(index.last_stored("softmax"), kFirst);
}

TEST(KeyIndex, RecordIsReadableTextUnderKeys) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    index.record("softmax", kFirst);
    const std::string path = index.path_of("softmax");
    EXPECT_EQ(path.rfind(dir.path() + "/keys/", 0), 0u) << path;
    EXPECT_EQ(fs::path(path).parent_path().filename().string().size(), 2u) << path;
    EXPECT_EQ(**util::read_named_file(path, std::uint64_t{1} << 30), kFirst.hex() + "\nsoftmax\n");
}

TEST(KeyIndex, RecordsAreWrittenWithoutWaitingForTheDisk) {
    TempDir dir;
    test::DurabilityLog files;
    KeyIndex index = test::index_at(dir.path(), files);
    index.record("softmax", kFirst);
    ASSERT_EQ(files.writes.count(index.path_of("softmax")), 1u);
    EXPECT_EQ(files.writes.at(index.path_of("softmax")), util::Durability::kUnsynced);
    EXPECT_EQ(index.last_stored("softmax"), kFirst);
}

TEST(KeyIndex, LaterRecordReplacesEarlier) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    index.record("softmax", kFirst);
    index.record("softmax", kSecond);
    EXPECT_EQ(index.last_stored("softmax"), kSecond);
}

TEST(KeyIndex, KeysAreKeptApart) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    index.record("softmax", kFirst);
    index.record("gelu", kSecond);
    EXPECT_EQ(index.last_stored("softmax"), kFirst);
    EXPECT_EQ(index.last_stored("gelu"), kSecond);
}

TEST(KeyIndex, UnknownKeyHasNoEntry) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    EXPECT_EQ(index.last_stored("softmax"), std::nullopt);  // no keys/ folder yet
    index.record("gelu", kFirst);
    EXPECT_EQ(index.last_stored("softmax"), std::nullopt);
}

TEST(KeyIndex, CorruptIndexFileIsNoEntryAndRemoved) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    const std::string path = index.path_of("softmax");
    const std::string good = kFirst.hex() + "\nsoftmax\n";
    const std::string garbages[] = {
        std::string(),
        std::string("not a record"),
        good.substr(0, good.size() - 1),                // cut before its last newline
        good.substr(0, 31) + "\nsoftmax\n",             // a digit short
        "0123456789ABCDEFfedcba9876543210\nsoftmax\n",  // not our lowercase
        "0123456789abcdefgedcba9876543210\nsoftmax\n",  // not hex
    };
    for (const std::string& garbage : garbages) {
        write_file(path, garbage);
        EXPECT_EQ(index.last_stored("softmax"), std::nullopt) << garbage;
        EXPECT_FALSE(fs::exists(path)) << garbage;
    }
}

TEST(KeyIndex, CallerKeyCollisionIsDetected) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    // As if "other" hashed to softmax's file name: a valid record, but for another key.
    const std::string path = index.path_of("softmax");
    write_file(path, kFirst.hex() + "\nother\n");
    EXPECT_EQ(index.last_stored("softmax"), std::nullopt);
    EXPECT_TRUE(fs::exists(path));  // it is the other key's record, not damage
}

TEST(KeyIndex, KeysWithNewlinesAndSlashesWork) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    const std::string odd = "a/b\n../c\n";
    index.record(odd, kFirst);
    index.record("a/b", kSecond);
    index.record("", kSecond);
    EXPECT_EQ(index.last_stored(odd), kFirst);
    EXPECT_EQ(index.last_stored("a/b"), kSecond);
    EXPECT_EQ(index.last_stored("a/b\n"), std::nullopt);
    EXPECT_EQ(index.last_stored(""), kSecond);
    // Nothing was written outside keys/.
    for (const auto& item : fs::recursive_directory_iterator(dir.path())) {
        const std::string path = item.path().string();
        EXPECT_EQ(path.rfind(dir.path() + "/keys", 0), 0u) << path;
    }
}

TEST(KeyIndex, UnwritableDirectoryDoesNotThrow) {
    TempDir dir;
    // A regular file where the index's folder should be: every mkdir under it fails, even for
    // root, whom chmod would not stop.
    write_file(dir.path() + "/keys", "x");
    KeyIndex index = test::index_at(dir.path());
    EXPECT_NO_THROW(index.record("softmax", kFirst));
    EXPECT_EQ(index.last_stored("softmax"), std::nullopt);
}

TEST(KeyIndex, FailedRecordIsLogged) {
    TempDir dir;
    write_file(dir.path() + "/keys", "x");
    KeyIndex index = test::index_at(dir.path());
    LogToFile log(dir.path() + "/kcache.log");
    index.record("softmax", kFirst);
    EXPECT_NE(log.text().find("key index not updated"), std::string::npos) << log.text();
}

TEST(KeyIndex, ParseFingerprintRoundTripsHex) {
    EXPECT_EQ(parse_fingerprint(kFirst.hex()), kFirst);
    EXPECT_EQ(parse_fingerprint(kSecond.hex()), kSecond);
    const util::Fingerprint extremes{~0ULL, 0};
    EXPECT_EQ(parse_fingerprint(extremes.hex()), extremes);
}

TEST(KeyIndex, ParseFingerprintRejectsAnythingButThirtyTwoLowercaseHexDigits) {
    const std::string hex = kFirst.hex();
    EXPECT_EQ(parse_fingerprint(hex.substr(1)), std::nullopt);
    EXPECT_EQ(parse_fingerprint(hex + "0"), std::nullopt);
    EXPECT_EQ(parse_fingerprint(""), std::nullopt);
    EXPECT_EQ(parse_fingerprint("0123456789abcdef0123456789abcdeg"), std::nullopt);
    EXPECT_EQ(parse_fingerprint("0123456789ABCDEF0123456789abcdef"), std::nullopt);
    EXPECT_EQ(parse_fingerprint(" 123456789abcdef0123456789abcdef"), std::nullopt);
}

KeyMaterial softmax_material(const std::string& options) {
    KeyMaterial key;
    key.arch = "sm_90";
    key.source_kind = "cuda";
    key.source_hash = "3fa2b1c4d5e6f708192a3b4c5d6e7f80";
    key.options = options;
    key.toolchain = "nvrtc 13.0";
    key.caller_key = "softmax";
    return key;
}

// Stands in for the disk store: key material by fingerprint, counting reads.
struct StoredMaterial {
    std::map<std::string, KeyMaterial> by_hex;
    int reads = 0;
    KeyMaterialReader reader() {
        return [this](const util::Fingerprint& fingerprint) -> std::optional<KeyMaterial> {
            ++reads;
            auto found = by_hex.find(fingerprint.hex());
            if (found == by_hex.end()) return std::nullopt;
            return found->second;
        };
    }
};

TEST(KeyIndex, ExplainMissNamesTheDifferingPart) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;
    stored.by_hex[kFirst.hex()] = softmax_material("-O3 -DN=4");
    index.record("softmax", kFirst);
    const std::string line =
        explain_miss(index, stored.reader(), softmax_material("-O3 -DN=8"), kSecond);
    EXPECT_EQ(line, "nearest entry for key 'softmax' (" + kFirst.hex().substr(0, 12) +
                        "\u2026): options differ (stored \"-O3 -DN=4\", now \"-O3 -DN=8\")");
}

TEST(KeyIndex, ExplainMissSaysNothingWithoutNearestEntry) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;
    stored.by_hex[kFirst.hex()] = softmax_material("-O3 -DN=4");
    index.record("gelu", kFirst);  // another key's entry is no neighbour
    EXPECT_EQ(explain_miss(index, stored.reader(), softmax_material("-O3 -DN=8"), kSecond), "");
    EXPECT_EQ(stored.reads, 0);
}

TEST(KeyIndex, ExplainMissSaysNothingWhenTheNearestIsTheWantedEntry) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;
    stored.by_hex[kFirst.hex()] = softmax_material("-O3 -DN=4");
    index.record("softmax", kFirst);
    EXPECT_EQ(explain_miss(index, stored.reader(), softmax_material("-O3 -DN=4"), kFirst), "");
}

TEST(KeyIndex, ExplainMissSaysWhenTheNearestEntryIsGone) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;  // holds nothing: evicted, cleared or damaged
    index.record("softmax", kFirst);
    const std::string line =
        explain_miss(index, stored.reader(), softmax_material("-O3 -DN=8"), kSecond);
    EXPECT_EQ(line, "nearest entry for key 'softmax' (" + kFirst.hex().substr(0, 12) +
                        "\u2026): its entry is gone");
    EXPECT_EQ(stored.reads, 1);
}

TEST(KeyIndex, ExplainMissSaysWhenTheMaterialIsTheSame) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;
    stored.by_hex[kFirst.hex()] = softmax_material("-O3");
    index.record("softmax", kFirst);
    const std::string line = explain_miss(index, stored.reader(), softmax_material("-O3"), kSecond);
    EXPECT_NE(line.find("its key material is the same"), std::string::npos) << line;
}

TEST(KeyIndex, ExplainMissKeepsAnOddKeyOnOneLine) {
    TempDir dir;
    KeyIndex index = test::index_at(dir.path());
    StoredMaterial stored;
    KeyMaterial wanted = softmax_material("-O3");
    wanted.caller_key = "soft\nmax";
    stored.by_hex[kFirst.hex()] = softmax_material("-O2");
    index.record(wanted.caller_key, kFirst);
    const std::string line = explain_miss(index, stored.reader(), wanted, kSecond);
    EXPECT_EQ(line.rfind("nearest entry for key 'soft\\nmax' (", 0), 0u) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

}  // namespace
}  // namespace kcache::store
