// SPDX-License-Identifier: Apache-2.0
#include "store/remote/signature.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "util/files.hpp"
#include "util/log.hpp"
#include "util/try.hpp"
#include "util/unique_fd.hpp"

namespace kcache::store::remote {
namespace {

constexpr std::size_t kEd25519SignatureBytes = 64;
constexpr std::size_t kHmacSignatureBytes = 32;
constexpr std::size_t kSha256Bytes = 32;
// version, scheme, signature length, key id
constexpr std::size_t kTrailerHead = 1 + 1 + 2 + kKeyIdBytes;
// trailer length, magic
constexpr std::size_t kTrailerFoot = 4 + kTrailerMagic.size();
constexpr std::string_view kHmacPrefix = "kcache-hmac-sha256 ";
constexpr std::size_t kMinSecretBytes = 32;
constexpr std::size_t kMaxSecretBytes = 128;
constexpr std::string_view kPrivatePem = "-----BEGIN PRIVATE KEY-----";
constexpr std::string_view kEncryptedPem = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
constexpr std::string_view kPublicPem = "-----BEGIN PUBLIC KEY-----";

std::size_t signature_bytes(SignatureScheme scheme) {
    return scheme == SignatureScheme::kEd25519 ? kEd25519SignatureBytes : kHmacSignatureBytes;
}

// Empties this thread's OpenSSL error queue when a call into libcrypto starts and when it ends,
// whichever way it ends, so that no error of one call is read as another's.
class CleanErrors {
public:
    CleanErrors() { ERR_clear_error(); }
    ~CleanErrors() { ERR_clear_error(); }
    CleanErrors(const CleanErrors&) = delete;
    CleanErrors& operator=(const CleanErrors&) = delete;
};

// The first queued OpenSSL error as text, for a message.
std::string openssl_reason() {
    const unsigned long code = ERR_peek_error();
    if (code == 0) return "no reason given by libcrypto";
    std::array<char, 256> text{};
    ERR_error_string_n(code, text.data(), text.size());
    return text.data();
}

struct PkeyFree {
    void operator()(EVP_PKEY* key) const noexcept { EVP_PKEY_free(key); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct MdCtxFree {
    void operator()(EVP_MD_CTX* context) const noexcept { EVP_MD_CTX_free(context); }
};
struct BioFree {
    void operator()(BIO* bio) const noexcept { BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
struct PkeyCtxFree {
    void operator()(EVP_PKEY_CTX* context) const noexcept { EVP_PKEY_CTX_free(context); }
};

// Bytes that held a secret, wiped when they go.
class SecretBytes {
public:
    SecretBytes() = default;
    explicit SecretBytes(std::string bytes) : bytes_(std::move(bytes)) {}
    ~SecretBytes() { wipe(); }
    SecretBytes(SecretBytes&& other) noexcept : bytes_(std::move(other.bytes_)) { other.wipe(); }
    SecretBytes& operator=(SecretBytes&& other) noexcept {
        if (this != &other) {
            wipe();
            bytes_ = std::move(other.bytes_);
            other.wipe();
        }
        return *this;
    }
    SecretBytes(const SecretBytes&) = delete;
    SecretBytes& operator=(const SecretBytes&) = delete;
    const std::string& bytes() const noexcept { return bytes_; }

private:
    void wipe() noexcept {
        if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
        bytes_.clear();
    }
    std::string bytes_;
};

void put_u16(std::string& out, std::uint16_t value) {
    out.push_back(static_cast<char>(value >> 8));
    out.push_back(static_cast<char>(value & 0xff));
}
void put_u32(std::string& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}
void put_u64(std::string& out, std::uint64_t value) {
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}
std::uint32_t get_be(std::string_view bytes) {
    std::uint32_t value = 0;
    for (const char c : bytes) value = (value << 8) | static_cast<unsigned char>(c);
    return value;
}

std::optional<std::string> sha256(std::string_view bytes) {
    std::string digest(kSha256Bytes, '\0');
    unsigned int length = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(digest.data()),
                   &length, EVP_sha256(), nullptr) != 1 ||
        length != kSha256Bytes) {
        return std::nullopt;
    }
    return digest;
}

std::optional<std::string> key_id_of(std::string_view key_bytes) {
    auto digest = sha256(key_bytes);
    if (!digest) return std::nullopt;
    digest->resize(kKeyIdBytes);
    return digest;
}

// domain tag | fingerprint (high, low; big-endian) | SHA-256(entry)
std::optional<std::string> signed_message(const util::Fingerprint& fingerprint,
                                          std::string_view entry) {
    auto digest = sha256(entry);
    if (!digest) return std::nullopt;
    std::string message(kSignatureDomain);
    put_u64(message, fingerprint.high);
    put_u64(message, fingerprint.low);
    message += *digest;
    return message;
}

std::optional<std::string> hmac_sha256(const SecretBytes& secret, std::string_view message) {
    std::string mac(kHmacSignatureBytes, '\0');
    unsigned int length = 0;
    if (HMAC(EVP_sha256(), secret.bytes().data(), static_cast<int>(secret.bytes().size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(),
             reinterpret_cast<unsigned char*>(mac.data()), &length) == nullptr ||
        length != kHmacSignatureBytes) {
        return std::nullopt;
    }
    return mac;
}

std::optional<std::string> ed25519_sign(EVP_PKEY* key, std::string_view message) {
    const std::unique_ptr<EVP_MD_CTX, MdCtxFree> context(EVP_MD_CTX_new());
    if (!context) return std::nullopt;
    // Ed25519 hashes the message itself: no digest is named (a one-shot sign).
    if (EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, key) != 1) return std::nullopt;
    std::string signature(kEd25519SignatureBytes, '\0');
    std::size_t length = signature.size();
    if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) != 1 ||
        length != kEd25519SignatureBytes) {
        return std::nullopt;
    }
    return signature;
}

bool ed25519_verify(EVP_PKEY* key, std::string_view message, std::string_view signature) {
    const std::unique_ptr<EVP_MD_CTX, MdCtxFree> context(EVP_MD_CTX_new());
    if (!context) return false;
    if (EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key) != 1) return false;
    return EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                            signature.size(),
                            reinterpret_cast<const unsigned char*>(message.data()),
                            message.size()) == 1;
}

