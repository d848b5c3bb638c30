// SPDX-License-Identifier: Apache-2.0
#include "compile/ptx_rename.hpp"

#include <algorithm>
#include <array>

namespace kcache::compile {
namespace {

// What a name is made of, as this pass reads a word: an identifier's characters, and '.' so that
// an instruction or directive ("ld.global.f32") is one word, never a name in it.
constexpr std::array<bool, 256> kInWord = [] {
    std::array<bool, 256> in{};
    for (unsigned char c = 0; c < 128; ++c) {
        in[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '$' || c == '%' || c == '.';
    }
    return in;
}();

bool in_word(char c) {
    return kInWord[static_cast<unsigned char>(c)];
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
    // Most words are registers, instructions and directives: a word whose first character or
    // length no name has is passed over without a search.
    std::array<bool, 256> first{};
    std::size_t longest = 0;
    for (const std::string& name : names) {
        if (name.empty()) continue;
        first[static_cast<unsigned char>(name.front())] = true;
        longest = std::max(longest, name.size());
    }
    std::string out;
    out.reserve(ptx.size() + ptx.size() / 64);
    std::size_t copied = 0;  // ptx before this is in `out`
    std::size_t at = 0;
    const std::size_t size = ptx.size();
    while (at < size) {
        const char c = ptx[at];
        if (c == '/' && at + 1 < size && ptx[at + 1] == '/') {
            at = ptx.find('\n', at);
            if (at == std::string_view::npos) at = size;
        } else if (c == '/' && at + 1 < size && ptx[at + 1] == '*') {
            at = ptx.find("*/", at + 2);
            at = at == std::string_view::npos ? size : at + 2;
        } else if (c == '"') {
            ++at;
            while (at < size && ptx[at] != '"') at += ptx[at] == '\\' ? 2 : 1;
            at = std::min(at + 1, size);
        } else if (in_word(c)) {
            std::size_t end = at + 1;
            bool may_hold_marker = c == marker.front();
            while (end < size && in_word(ptx[end])) may_hold_marker |= ptx[end++] == marker.front();
            const std::string_view word = ptx.substr(at, end - at);
            if (may_hold_marker && word.find(marker) != std::string_view::npos) return std::nullopt;
            if (first[static_cast<unsigned char>(c)] && word.size() <= longest &&
                std::binary_search(names.begin(), names.end(), word)) {
                out.append(ptx.substr(copied, end - copied));
                out += suffix;
                copied = end;
            }
            at = end;
        } else {
            ++at;
        }
    }
    out.append(ptx.substr(copied));
    return out;
}

}  // namespace kcache::compile
