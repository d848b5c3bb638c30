// SPDX-License-Identifier: Apache-2.0
// Signed remote values: a build machine signs what it uploads, the fleet only verifies. A value is
// the disk entry's bytes, then optionally a trailer:
//
//   entry bytes | signature trailer (scheme, key id, signature) | trailer length | magic
//
// The trailer, every integer big-endian, its length fixed by the scheme (88 bytes for Ed25519,
// 56 for HMAC-SHA256):
//
//   offset  size  field
//   0       1     version: 1 (kTrailerVersion)
//   1       1     scheme: 1 Ed25519, 2 HMAC-SHA256 (SignatureScheme)
//   2       2     signature length: 64 (Ed25519) or 32 (HMAC-SHA256), nothing else
//   4       8     key id: the first 8 bytes of SHA-256 of the raw 32-byte Ed25519 public key, or
//                 of the HMAC secret's bytes
//   12      n     signature
//   12+n    4     trailer length: 12 + n + 12, these fields and the magic included
//   24+n    8     magic "\x89KCSIGN\n" (kTrailerMagic)
//
// The magic is last so that the trailer is found from the end; the length says where it starts,
// and must be exactly what version, scheme and signature length make it, so a value can neither
// claim more bytes than it has nor hide extra bytes inside its trailer. A value that ends with the
// magic is a signed value: if its trailer does not parse it is kCorruptEntry, never an unsigned
// entry (an entry ends with its checksum, which equals the magic by a 2^-64 chance: a miss).
//
// The signed message is the domain tag "kcache-remote-signature-v1", the 16-byte fingerprint the
// value is stored under (high word, then low, big-endian) and SHA-256 of the entry bytes. Ed25519
// signs it as it is (PureEdDSA), HMAC-SHA256 keys on the secret. So a value copied under another
// fingerprint (a replay) fails to verify; the trailer itself is not signed and need not be: each
// of its fields either picks the key or is the signature.
//
// Key files, each read whole (a regular file, not a link, at most 64 KiB, owned by the user or
// root, writable by no one else; a private key or secret also readable by no one else):
//   Ed25519 private key  PEM, PKCS#8 unencrypted ("BEGIN PRIVATE KEY"), what `openssl genpkey
//                        -algorithm ed25519` writes; signs.
//   Ed25519 public key   PEM, SubjectPublicKeyInfo ("BEGIN PUBLIC KEY"), what `openssl pkey
//                        -pubout` writes; verifies.
//   HMAC secret          one line: "kcache-hmac-sha256 " then 64 to 256 lowercase or uppercase
//                        hex digits (32 to 128 bytes), then an optional "\n"; signs and verifies.
// Everything goes through OpenSSL's libcrypto; no call leaves an error on its thread's queue.
#pragma once

#include <cstddef>
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

inline constexpr std::uint8_t kTrailerVersion = 1;
inline constexpr std::string_view kTrailerMagic{"\x89KCSIGN\n", 8};
inline constexpr std::string_view kSignatureDomain{"kcache-remote-signature-v1"};
inline constexpr std::size_t kKeyIdBytes = 8;
// A key file is a line or a PEM block: anything larger is not one.
inline constexpr std::uint64_t kMaxKeyFileBytes = std::uint64_t{64} * 1024;

// A value split into the entry and its trailer (untrusted bytes: a parser with a fuzz target). Its
// views point into the value split, which must outlive them.
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
    // `entry` with its trailer appended. Should libcrypto fail (no memory), `entry` as it is, with
    // a warning: an unsigned upload is a miss where signatures are required, never a bad kernel.
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

// The keys a value may be signed with: Ed25519 public keys (PEM) or HMAC secret files, mixed,
// several for a rotation. A private key is refused (the fleet verifies with the public key).
// verify() picks the key by the trailer's scheme and key id.
class Verifier {
public:
    static Result<Verifier> load(const std::vector<std::string>& paths);
    // Safe from many threads at once, as sign() is: each call makes its own libcrypto context.
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
