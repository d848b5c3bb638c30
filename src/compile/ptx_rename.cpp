// SPDX-License-Identifier: Apache-2.0
#include "compile/ptx_rename.hpp"

#include <algorithm>

namespace kcache::compile {
namespace {

// What a name is made of, as this pass reads a word: an identifier's characters, and '.' so that
// an instruction or directive ("ld.global.f32") is one word, never a name in it.
bool in_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

}  // namespace

std::string renamed_symbol(std::string_view name, std::string_view marker, std::size_t index) {
    std::string renamed(name);
    renamed += marker;
    renamed += std::to_string(index);
    return renamed;
}

std::optional<std::string> rename_ptx_symbols(std::string_view ptx,
                                              const std::vector<std::string>& names,
                                              std::string_view marker, std::size_t index) {
    if (marker.empty()) return std::nullopt;
    const std::string suffix = renamed_symbol("", marker, index);
    std::string out;
    out.reserve(ptx.size() + ptx.size() / 64);
    std::size_t at = 0;
    const std::size_t size = ptx.size();
    while (at < size) {
        const char c = ptx[at];
        std::size_t end = at + 1;
        if (c == '/' && end < size && ptx[end] == '/') {
            end = ptx.find('\n', at);
            if (end == std::string_view::npos) end = size;
        } else if (c == '/' && end < size && ptx[end] == '*') {
            end = ptx.find("*/", at + 2);
            end = end == std::string_view::npos ? size : end + 2;
        } else if (c == '"') {
            while (end < size && ptx[end] != '"') end += ptx[end] == '\\' ? 2 : 1;
            end = std::min(end + 1, size);
        } else if (in_word(c)) {
            while (end < size && in_word(ptx[end])) ++end;
            const std::string_view word = ptx.substr(at, end - at);
            if (word.find(marker) != std::string_view::npos) return std::nullopt;
            out += word;
            if (std::binary_search(names.begin(), names.end(), word)) out += suffix;
            at = end;
            continue;
        }
        out += ptx.substr(at, end - at);
        at = end;
    }
    return out;
}

}  // namespace kcache::compile
