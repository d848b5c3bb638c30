// SPDX-License-Identifier: Apache-2.0
// Signed remote values: the trailer's format to the byte (against values OpenSSL's own tool and
// Python's hmac made), what a verifier says of unsigned, forged, replayed and unknown-key values,
// key rotation, the trailer parser on malformed input, and the key files: who may read them,
// what each loader accepts, and keygen that never overwrites.
#include "store/remote/signature.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace kcache::store::remote {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr util::Fingerprint kFingerprint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
constexpr util::Fingerprint kOtherFingerprint{0x0123456789abcdefULL, 0xfedcba9876543211ULL};
const std::string kEntry = "entry bytes";

// A key pair as `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` wrote it.
constexpr const char* kOpensslPrivate =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEINjC60fGHgWDkVMIziUJNQjH1HWkeqD+YluO+Ef2gvcG\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kOpensslPublic =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEAuNqxPwm4be/CnxUUnTbUz0qr5oVkqr9+7h+Zg4RIIjU=\n"
    "-----END PUBLIC KEY-----\n";
// The first 8 bytes of SHA-256 of that public key's raw 32 bytes (Python's hashlib).
constexpr const char* kOpensslKeyId = "25cccee21cf6ff42";
// `openssl pkeyutl -sign -rawin` over the documented message for kFingerprint and kEntry.
constexpr const char* kOpensslSignature =
    "4ce459774e6216be551bcaf44b9fa3a92c05d971deeae945b3a3844f432dd2b8"
    "658ca077ffa7fec34597722e0afb9d12555ff046913788a888045c0ee9929d08";
// An HMAC secret of the bytes 0..31, its key id and its MAC of the same message (Python's hmac).
constexpr const char* kHmacSecretFile =
    "kcache-hmac-sha256 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
constexpr const char* kHmacKeyId = "630dcd2966c43366";
constexpr const char* kHmacSignature =
    "7c6a445646afc1061d2bd4fa791ccaa1d2dec4ba8281c59cdc41c41ad06c65f8";
// An Ed448 private key: PKCS#8 like an Ed25519 one, of the wrong algorithm.
constexpr const char* kEd448Private =
    "-----BEGIN PRIVATE KEY-----\n"
    "MEcCAQAwBQYDK2VxBDsEOUXnduVULTe+fH/RB6hZq1XTsEL/nkyzoVOarsez0xw8\n"
    "jCEGzsq0484c+4qaYC8YtJFv2PwASokRfA==\n"
    "-----END PRIVATE KEY-----\n";

std::string hex(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (const char c : bytes) {
        out.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
        out.push_back(kDigits[static_cast<unsigned char>(c) & 0xf]);
    }
    return out;
}