// A key file's bytes and the mode it had when they were read.
struct KeyFile {
    SecretBytes text;
    mode_t mode = 0;
};

// A key file read whole, without following a link or blocking on a FIFO, and only if no one but
// its owner (the user, or root) could have replaced it. Who may read it is checked once what it
// holds is known (refuse_if_readable): a public key may be world-readable.
Result<KeyFile> read_key_file(const std::string& path) {
    const util::UniqueFd fd(
        ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd) {
        if (errno == ELOOP) {
            return Error(Errc::kIoError,
                         "key file " + path +
                             " is a symbolic link, which kcache does not follow; name the file "
                             "it points to");
        }
        return util::io_error("open key file", path, errno);
    }
    struct stat status {};
    if (::fstat(fd.get(), &status) != 0) return util::io_error("stat key file", path, errno);
    if (!S_ISREG(status.st_mode)) {
        return Error(Errc::kIoError, "key file " + path + " is not a regular file");
    }
    if (static_cast<std::uint64_t>(status.st_size) > kMaxKeyFileBytes) {
        return Error(Errc::kIoError, "key file " + path + " is larger than " +
                                         std::to_string(kMaxKeyFileBytes) +
                                         " bytes: not a kcache key");
    }
    if (status.st_uid != ::geteuid() && status.st_uid != 0) {
        return Error(Errc::kIoError, "key file " + path + " is owned by uid " +
                                         std::to_string(status.st_uid) +
                                         ", neither this user nor root: refused");
    }
    if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return Error(Errc::kIoError,
                     "key file " + path +
                         " is writable by group or others, who could replace the key: refused "
                         "(chmod go-w)");
    }
    std::string bytes(static_cast<std::size_t>(status.st_size) + 1, '\0');
    std::size_t filled = 0;
    // One byte more than fstat said, to notice a file that grew since.
    while (filled < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + filled, bytes.size() - filled);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int error = errno;
            OPENSSL_cleanse(bytes.data(), bytes.size());
            return util::io_error("read key file", path, error);
        }
        if (n == 0) break;
        filled += static_cast<std::size_t>(n);
    }
    if (filled > static_cast<std::size_t>(status.st_size)) {
        OPENSSL_cleanse(bytes.data(), bytes.size());
        return Error(Errc::kIoError, "key file " + path + " changed while it was read");
    }
    bytes.resize(filled);
    return KeyFile{SecretBytes(std::move(bytes)), status.st_mode};
}

