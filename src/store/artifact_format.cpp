// SPDX-License-Identifier: Apache-2.0
#include "store/artifact_format.hpp"

#include <zstd.h>

#include <cstring>
#include <new>

#include "util/spare_buffer.hpp"
#include "util/xxh3_kernels.hpp"

namespace kcache::store {
namespace {

constexpr char kMagic[8] = {'K', 'C', 'A', 'C', 'H', 'E', 'E', '\x01'};
constexpr std::size_t kChecksumSize = 16;
// No cubin comes near this; a larger declared size is damage (or an attack) and must not make
// us allocate it.
// As the disk tier's bound on an entry file (store/cache_directory.hpp).
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{256} << 20;
// Cubins compress a few-fold; a frame that claims far more could be a small file asking for a
// large allocation (zstd itself allows about 32,000-fold).
constexpr std::uint64_t kMaxCompressionRatio = 1024;

// Fixed-size header, little-endian fields.
struct Header {
    std::uint16_t version = kFormatVersion;
    std::uint8_t kind = 0;
    std::uint8_t compression = 0;
    std::uint32_t key_bytes = 0;
    std::uint64_t payload_bytes = 0;     // uncompressed
    std::uint64_t compressed_bytes = 0;  // as stored
};
constexpr std::size_t kHeaderSize = sizeof(kMagic) + 2 + 1 + 1 + 4 + 8 + 8;

// The payload starts at a multiple of this from the entry's start (zero bytes pad the key
// material), so that a buffer from malloc holding the entry holds an aligned cubin, which the
// driver may then use in place (CU_LIBRARY_BINARY_IS_PRESERVED) instead of copying it.
constexpr std::size_t kPayloadAlignment = 16;

std::size_t padding_after_key(std::uint64_t key_bytes) {
    return static_cast<std::size_t>(
        (kPayloadAlignment - (kHeaderSize + key_bytes) % kPayloadAlignment) % kPayloadAlignment);
}

template <class T>
void put_le(std::string& out, T value) {
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff));
    }
}

template <class T>
T get_le(const char* in) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
    }
    return static_cast<T>(value);
}

std::string checksum(std::string_view bytes) {
    const util::xxh3::Hash128 digest = util::xxh3::kernels().hash128(bytes.data(), bytes.size());
    std::string out;
    put_le(out, digest.high);
    put_le(out, digest.low);
    return out;
}

// Compared in place: a checksum string per decode was an allocation per hit (16 bytes is past
// the short-string buffer).
bool checksum_matches(std::string_view body, const char* stored) {
    const util::xxh3::Hash128 digest = util::xxh3::kernels().hash128(body.data(), body.size());
    return get_le<std::uint64_t>(stored) == digest.high &&
           get_le<std::uint64_t>(stored + 8) == digest.low;
}

// One decompression context per thread, reused: ZSTD_decompress() would set up and tear down a
// fresh one per call, which measured as most of a warm load.
ZSTD_DCtx* thread_dctx() {
    struct Holder {
        ZSTD_DCtx* dctx = ZSTD_createDCtx();
        ~Holder() { ZSTD_freeDCtx(dctx); }
    };
    thread_local Holder holder;
    return holder.dctx;
}

ZSTD_CCtx* thread_cctx() {
    struct Holder {
        ZSTD_CCtx* cctx = ZSTD_createCCtx();
        ~Holder() { ZSTD_freeCCtx(cctx); }
    };
    thread_local Holder holder;
    return holder.cctx;
}

Error corrupt(const std::string& why) {
    return Error(Errc::kCorruptEntry, "corrupt cache entry: " + why);
}

const char* const kFields[] = {"arch",      "source-kind", "source-hash", "options", "names",
                               "toolchain", "key",         "param-sizes", "kernel"};
constexpr std::size_t kSingleFields = 8;  // every field above but "kernel", in this order

}  // namespace

std::string KeyMaterial::serialize() const {
    std::string out;
    auto line = [&](const char* name, const std::string& value) {
        out += name;
        out += ": ";
        out += value;
        out += '\n';
    };
    line("arch", arch);
    line("source-kind", source_kind);
    line("source-hash", source_hash);
    line("options", options);
    line("names", names);
    line("toolchain", toolchain);
    line("key", caller_key);
    line("param-sizes", param_sizes);
    for (const auto& name : kernel_names) line("kernel", name);
    return out;
}

Result<KeyMaterial> KeyMaterial::parse(std::string_view text) {
    auto view = KeyMaterialView::parse(text);
    if (!view) return view.error();
    return view->owned();
}