void write_with_mode(const std::string& path, const std::string& bytes, mode_t mode) {
    test::write_file(path, bytes);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

mode_t mode_of(const std::string& path) {
    struct stat status {};
    EXPECT_EQ(::lstat(path.c_str(), &status), 0);
    return status.st_mode & 07777;
}

// The key files of one test: made by kcache's keygen unless a test writes its own.
class SignatureTest : public ::testing::Test {
protected:
    std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

    // A new Ed25519 pair: "<name>.key" and "<name>.pub".
    void make_ed25519(const std::string& name) {
        auto made = generate_ed25519_key(path(name + ".key"), path(name + ".pub"));
        ASSERT_TRUE(made.ok()) << made.error().describe();
    }
    void make_hmac(const std::string& name) {
        auto made = generate_hmac_secret(path(name));
        ASSERT_TRUE(made.ok()) << made.error().describe();
    }
    Signer signer(const std::string& file) {
        auto loaded = Signer::load(path(file));
        EXPECT_TRUE(loaded.ok()) << loaded.error().describe();
        if (!loaded) std::abort();
        return std::move(*loaded);
    }
    Verifier verifier(const std::vector<std::string>& files) {
        std::vector<std::string> paths;
        paths.reserve(files.size());
        for (const auto& file : files) paths.push_back(path(file));
        auto loaded = Verifier::load(paths);
        EXPECT_TRUE(loaded.ok()) << loaded.error().describe();
        if (!loaded) std::abort();
        return std::move(*loaded);
    }
    static Verdict check(const Verifier& verifier, const util::Fingerprint& fingerprint,
                         const std::string& value) {
        auto split = split_value(value);
        EXPECT_TRUE(split.ok()) << split.error().describe();
        return split ? verifier.verify(fingerprint, *split) : Verdict::kForged;
    }

    TempDir dir_;
};

TEST_F(SignatureTest, AnEd25519SignedValueVerifiesUnderItsFingerprint) {
    make_ed25519("build");
    const Signer signing = signer("build.key");
    const std::string value = signing.sign(kFingerprint, kEntry);

    auto split = split_value(value);
    ASSERT_TRUE(split.ok()) << split.error().describe();
    EXPECT_EQ(split->entry, kEntry);
    EXPECT_TRUE(split->signed_);
    EXPECT_EQ(split->scheme, SignatureScheme::kEd25519);
    EXPECT_EQ(split->key_id, signing.key_id());
    EXPECT_EQ(split->signature.size(), 64u);
    EXPECT_EQ(verifier({"build.pub"}).verify(kFingerprint, *split), Verdict::kValid);
}

TEST_F(SignatureTest, AnHmacSignedValueVerifiesUnderItsFingerprint) {
    make_hmac("shared.secret");
    const std::string value = signer("shared.secret").sign(kFingerprint, kEntry);

    auto split = split_value(value);
    ASSERT_TRUE(split.ok()) << split.error().describe();
    EXPECT_EQ(split->entry, kEntry);
    EXPECT_EQ(split->scheme, SignatureScheme::kHmacSha256);
    EXPECT_EQ(split->signature.size(), 32u);
    EXPECT_EQ(verifier({"shared.secret"}).verify(kFingerprint, *split), Verdict::kValid);
}

TEST_F(SignatureTest, AnEd25519TrailerIsTheDocumentedBytesOfWhatOpensslSigns) {
    write_with_mode(path("openssl.key"), kOpensslPrivate, 0600);
    write_with_mode(path("openssl.pub"), kOpensslPublic, 0644);
    const Signer signing = signer("openssl.key");
    EXPECT_EQ(hex(signing.key_id()), kOpensslKeyId);

    const std::string value = signing.sign(kFingerprint, kEntry);
    ASSERT_EQ(value.size(), kEntry.size() + 88);
    const std::string trailer = value.substr(kEntry.size());
    EXPECT_EQ(value.substr(0, kEntry.size()), kEntry);
    EXPECT_EQ(hex(trailer.substr(0, 4)), "01010040");  // version 1, Ed25519, 64-byte signature
    EXPECT_EQ(hex(trailer.substr(4, 8)), kOpensslKeyId);
    EXPECT_EQ(hex(trailer.substr(12, 64)), kOpensslSignature);
    EXPECT_EQ(hex(trailer.substr(76, 4)), "00000058");  // the trailer's 88 bytes
    EXPECT_EQ(trailer.substr(80), std::string_view("\x89KCSIGN\n", 8));
    EXPECT_EQ(check(verifier({"openssl.pub"}), kFingerprint, value), Verdict::kValid);
}

TEST_F(SignatureTest, AnHmacTrailerIsTheDocumentedBytesOfThePythonMac) {
    write_with_mode(path("secret"), kHmacSecretFile, 0600);
    const Signer signing = signer("secret");
    EXPECT_EQ(hex(signing.key_id()), kHmacKeyId);

    const std::string value = signing.sign(kFingerprint, kEntry);
    ASSERT_EQ(value.size(), kEntry.size() + 56);
    const std::string trailer = value.substr(kEntry.size());
    EXPECT_EQ(hex(trailer.substr(0, 4)), "01020020");  // version 1, HMAC, 32-byte signature
    EXPECT_EQ(hex(trailer.substr(4, 8)), kHmacKeyId);
    EXPECT_EQ(hex(trailer.substr(12, 32)), kHmacSignature);
    EXPECT_EQ(hex(trailer.substr(44, 4)), "00000038");
    EXPECT_EQ(trailer.substr(48), kTrailerMagic);
}

TEST_F(SignatureTest, AValueWithoutATrailerIsUnsignedAndAllOfItIsTheEntry) {
    make_ed25519("build");
    const Verifier verifying = verifier({"build.pub"});
    // The magic's own tail, too short to be the magic, is an entry's last bytes like any others.
    for (const std::string& value : {kEntry, std::string(), std::string("KCSIGN\n")}) {
        auto split = split_value(value);
        ASSERT_TRUE(split.ok()) << split.error().describe();
        EXPECT_EQ(split->entry, value);
        EXPECT_FALSE(split->signed_);
        EXPECT_EQ(verifying.verify(kFingerprint, *split), Verdict::kUnsigned);
    }
}

TEST_F(SignatureTest, AValueReplayedUnderAnotherFingerprintIsForged) {
    make_ed25519("build");
    make_hmac("shared.secret");
    const Verifier verifying = verifier({"build.pub", "shared.secret"});
    for (const char* key : {"build.key", "shared.secret"}) {
        const std::string value = signer(key).sign(kFingerprint, kEntry);
        EXPECT_EQ(check(verifying, kFingerprint, value), Verdict::kValid) << key;
        EXPECT_EQ(check(verifying, kOtherFingerprint, value), Verdict::kForged) << key;
        EXPECT_EQ(check(verifying, util::Fingerprint{kFingerprint.low, kFingerprint.high}, value),
                  Verdict::kForged)
            << key;
    }
}

TEST_F(SignatureTest, AFlippedByteInTheEntryOrTheSignatureIsForged) {
    make_ed25519("build");
    make_hmac("shared.secret");
    const Verifier verifying = verifier({"build.pub", "shared.secret"});
    for (const char* key : {"build.key", "shared.secret"}) {
        const std::string value = signer(key).sign(kFingerprint, kEntry);
        const std::size_t signature_at = kEntry.size() + 12;
        for (const std::size_t at : {std::size_t{0}, kEntry.size() - 1, signature_at,
                                     signature_at + 20, value.size() - 12 - 1}) {
            std::string flipped = value;
            flipped[at] = static_cast<char>(flipped[at] ^ 0x01);
            EXPECT_EQ(check(verifying, kFingerprint, flipped), Verdict::kForged)
                << key << " byte " << at;
        }
    }
}

TEST_F(SignatureTest, AValueSignedByAKeyTheVerifierLacksIsUnknownKey) {
    make_ed25519("build");
    make_ed25519("stranger");
    make_hmac("stranger.secret");
    const Verifier verifying = verifier({"build.pub"});
    EXPECT_EQ(check(verifying, kFingerprint, signer("stranger.key").sign(kFingerprint, kEntry)),
              Verdict::kUnknownKey);
    EXPECT_EQ(check(verifying, kFingerprint, signer("stranger.secret").sign(kFingerprint, kEntry)),
              Verdict::kUnknownKey);
    // A flipped key id names no key: it is unknown, not forged.
    std::string renamed = signer("build.key").sign(kFingerprint, kEntry);
    renamed[kEntry.size() + 4] = static_cast<char>(renamed[kEntry.size() + 4] ^ 0x01);
    EXPECT_EQ(check(verifying, kFingerprint, renamed), Verdict::kUnknownKey);
    // No keys at all: nothing is known.
    const Verifier none;
    EXPECT_TRUE(none.empty());
    EXPECT_FALSE(verifying.empty());
    EXPECT_EQ(check(none, kFingerprint, signer("build.key").sign(kFingerprint, kEntry)),
              Verdict::kUnknownKey);
}

TEST_F(SignatureTest, ARotationAcceptsOldAndNewKeysUntilTheOldOneIsDropped) {
    make_ed25519("old");
    make_ed25519("new");
    make_hmac("new.secret");
    const std::string by_old = signer("old.key").sign(kFingerprint, kEntry);
    const std::string by_new = signer("new.key").sign(kFingerprint, kEntry);
    const std::string by_secret = signer("new.secret").sign(kFingerprint, kEntry);

    const Verifier both = verifier({"old.pub", "new.pub", "new.secret"});
    EXPECT_EQ(check(both, kFingerprint, by_old), Verdict::kValid);
    EXPECT_EQ(check(both, kFingerprint, by_new), Verdict::kValid);
    EXPECT_EQ(check(both, kFingerprint, by_secret), Verdict::kValid);

    const Verifier only_new = verifier({"new.pub"});
    EXPECT_EQ(check(only_new, kFingerprint, by_old), Verdict::kUnknownKey);
    EXPECT_EQ(check(only_new, kFingerprint, by_new), Verdict::kValid);
    EXPECT_EQ(check(only_new, kFingerprint, by_secret), Verdict::kUnknownKey);
}

// A trailer as sign() writes it, with fields a test may set to anything.
std::string trailer(std::uint8_t version, std::uint8_t scheme, std::uint16_t signature_length,
                    std::size_t signature_bytes, std::uint32_t length) {
    std::string out;
    out.push_back(static_cast<char>(version));
    out.push_back(static_cast<char>(scheme));
    out.push_back(static_cast<char>(signature_length >> 8));
    out.push_back(static_cast<char>(signature_length & 0xff));
    out.append(8, 'k');
    out.append(signature_bytes, 's');
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(length >> shift));
    out.append(kTrailerMagic);
    return out;
}