// A private key or secret that others can read is no longer one: refused, and said why.
Result<void> refuse_if_readable(const std::string& path, const KeyFile& file) {
    if ((file.mode & (S_IRGRP | S_IROTH)) == 0) return ok();
    return Error(Errc::kIoError,
                 "key file " + path +
                     " holds a private key or secret and is readable by group or others: refused "
                     "(chmod 600 it, and replace the key if others may have read it)");
}

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// "kcache-hmac-sha256 <hex>\n" → the secret's bytes.
Result<SecretBytes> parse_hmac_secret(const std::string& path, std::string_view text) {
    std::string_view hex = text.substr(kHmacPrefix.size());
    if (!hex.empty() && hex.back() == '\n') hex.remove_suffix(1);
    const auto bad = [&](const std::string& why) {
        return Error(Errc::kInvalidArgument, "HMAC secret file " + path + ": " + why +
                                                 " (expected one line, \"" +
                                                 std::string(kHmacPrefix) + "<hex digits>\")");
    };
    if (hex.size() % 2 != 0 || hex.size() < 2 * kMinSecretBytes ||
        hex.size() > 2 * kMaxSecretBytes) {
        return bad("the secret must be " + std::to_string(kMinSecretBytes) + " to " +
                   std::to_string(kMaxSecretBytes) + " bytes in hex digits");
    }
    std::string secret(hex.size() / 2, '\0');
    for (std::size_t i = 0; i < secret.size(); ++i) {
        const int high = hex_value(hex[2 * i]);
        const int low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0) {
            OPENSSL_cleanse(secret.data(), secret.size());
            return bad("a character that is not a hex digit");
        }
        secret[i] = static_cast<char>((high << 4) | low);
    }
    return SecretBytes(std::move(secret));
}

// Never asks for a passphrase: kcache runs unattended, and an encrypted key is refused earlier.
int no_passphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) {
    return -1;
}

Result<Pkey> parse_ed25519_pem(const std::string& path, std::string_view text, bool is_private) {
    const CleanErrors clean;
    const Bio bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    if (!bio) return Error(Errc::kIoError, "out of memory reading key file " + path);
    Pkey key(is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr)
                        : PEM_read_bio_PUBKEY(bio.get(), nullptr, no_passphrase, nullptr));
    if (!key) {
        return Error(Errc::kInvalidArgument, "key file " + path + " is not a readable " +
                                                 (is_private ? "private" : "public") +
                                                 " key: " + openssl_reason());
    }
    if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
        return Error(Errc::kInvalidArgument,
                     "key file " + path + " holds a " + EVP_PKEY_get0_type_name(key.get()) +
                         " key; kcache signs with Ed25519 (openssl genpkey -algorithm ed25519)");
    }
    return key;
}

