// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a remote value's signature trailer (store::remote::split_value) and its check
// (Verifier::verify) under fixed test keys, one Ed25519 and one HMAC-SHA256. Beyond never
// crashing: a split is the value cut in two, a malformed trailer is kCorruptEntry, nothing
// verifies that the key would not have signed exactly so, and whatever is signed splits back and
// verifies.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "store/remote/signature.hpp"

namespace {

using namespace kcache::store::remote;

// The seeds in fuzz/corpus/signature are signed under this fingerprint with these keys (the
// openssl-made pair and the 0..31 secret of tests/cpu/signature_test.cpp).
constexpr kcache::util::Fingerprint kFingerprint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
constexpr const char* kPrivateKey =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEINjC60fGHgWDkVMIziUJNQjH1HWkeqD+YluO+Ef2gvcG\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kPublicKey =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEAuNqxPwm4be/CnxUUnTbUz0qr5oVkqr9+7h+Zg4RIIjU=\n"
    "-----END PUBLIC KEY-----\n";
constexpr const char* kSecret =
    "kcache-hmac-sha256 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";

struct Keys {
    Signer ed25519;
    Signer hmac;
    Verifier verifier;
};

// The keys go through the loaders as files would, from a folder that is gone once they are read.
Keys load_keys() {
    char folder[] = "/tmp/kcache-signature-fuzz-XXXXXX";
    if (mkdtemp(folder) == nullptr) std::abort();
    const std::string base = folder;
    const auto put = [&](const char* name, const char* text) {
        const std::string path = base + "/" + name;
        std::ofstream(path) << text;
        if (::chmod(path.c_str(), 0600) != 0) std::abort();
        return path;
    };
    const std::string private_path = put("ed25519.key", kPrivateKey);
    const std::string public_path = put("ed25519.pub", kPublicKey);
    const std::string secret_path = put("hmac.secret", kSecret);
    auto ed25519 = Signer::load(private_path);
    auto hmac = Signer::load(secret_path);
    auto verifier = Verifier::load({public_path, secret_path});
    for (const auto& path : {private_path, public_path, secret_path}) ::unlink(path.c_str());
    ::rmdir(folder);
    if (!ed25519 || !hmac || !verifier) std::abort();
    return Keys{std::move(*ed25519), std::move(*hmac), std::move(*verifier)};
}

const Keys& keys() {
    static const Keys loaded = load_keys();
    return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A copy sized exactly, so that ASan catches a read one past the value.
    const std::string value(reinterpret_cast<const char*>(data), size);
    const Keys& k = keys();

    auto split = split_value(value);
    if (!split) {
        KCACHE_FUZZ_CHECK(split.error().code() == kcache::Errc::kCorruptEntry);
        KCACHE_FUZZ_CHECK(value.size() >= kTrailerMagic.size() && value.ends_with(kTrailerMagic));
    } else if (!split->signed_) {
        KCACHE_FUZZ_CHECK(split->entry == value && !value.ends_with(kTrailerMagic));
        KCACHE_FUZZ_CHECK(k.verifier.verify(kFingerprint, *split) == Verdict::kUnsigned);
    } else {
        // The entry is the value's start; the rest is exactly the trailer's fixed fields.
        KCACHE_FUZZ_CHECK(split->entry.data() == value.data());
        KCACHE_FUZZ_CHECK(split->key_id.size() == kKeyIdBytes);
        const std::size_t expected = split->scheme == SignatureScheme::kEd25519 ? 64 : 32;
        KCACHE_FUZZ_CHECK(split->signature.size() == expected);
        KCACHE_FUZZ_CHECK(split->entry.size() + 12 + expected + 12 == value.size());
        const Verdict verdict = k.verifier.verify(kFingerprint, *split);
        if (verdict == Verdict::kValid) {
            // Both schemes are deterministic: a valid value is the one the key makes.
            KCACHE_FUZZ_CHECK(value == k.ed25519.sign(kFingerprint, split->entry) ||
                              value == k.hmac.sign(kFingerprint, split->entry));
        }
        KCACHE_FUZZ_CHECK(verdict != Verdict::kUnsigned);
    }

    // Whatever the bytes, signing them gives a value that splits back to them and verifies, and
    // only under its own fingerprint.
    const Signer& signer = (size % 2 == 0) ? k.ed25519 : k.hmac;
    const std::string signed_value = signer.sign(kFingerprint, value);
    auto again = split_value(signed_value);
    KCACHE_FUZZ_CHECK(again.ok() && again->signed_ && again->entry == value);
    KCACHE_FUZZ_CHECK(again->key_id == signer.key_id());
    KCACHE_FUZZ_CHECK(k.verifier.verify(kFingerprint, *again) == Verdict::kValid);
    const kcache::util::Fingerprint other{kFingerprint.high, kFingerprint.low ^ (size + 1)};
    KCACHE_FUZZ_CHECK(k.verifier.verify(other, *again) == Verdict::kForged);
    return 0;
}