TEST_F(SignatureTest, AWellFormedHandMadeTrailerSplits) {
    // The control for the malformed ones below: the same helper, every field right.
    const std::string value = kEntry + trailer(1, 2, 32, 32, 56);  // the split points into it
    auto split = split_value(value);
    ASSERT_TRUE(split.ok()) << split.error().describe();
    EXPECT_EQ(split->entry, kEntry);
    EXPECT_EQ(split->key_id, "kkkkkkkk");
    EXPECT_EQ(split->signature, std::string(32, 's'));
    EXPECT_TRUE(split_value(trailer(1, 1, 64, 64, 88)).ok());  // an empty entry
}

TEST_F(SignatureTest, AMalformedTrailerIsACorruptEntry) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"length beyond the value", trailer(1, 1, 64, 64, 89)},
        {"length far beyond the value", kEntry + trailer(1, 1, 64, 64, 0xffffffffu)},
        {"length shorter than the fields", kEntry + trailer(1, 1, 64, 64, 23)},
        {"length zero", kEntry + trailer(1, 1, 64, 64, 0)},
        {"length not the fields'", kEntry + trailer(1, 1, 64, 64, 87)},
        {"bad version", kEntry + trailer(2, 1, 64, 64, 88)},
        {"version zero", kEntry + trailer(0, 1, 64, 64, 88)},
        {"bad scheme", kEntry + trailer(1, 3, 64, 64, 88)},
        {"scheme zero", kEntry + trailer(1, 0, 64, 64, 88)},
        {"an HMAC-length Ed25519 signature", kEntry + trailer(1, 1, 32, 32, 56)},
        {"an Ed25519-length HMAC signature", kEntry + trailer(1, 2, 64, 64, 88)},
        {"a huge signature length", kEntry + trailer(1, 1, 0xffff, 64, 88)},
        {"only the magic", std::string(kTrailerMagic)},
        {"the magic after a short entry", "ab" + std::string(kTrailerMagic)},
        {"the magic after its length", std::string("\0\0\0\x0c", 4) + std::string(kTrailerMagic)},
        {"a truncated signed value", trailer(1, 1, 64, 64, 88).substr(20)},
    };
    for (const auto& [what, value] : cases) {
        auto split = split_value(value);
        ASSERT_FALSE(split.ok()) << what;
        EXPECT_EQ(split.error().code(), Errc::kCorruptEntry) << what;
        EXPECT_NE(split.error().message().find("signature trailer"), std::string::npos)
            << split.error().message();
    }
}