// The key id of an Ed25519 key: from its raw public key, which a private key holds too.
std::optional<std::string> ed25519_key_id(EVP_PKEY* key) {
    std::array<unsigned char, 32> raw{};
    std::size_t length = raw.size();
    if (EVP_PKEY_get_raw_public_key(key, raw.data(), &length) != 1 || length != raw.size()) {
        return std::nullopt;
    }
    return key_id_of(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

// One key: an Ed25519 key (private to sign, public to verify) or an HMAC secret (both).
struct LoadedKey {
    SignatureScheme scheme = SignatureScheme::kEd25519;
    std::string key_id;
    Pkey ed25519;
    SecretBytes secret;
};

Result<LoadedKey> hmac_key(const std::string& path, const SecretBytes& text) {
    TRY_ASSIGN(SecretBytes secret, parse_hmac_secret(path, text.bytes()));
    const CleanErrors clean;
    auto key_id = key_id_of(secret.bytes());
    if (!key_id) return Error(Errc::kIoError, "SHA-256 failed: " + openssl_reason());
    LoadedKey key;
    key.scheme = SignatureScheme::kHmacSha256;
    key.key_id = std::move(*key_id);
    key.secret = std::move(secret);
    return key;
}

Result<LoadedKey> ed25519_key(const std::string& path, const SecretBytes& text, bool is_private) {
    TRY_ASSIGN(Pkey pkey, parse_ed25519_pem(path, text.bytes(), is_private));
    const CleanErrors clean;
    auto key_id = ed25519_key_id(pkey.get());
    if (!key_id) return Error(Errc::kIoError, "key file " + path + ": " + openssl_reason());
    LoadedKey key;
    key.scheme = SignatureScheme::kEd25519;
    key.key_id = std::move(*key_id);
    key.ed25519 = std::move(pkey);
    return key;
}

Error not_a_key(const std::string& path, const std::string& wanted) {
    return Error(Errc::kInvalidArgument,
                 "key file " + path + " is not " + wanted +
                     " (a PEM key as openssl genpkey -algorithm ed25519 writes it, or a line \"" +
                     std::string(kHmacPrefix) + "<hex>\")");
}

// Creates `path` (never an existing file, never through a link) with exactly `mode` and `bytes`.
Result<void> create_file(const std::string& path, std::string_view bytes, mode_t mode) {
    util::UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd) {
        if (errno == EEXIST) {
            return Error(Errc::kIoError, path + " exists; kcache never overwrites a key file");
        }
        return util::io_error("create", path, errno);
    }
    const auto fail = [&](const char* what) {
        const int error = errno;
        ::unlink(path.c_str());
        return util::io_error(what, path, error);
    };
    // The umask may only have narrowed it; a key file's mode is part of its meaning.
    if (::fchmod(fd.get(), mode) != 0) return fail("chmod");
    std::size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::write(fd.get(), bytes.data() + written, bytes.size() - written);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail("write");
        }
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) return fail("fsync");
    if (const int error = fd.close(); error != 0) {
        errno = error;
        return fail("close");
    }
    return ok();
}

Result<std::string> pem_of(EVP_PKEY* key, bool is_private) {
    const Bio bio(BIO_new(BIO_s_mem()));
    if (!bio) return Error(Errc::kIoError, "out of memory writing a key");
    const int written =
        is_private ? PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                   : PEM_write_bio_PUBKEY(bio.get(), key);
    if (written != 1) return Error(Errc::kIoError, "writing a PEM key: " + openssl_reason());
    char* data = nullptr;
    const long length = BIO_get_mem_data(bio.get(), &data);
    if (length <= 0 || data == nullptr) return Error(Errc::kIoError, "writing a PEM key");
    std::string pem(data, static_cast<std::size_t>(length));
    OPENSSL_cleanse(data, static_cast<std::size_t>(length));
    return pem;
}

}  // namespace

Result<SplitValue> split_value(std::string_view value) {
    SplitValue split;
    if (value.size() < kTrailerMagic.size() ||
        value.substr(value.size() - kTrailerMagic.size()) != kTrailerMagic) {
        split.entry = value;
        return split;
    }
    const auto corrupt = [](const std::string& why) {
        return Error(Errc::kCorruptEntry, "remote value's signature trailer: " + why);
    };
    if (value.size() < kTrailerFoot) return corrupt("shorter than its fixed fields");
    const std::uint64_t length = get_be(value.substr(value.size() - kTrailerFoot, 4));
    if (length > value.size()) {
        return corrupt("claims " + std::to_string(length) + " bytes of a " +
                       std::to_string(value.size()) + "-byte value");
    }
    if (length < kTrailerHead + kTrailerFoot) {
        return corrupt("length " + std::to_string(length) + " is shorter than its fixed fields");
    }
    const std::string_view trailer = value.substr(value.size() - length);
    const auto version = static_cast<std::uint8_t>(trailer[0]);
    if (version != kTrailerVersion) {
        return corrupt("version " + std::to_string(version) + ", expected " +
                       std::to_string(kTrailerVersion));
    }
    const auto scheme = static_cast<std::uint8_t>(trailer[1]);
    if (scheme != static_cast<std::uint8_t>(SignatureScheme::kEd25519) &&
        scheme != static_cast<std::uint8_t>(SignatureScheme::kHmacSha256)) {
        return corrupt("unknown scheme " + std::to_string(scheme));
    }
    split.scheme = static_cast<SignatureScheme>(scheme);
    const std::size_t signature_length = get_be(trailer.substr(2, 2));
    if (signature_length != signature_bytes(split.scheme)) {
        return corrupt("a " + std::to_string(signature_length) + "-byte signature for a scheme " +
                       "whose signatures have " + std::to_string(signature_bytes(split.scheme)));
    }
    if (length != kTrailerHead + signature_length + kTrailerFoot) {
        return corrupt("length " + std::to_string(length) + " does not match its fields");
    }
    split.entry = value.substr(0, value.size() - length);
    split.signed_ = true;
    split.key_id = trailer.substr(4, kKeyIdBytes);
    split.signature = trailer.substr(kTrailerHead, signature_length);
    return split;
}

