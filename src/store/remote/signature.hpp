// SPDX-License-Identifier: Apache-2.0
// Signed remote values: a build machine signs what it uploads, the fleet only verifies. A value is
// the disk entry's bytes, then optionally a trailer:
//
//   entry bytes | signature trailer (scheme, key id, signature) | trailer length | magic
//
// The signature covers a domain tag, the fingerprint the value is stored under and a SHA-256 of
// the entry bytes, so a value copied under another fingerprint (a replay) fails to verify.
// Ed25519 (private key signs, public keys verify) or HMAC-SHA256 (one shared secret), through
// OpenSSL's libcrypto.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store::remote {

enum class SignatureScheme : std::uint8_t { kEd25519 = 1, kHmacSha256 = 2 };

// A value split into the entry and its trailer (untrusted bytes: a parser with a fuzz target).
struct SplitValue {
    std::string_view entry;  // the disk entry's bytes (checked by the artifact format, not here)
    bool signed_ = false;
    SignatureScheme scheme = SignatureScheme::kEd25519;
    std::string_view key_id;     // which key signed it (8 bytes)
    std::string_view signature;  // 64 bytes (Ed25519) or 32 (HMAC-SHA256)
};
// A value without a trailer is an unsigned entry; one whose trailer is malformed is
// kCorruptEntry.
Result<SplitValue> split_value(std::string_view value);

// A key that signs: an Ed25519 private key (PEM, PKCS#8) or an HMAC secret file.
class Signer {
public:
    // Reads the key file (a regular file of a bounded size, not readable by others: a private
    // key or secret that others can read is refused with a message saying so).
    static Result<Signer> load(const std::string& path);
    // `entry` with its trailer appended.
    std::string sign(const util::Fingerprint& fingerprint, std::string_view entry) const;
    std::string_view key_id() const noexcept;

    Signer(Signer&&) noexcept;
    Signer& operator=(Signer&&) noexcept;
    ~Signer();

private:
    struct Key;
    explicit Signer(std::unique_ptr<Key> key);
    std::unique_ptr<Key> key_;
};

enum class Verdict : std::uint8_t {
    kValid,       // signed by one of the keys, for this fingerprint and these bytes
    kUnsigned,    // no trailer
    kUnknownKey,  // signed by a key that is not among the verify keys
    kForged,      // the signature does not verify (other bytes, other fingerprint, other key)
};
const char* verdict_name(Verdict verdict) noexcept;

// The keys a value may be signed with: Ed25519 public keys (PEM) or HMAC secret files; several for
// a rotation.
class Verifier {
public:
    static Result<Verifier> load(const std::vector<std::string>& paths);
    Verdict verify(const util::Fingerprint& fingerprint, const SplitValue& value) const;
    bool empty() const noexcept;

    Verifier();
    Verifier(Verifier&&) noexcept;
    Verifier& operator=(Verifier&&) noexcept;
    ~Verifier();

private:
    struct Keys;
    std::unique_ptr<Keys> keys_;
};

// `kcache keygen`: a new Ed25519 key pair (private key written 0600, public 0644) or HMAC secret
// (0600). Refuses to overwrite an existing file.
Result<void> generate_ed25519_key(const std::string& private_path, const std::string& public_path);
Result<void> generate_hmac_secret(const std::string& path);

}  // namespace kcache::store::remote