TEST_F(SignatureTest, ASignedValueCutShortIsCorruptOrUnsignedNeverValid) {
    make_ed25519("build");
    const Verifier verifying = verifier({"build.pub"});
    const std::string value = signer("build.key").sign(kFingerprint, kEntry);
    for (std::size_t keep = 0; keep < value.size(); ++keep) {
        auto split = split_value(value.substr(0, keep));
        if (split) {
            EXPECT_NE(verifying.verify(kFingerprint, *split), Verdict::kValid) << keep;
        }
    }
}

TEST_F(SignatureTest, APrivateKeyOrSecretReadableByOthersIsRefused) {
    make_ed25519("build");
    make_hmac("shared.secret");
    ASSERT_EQ(mode_of(path("build.key")), 0600u);
    ASSERT_EQ(mode_of(path("shared.secret")), 0600u);
    ASSERT_TRUE(Signer::load(path("build.key")).ok());  // the control

    for (const mode_t mode : {0644, 0640, 0604}) {
        ASSERT_EQ(::chmod(path("build.key").c_str(), mode), 0);
        ASSERT_EQ(::chmod(path("shared.secret").c_str(), mode), 0);
        auto signing = Signer::load(path("build.key"));
        ASSERT_FALSE(signing.ok());
        EXPECT_NE(signing.error().message().find("readable by group or others"), std::string::npos)
            << signing.error().message();
        EXPECT_FALSE(Signer::load(path("shared.secret")).ok());
        auto verifying = Verifier::load({path("shared.secret")});
        ASSERT_FALSE(verifying.ok());
        EXPECT_NE(verifying.error().message().find("readable by group or others"),
                  std::string::npos);
    }
    // A public key is meant to be read by everyone.
    EXPECT_EQ(mode_of(path("build.pub")), 0644u);
    EXPECT_TRUE(Verifier::load({path("build.pub")}).ok());
}