// ---- Signer

struct Signer::Key {
    LoadedKey key;
};

Signer::Signer(std::unique_ptr<Key> key) : key_(std::move(key)) {}
Signer::Signer(Signer&&) noexcept = default;
Signer& Signer::operator=(Signer&&) noexcept = default;
Signer::~Signer() = default;

Result<Signer> Signer::load(const std::string& path) {
    TRY_ASSIGN(const KeyFile file, read_key_file(path));
    const SecretBytes& text = file.text;
    const std::string_view bytes = text.bytes();
    auto key = std::make_unique<Key>();
    if (starts_with(bytes, kHmacPrefix)) {
        TRY(refuse_if_readable(path, file));
        TRY_ASSIGN(key->key, hmac_key(path, text));
    } else if (bytes.find(kPrivatePem) != std::string_view::npos) {
        TRY(refuse_if_readable(path, file));
        TRY_ASSIGN(key->key, ed25519_key(path, text, true));
    } else if (bytes.find(kEncryptedPem) != std::string_view::npos) {
        return Error(Errc::kInvalidArgument,
                     "key file " + path +
                         " is an encrypted private key; kcache signs unattended and asks for no "
                         "passphrase (keep the key unencrypted, readable only by its user)");
    } else if (bytes.find(kPublicPem) != std::string_view::npos) {
        return Error(Errc::kInvalidArgument,
                     "key file " + path +
                         " is a public key, which only verifies; signing needs the private key "
                         "(kcache keygen writes both)");
    } else {
        return not_a_key(path, "a signing key");
    }
    return Signer(std::move(key));
}

std::string Signer::sign(const util::Fingerprint& fingerprint, std::string_view entry) const {
    if (!key_) return std::string(entry);
    const CleanErrors clean;
    const LoadedKey& key = key_->key;
    std::optional<std::string> signature;
    if (auto message = signed_message(fingerprint, entry)) {
        signature = key.scheme == SignatureScheme::kEd25519
                        ? ed25519_sign(key.ed25519.get(), *message)
                        : hmac_sha256(key.secret, *message);
    }
    if (!signature) {
        util::warn_once("remote-sign", "signing a remote value failed (" + openssl_reason() +
                                           "); it is uploaded unsigned");
        return std::string(entry);
    }
    std::string value;
    value.reserve(entry.size() + kTrailerHead + signature->size() + kTrailerFoot);
    value.append(entry);
    value.push_back(static_cast<char>(kTrailerVersion));
    value.push_back(static_cast<char>(key.scheme));
    put_u16(value, static_cast<std::uint16_t>(signature->size()));
    value.append(key.key_id);
    value.append(*signature);
    put_u32(value, static_cast<std::uint32_t>(kTrailerHead + signature->size() + kTrailerFoot));
    value.append(kTrailerMagic);
    return value;
}

std::string_view Signer::key_id() const noexcept {
    return key_ ? std::string_view(key_->key.key_id) : std::string_view();
}

const char* verdict_name(Verdict verdict) noexcept {
    switch (verdict) {
        case Verdict::kValid:
            return "valid";
        case Verdict::kUnsigned:
            return "unsigned";
        case Verdict::kUnknownKey:
            return "unknown-key";
        case Verdict::kForged:
            return "forged";
    }
    return "unknown";
}

// ---- Verifier

struct Verifier::Keys {
    std::vector<LoadedKey> keys;
};

Verifier::Verifier() : keys_(std::make_unique<Keys>()) {}
Verifier::Verifier(Verifier&&) noexcept = default;
Verifier& Verifier::operator=(Verifier&&) noexcept = default;
Verifier::~Verifier() = default;