Result<KeyMaterialView> KeyMaterialView::parse(std::string_view text) {
    KeyMaterialView key;
    std::string_view* const slots[kSingleFields] = {
        &key.arch,  &key.source_kind, &key.source_hash, &key.options,
        &key.names, &key.toolchain,   &key.caller_key,  &key.param_sizes};
    std::size_t seen = 0;  // the single fields must come first, in order
    std::size_t kernels_at = text.size();
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        if (end == std::string_view::npos) return corrupt("key material line without newline");
        const std::string_view line = text.substr(at, end - at);
        const std::size_t colon = line.find(": ");
        if (colon == std::string_view::npos) return corrupt("key material line without ': '");
        const std::string_view name = line.substr(0, colon);
        if (seen < kSingleFields) {
            if (name != kFields[seen]) {
                return corrupt("key material field '" + std::string(name) + "' out of place");
            }
            *slots[seen++] = line.substr(colon + 2);
        } else if (name == kFields[kSingleFields]) {
            if (kernels_at == text.size()) kernels_at = at;
        } else {
            return corrupt("unknown key material field '" + std::string(name) + "'");
        }
        at = end + 1;
    }
    if (seen < kSingleFields) return corrupt("key material incomplete");
    // Every line from the first kernel line on is one: nothing else may follow them.
    key.kernel_lines = text.substr(kernels_at);
    return key;
}

std::vector<std::string_view> KeyMaterialView::kernel_names() const {
    constexpr std::string_view kPrefix = "kernel: ";
    std::vector<std::string_view> out;
    std::string_view rest = kernel_lines;
    while (!rest.empty()) {
        const std::size_t end = rest.find('\n');  // parse() saw every line end in one
        out.push_back(rest.substr(kPrefix.size(), end - kPrefix.size()));
        rest.remove_prefix(end + 1);
    }
    return out;
}

KeyMaterial KeyMaterialView::owned() const {
    KeyMaterial key;
    key.arch = arch;
    key.source_kind = source_kind;
    key.source_hash = source_hash;
    key.options = options;
    key.names = names;
    key.toolchain = toolchain;
    key.caller_key = caller_key;
    key.param_sizes = param_sizes;
    for (std::string_view name : kernel_names()) key.kernel_names.emplace_back(name);
    return key;
}

std::string encode(const Artifact& entry, Compression compression, int zstd_level) {
    const std::string key = entry.key.serialize();
    std::string stored;
    if (compression == Compression::kZstd) {
        stored.resize(ZSTD_compressBound(entry.payload.size()));
        const std::size_t size =
            ZSTD_compressCCtx(thread_cctx(), stored.data(), stored.size(), entry.payload.data(),
                              entry.payload.size(), zstd_level);
        // ZSTD_compress only fails on a too-small destination, which compressBound rules out.
        stored.resize(ZSTD_isError(size) ? 0 : size);
    } else {
        stored = entry.payload;
    }

    std::string out(kMagic, sizeof(kMagic));
    put_le(out, kFormatVersion);
    put_le(out, static_cast<std::uint8_t>(entry.kind));
    put_le(out, static_cast<std::uint8_t>(compression));
    put_le(out, static_cast<std::uint32_t>(key.size()));
    put_le(out, static_cast<std::uint64_t>(entry.payload.size()));
    put_le(out, static_cast<std::uint64_t>(stored.size()));
    out += key;
    out.append(padding_after_key(key.size()), '\0');
    out += stored;
    out += checksum(out);
    return out;
}