TEST_F(SignatureTest, AKeyFileOthersMayWriteIsRefused) {
    make_ed25519("build");
    ASSERT_EQ(::chmod(path("build.pub").c_str(), 0664), 0);
    auto verifying = Verifier::load({path("build.pub")});
    ASSERT_FALSE(verifying.ok());
    EXPECT_NE(verifying.error().message().find("writable by group or others"), std::string::npos);
    ASSERT_EQ(::chmod(path("build.pub").c_str(), 0646), 0);
    EXPECT_FALSE(Verifier::load({path("build.pub")}).ok());
}

TEST_F(SignatureTest, AKeyFileOwnedBySomeoneElseIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
    make_ed25519("build");
    ASSERT_EQ(::chown(path("build.pub").c_str(), 65534, 65534), 0);
    auto verifying = Verifier::load({path("build.pub")});
    ASSERT_FALSE(verifying.ok());
    EXPECT_NE(verifying.error().message().find("owned by uid 65534"), std::string::npos);
}

TEST_F(SignatureTest, AKeyFileThatIsALinkADirectoryAFifoOrTooLargeIsRefused) {
    make_ed25519("build");
    fs::create_symlink(path("build.pub"), path("link.pub"));
    auto linked = Verifier::load({path("link.pub")});
    ASSERT_FALSE(linked.ok());
    EXPECT_NE(linked.error().message().find("symbolic link"), std::string::npos);

    fs::create_directory(path("folder"));
    EXPECT_FALSE(Verifier::load({path("folder")}).ok());
    // A FIFO with no writer would block a plain open forever.
    ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
    auto fifo = Signer::load(path("fifo"));
    ASSERT_FALSE(fifo.ok());
    EXPECT_NE(fifo.error().message().find("not a regular file"), std::string::npos);

    write_with_mode(path("huge.pub"), kOpensslPublic + std::string(kMaxKeyFileBytes, '\n'), 0644);
    auto huge = Verifier::load({path("huge.pub")});
    ASSERT_FALSE(huge.ok());
    EXPECT_NE(huge.error().message().find("larger than"), std::string::npos);

    auto missing = Signer::load(path("missing.key"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code(), Errc::kIoError);
}

TEST_F(SignatureTest, EachLoaderRefusesTheOtherHalfOfAKeyPairClearly) {
    make_ed25519("build");
    auto signing = Signer::load(path("build.pub"));
    ASSERT_FALSE(signing.ok());
    EXPECT_NE(signing.error().message().find("is a public key"), std::string::npos)
        << signing.error().message();
    auto verifying = Verifier::load({path("build.key")});
    ASSERT_FALSE(verifying.ok());
    EXPECT_NE(verifying.error().message().find("is a private key"), std::string::npos)
        << verifying.error().message();
    // Nor does a public key beside it make a file holding a private key a verify key.
    write_with_mode(path("both.pem"), std::string(kOpensslPublic) + kOpensslPrivate, 0644);
    auto both = Verifier::load({path("build.pub"), path("both.pem")});
    ASSERT_FALSE(both.ok());
    EXPECT_NE(both.error().message().find("is a private key"), std::string::npos);
}

TEST_F(SignatureTest, KeysOfAnotherKindOrFormatAreClearErrors) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"Ed25519", kEd448Private},
        {"passphrase",
         "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIGbMFcGCSqGSIb3DQEFDTBKMCkG\n"
         "-----END ENCRYPTED PRIVATE KEY-----\n"},
        {"not a readable private key",
         "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"},
        {"not a signing key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI\n"},
        {"32 to 128 bytes", "kcache-hmac-sha256 00010203\n"},
        {"32 to 128 bytes", "kcache-hmac-sha256 " + std::string(63, 'a') + "\n"},
        {"not a hex digit", "kcache-hmac-sha256 " + std::string(63, 'a') + "g\n"},
        {"32 to 128 bytes", "kcache-hmac-sha256 " + std::string(64, 'a') + "\n\n"},
    };
    for (const auto& [expected, text] : cases) {
        write_with_mode(path("key"), text, 0600);
        auto loaded = Signer::load(path("key"));
        ASSERT_FALSE(loaded.ok()) << expected;
        EXPECT_NE(loaded.error().message().find(expected), std::string::npos)
            << loaded.error().message();
        // No error of a failed load is left for the next OpenSSL user on this thread.
        EXPECT_EQ(ERR_peek_error(), 0u) << expected;
        fs::remove(path("key"));
    }
    // The longest secret accepted, in capitals.
    write_with_mode(path("key"), "kcache-hmac-sha256 " + std::string(256, 'A'), 0600);
    EXPECT_TRUE(Signer::load(path("key")).ok());
}