Result<Verifier> Verifier::load(const std::vector<std::string>& paths) {
    Verifier verifier;
    for (const auto& path : paths) {
        TRY_ASSIGN(const KeyFile file, read_key_file(path));
        const std::string_view bytes = file.text.bytes();
        if (starts_with(bytes, kHmacPrefix)) {
            TRY(refuse_if_readable(path, file));
            TRY_ASSIGN(LoadedKey key, hmac_key(path, file.text));
            verifier.keys_->keys.push_back(std::move(key));
        } else if (bytes.find(kPrivatePem) != std::string_view::npos ||
                   bytes.find(kEncryptedPem) != std::string_view::npos) {
            // Looked for first: a private key beside the public one is still a private key that
            // a verify key's looser mode check would have let others read.
            return Error(Errc::kInvalidArgument,
                         "key file " + path +
                             " is a private key; the fleet verifies with the public key alone "
                             "(which `openssl pkey -pubout` writes)");
        } else if (bytes.find(kPublicPem) != std::string_view::npos) {
            TRY_ASSIGN(LoadedKey key, ed25519_key(path, file.text, false));
            verifier.keys_->keys.push_back(std::move(key));
        } else {
            return not_a_key(path, "a verify key");
        }
    }
    return verifier;
}

Verdict Verifier::verify(const util::Fingerprint& fingerprint, const SplitValue& value) const {
    if (!value.signed_) return Verdict::kUnsigned;
    if (!keys_ || value.key_id.size() != kKeyIdBytes) return Verdict::kUnknownKey;
    const CleanErrors clean;
    std::optional<std::string> message;
    bool known = false;
    for (const LoadedKey& key : keys_->keys) {
        if (key.scheme != value.scheme || key.key_id != value.key_id) continue;
        known = true;
        if (value.signature.size() != signature_bytes(key.scheme)) continue;
        if (!message) {
            message = signed_message(fingerprint, value.entry);
            if (!message) return Verdict::kForged;  // fails closed: unchecked is not valid
        }
        if (key.scheme == SignatureScheme::kEd25519) {
            if (ed25519_verify(key.ed25519.get(), *message, value.signature))
                return Verdict::kValid;
        } else {
            const auto mac = hmac_sha256(key.secret, *message);
            if (mac && CRYPTO_memcmp(mac->data(), value.signature.data(), mac->size()) == 0) {
                return Verdict::kValid;
            }
        }
    }
    return known ? Verdict::kForged : Verdict::kUnknownKey;
}

bool Verifier::empty() const noexcept {
    return !keys_ || keys_->keys.empty();
}

// ---- keygen

Result<void> generate_ed25519_key(const std::string& private_path, const std::string& public_path) {
    if (private_path == public_path) {
        return Error(Errc::kInvalidArgument, "the private and public key need two files");
    }
    const CleanErrors clean;
    Pkey key;
    {
        const std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> context(
            EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
        EVP_PKEY* made = nullptr;
        if (!context || EVP_PKEY_keygen_init(context.get()) != 1 ||
            EVP_PKEY_keygen(context.get(), &made) != 1) {
            return Error(Errc::kIoError, "generating an Ed25519 key: " + openssl_reason());
        }
        key.reset(made);
    }
    TRY_ASSIGN(std::string private_pem, pem_of(key.get(), true));
    const SecretBytes private_text(std::move(private_pem));
    TRY_ASSIGN(const std::string public_pem, pem_of(key.get(), false));
    TRY(create_file(private_path, private_text.bytes(), 0600));
    if (auto created = create_file(public_path, public_pem, 0644); !created) {
        // Ours alone, made a moment ago: a private key without its public half is of no use.
        ::unlink(private_path.c_str());
        return created;
    }
    return ok();
}

Result<void> generate_hmac_secret(const std::string& path) {
    const CleanErrors clean;
    std::array<unsigned char, kMinSecretBytes> secret{};
    if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1) {
        return Error(Errc::kIoError, "no random bytes for a secret: " + openssl_reason());
    }
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string line(kHmacPrefix);
    for (const unsigned char byte : secret) {
        line.push_back(kDigits[byte >> 4]);
        line.push_back(kDigits[byte & 0xf]);
    }
    line.push_back('\n');
    OPENSSL_cleanse(secret.data(), secret.size());
    const SecretBytes text(std::move(line));
    return create_file(path, text.bytes(), 0600);
}

}  // namespace kcache::store::remote