namespace {

// An entry's parts as views into its bytes, once every check but decompression has passed.
struct Layout {
    PayloadKind kind = PayloadKind::kCubin;
    bool zstd = false;
    KeyMaterialView key;
    std::size_t key_bytes = 0;
    std::uint64_t payload_bytes = 0;  // uncompressed
    std::string_view stored;          // the payload as stored
};

// The one set of checks behind decode() and VerifiedArtifact::decode().
Result<Layout> check(std::string_view bytes) {
    if (bytes.size() < kHeaderSize + kChecksumSize) return corrupt("shorter than a header");
    if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return corrupt("bad magic");
    const std::string_view body = bytes.substr(0, bytes.size() - kChecksumSize);
    if (!checksum_matches(body, bytes.data() + body.size())) return corrupt("checksum mismatch");

    const char* p = bytes.data() + sizeof(kMagic);
    Header header;
    header.version = get_le<std::uint16_t>(p);
    header.kind = get_le<std::uint8_t>(p + 2);
    header.compression = get_le<std::uint8_t>(p + 3);
    header.key_bytes = get_le<std::uint32_t>(p + 4);
    header.payload_bytes = get_le<std::uint64_t>(p + 8);
    header.compressed_bytes = get_le<std::uint64_t>(p + 16);
    if (header.version != kFormatVersion) {
        return corrupt("format version " + std::to_string(header.version) + ", expected " +
                       std::to_string(kFormatVersion));
    }
    if (header.kind < 1 || header.kind > 3) return corrupt("unknown payload kind");
    if (header.compression != static_cast<std::uint8_t>(Compression::kNone) &&
        header.compression != static_cast<std::uint8_t>(Compression::kZstd)) {
        return corrupt("unknown compression");
    }
    // Checked without adding untrusted sizes, which could wrap around.
    const std::uint64_t after_header = body.size() - kHeaderSize;
    const std::size_t padding = padding_after_key(header.key_bytes);
    if (header.key_bytes > after_header || padding > after_header - header.key_bytes ||
        header.compressed_bytes != after_header - header.key_bytes - padding) {
        return corrupt("lengths do not add up to the entry's size");
    }
    for (std::size_t i = 0; i < padding; ++i) {
        if (body[kHeaderSize + header.key_bytes + i] != '\0') return corrupt("padding not zero");
    }
    if (header.payload_bytes > kMaxPayloadBytes) return corrupt("payload larger than any kernel");
    auto key = KeyMaterialView::parse(body.substr(kHeaderSize, header.key_bytes));
    if (!key) return key.error();

    Layout layout;
    layout.kind = static_cast<PayloadKind>(header.kind);
    layout.zstd = header.compression == static_cast<std::uint8_t>(Compression::kZstd);
    layout.key = *key;
    layout.key_bytes = header.key_bytes;
    layout.payload_bytes = header.payload_bytes;
    layout.stored = body.substr(kHeaderSize + header.key_bytes + padding);
    if (!layout.zstd) {
        if (layout.stored.size() != header.payload_bytes) return corrupt("payload size disagrees");
        return layout;
    }
    const unsigned long long declared =
        ZSTD_getFrameContentSize(layout.stored.data(), layout.stored.size());
    if (declared >= ZSTD_CONTENTSIZE_ERROR || declared != header.payload_bytes) {
        return corrupt("payload size disagrees with its frame");
    }
    return layout;
}

// A checked zstd payload, decompressed into `out`.
Result<void> inflate(const Layout& layout, std::string& out) {
    // The declared size is the entry's word, checked only by decompressing: a frame may not claim
    // more than zstd's best ratio allows, or a tiny entry would have a gigabyte allocated for it.
    if (layout.payload_bytes / kMaxCompressionRatio > layout.stored.size()) {
        return corrupt("payload declares more than its compressed bytes can hold");
    }
    try {
        out.resize(layout.payload_bytes);
    } catch (const std::bad_alloc&) {
        return corrupt("no memory to decompress the payload");
    }
    const std::size_t size = ZSTD_decompressDCtx(thread_dctx(), out.data(), out.size(),
                                                 layout.stored.data(), layout.stored.size());
    if (ZSTD_isError(size) || size != layout.payload_bytes) {
        return corrupt("payload does not decompress");
    }
    return ok();
}

}  // namespace

Result<Artifact> decode(std::string_view bytes) {
    auto layout = check(bytes);
    if (!layout) return layout.error();
    Artifact entry;
    entry.kind = layout->kind;
    entry.key = layout->key.owned();
    if (!layout->zstd) {
        entry.payload.assign(layout->stored);
    } else if (auto inflated = inflate(*layout, entry.payload); !inflated) {
        return inflated.error();
    }
    return entry;
}

VerifiedArtifact::~VerifiedArtifact() {
    if (!bytes_.mapped()) util::give_spare_buffer(std::move(bytes_).take_text());
}

Result<std::shared_ptr<const VerifiedArtifact>> VerifiedArtifact::decode(util::FileBytes bytes) {
    auto entry = std::make_shared<VerifiedArtifact>(Private());
    entry->bytes_ = std::move(bytes);
    auto layout = check(entry->bytes_.view());
    if (!layout) return layout.error();
    entry->kind_ = layout->kind;
    entry->key_ = layout->key;
    entry->key_text_bytes_ = layout->key_bytes;
    if (!layout->zstd) {
        entry->payload_ = layout->stored;
    } else {
        // The compressed bytes stay too: the key material views point into them.
        if (auto inflated = inflate(*layout, entry->inflated_); !inflated) return inflated.error();
        entry->payload_ = entry->inflated_;
    }
    return std::shared_ptr<const VerifiedArtifact>(std::move(entry));
}

std::shared_ptr<const VerifiedArtifact> VerifiedArtifact::of(const Artifact& entry) {
    // Fails only for key material with a newline in a value, which no lookup could match.
    auto decoded = decode(encode(entry));
    return decoded ? std::move(*decoded) : nullptr;
}

Artifact VerifiedArtifact::owned() const {
    Artifact entry;
    entry.kind = kind_;
    entry.key = key_.owned();
    entry.payload.assign(payload_);
    return entry;
}

}  // namespace kcache::store