TEST_F(SignatureTest, KeygenWritesModesThatTheLoadersAcceptAndNeverOverwrites) {
    const mode_t saved = ::umask(077);  // keygen's modes must not depend on the caller's umask
    make_ed25519("build");
    make_hmac("shared.secret");
    ::umask(saved);
    EXPECT_EQ(mode_of(path("build.key")), 0600u);
    EXPECT_EQ(mode_of(path("build.pub")), 0644u);
    EXPECT_EQ(mode_of(path("shared.secret")), 0600u);
    const std::string secret = test::read_file(path("shared.secret"));
    EXPECT_EQ(secret.size(), std::string("kcache-hmac-sha256 ").size() + 64 + 1);
    EXPECT_EQ(test::read_file(path("build.key")).rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);

    const std::string private_key = test::read_file(path("build.key"));
    auto again = generate_ed25519_key(path("build.key"), path("other.pub"));
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message().find("exists"), std::string::npos);
    EXPECT_EQ(test::read_file(path("build.key")), private_key);
    EXPECT_FALSE(fs::exists(path("other.pub")));

    // An existing public key: no private key is left behind without it.
    auto half = generate_ed25519_key(path("other.key"), path("build.pub"));
    ASSERT_FALSE(half.ok());
    EXPECT_FALSE(fs::exists(path("other.key")));

    EXPECT_FALSE(generate_hmac_secret(path("shared.secret")).ok());
    EXPECT_EQ(test::read_file(path("shared.secret")), secret);
    EXPECT_FALSE(generate_ed25519_key(path("same"), path("same")).ok());

    // Nor through a link to somewhere else.
    fs::create_symlink(path("elsewhere"), path("linked.secret"));
    EXPECT_FALSE(generate_hmac_secret(path("linked.secret")).ok());
    EXPECT_FALSE(fs::exists(path("elsewhere")));
}

TEST_F(SignatureTest, TwoKeygensMakeDifferentKeys) {
    make_ed25519("a");
    make_ed25519("b");
    make_hmac("a.secret");
    make_hmac("b.secret");
    EXPECT_NE(signer("a.key").key_id(), signer("b.key").key_id());
    EXPECT_NE(signer("a.secret").key_id(), signer("b.secret").key_id());
    EXPECT_EQ(signer("a.key").key_id().size(), kKeyIdBytes);
}

TEST_F(SignatureTest, ThreadsSignAndVerifyWithOneSignerAndVerifierAtOnce) {
    make_ed25519("build");
    make_hmac("shared.secret");
    const Signer by_key = signer("build.key");
    const Signer by_secret = signer("shared.secret");
    const Verifier verifying = verifier({"build.pub", "shared.secret"});
    std::atomic<int> valid{0};
    std::vector<std::thread> threads;
    threads.reserve(4);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) {
                const std::string entry = kEntry + std::to_string(t * 1000 + i);
                const Signer& signing = (i % 2 == 0) ? by_key : by_secret;
                if (check(verifying, kFingerprint, signing.sign(kFingerprint, entry)) ==
                    Verdict::kValid) {
                    ++valid;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(valid.load(), 4 * 50);
}

TEST_F(SignatureTest, VerdictsHaveNames) {
    EXPECT_STREQ(verdict_name(Verdict::kValid), "valid");
    EXPECT_STREQ(verdict_name(Verdict::kUnsigned), "unsigned");
    EXPECT_STREQ(verdict_name(Verdict::kUnknownKey), "unknown-key");
    EXPECT_STREQ(verdict_name(Verdict::kForged), "forged");
}

}  // namespace
}  // namespace kcache::store::remote
