// What a kernel is built from: the bytes a caller's generator returns on a miss.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache {

enum class SourceKind : std::uint8_t {
    kPtx,     // NUL-free PTX text, JIT-compiled by the driver
    kCubin,   // an ELF cubin for one exact arch
    kFatbin,  // a fatbinary (several archs and/or PTX)
};

const char* source_kind_name(SourceKind kind) noexcept;

struct Source {
    SourceKind kind = SourceKind::kPtx;
    std::string bytes;

    static Source ptx(std::string text) { return {SourceKind::kPtx, std::move(text)}; }
    static Source cubin(std::string data) { return {SourceKind::kCubin, std::move(data)}; }
    static Source fatbin(std::string data) { return {SourceKind::kFatbin, std::move(data)}; }
};

}  // namespace kcache
