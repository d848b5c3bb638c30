// SPDX-License-Identifier: Apache-2.0
#include "compile/ptx_params.hpp"

#include <string.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>

namespace kcache::compile {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool is_name_char(char c) {
    // PTX identifiers: letters, digits, '_', '$', and '%' or '.' after the first character.
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

// The next `needle` at or after `from`, found by its last character with memchr: in PTX that
// character ('y' of ".entry", '*' of "/*") is rare where the first ('.', '/') is on every line,
// where glibc's memmem was measured slower.
const char* find(std::string_view text, std::size_t from, std::string_view needle) {
    const std::size_t tail = needle.size() - 1;
    std::size_t at = from + tail;
    while (at < text.size()) {
        const void* hit = memchr(text.data() + at, needle.back(), text.size() - at);
        if (hit == nullptr) return nullptr;
        at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
        if (text.compare(at - tail, tail, needle, 0, tail) == 0) return text.data() + at - tail;
        ++at;
    }
    return nullptr;
}

// PTX as it would be read, with comments (// to the end of the line, /* ... */) made spaces:
// only for text that has a block comment; line comments are handled where they matter.
std::string without_comments(std::string_view ptx) {
    std::string out(ptx);
    for (std::size_t i = 0; i + 1 < out.size();) {
        if (out[i] == '"') {  // a string (in a .pragma): comments do not start inside it
            const std::size_t end = out.find('"', i + 1);
            i = end == std::string::npos ? out.size() : end + 1;
        } else if (out[i] == '/' && out[i + 1] == '/') {
            while (i < out.size() && out[i] != '\n') out[i++] = ' ';
        } else if (out[i] == '/' && out[i + 1] == '*') {
            const std::size_t end = out.find("*/", i + 2);
            const std::size_t stop = end == std::string::npos ? out.size() : end + 2;
            for (; i < stop; ++i) {
                if (out[i] != '\n') out[i] = ' ';
            }
        } else {
            ++i;
        }
    }
    return out;
}

// The size of a PTX fundamental type a kernel parameter may have; 0 for anything else.
std::size_t type_size(std::string_view type) {
    static constexpr std::pair<std::string_view, std::size_t> kTypes[] = {
        {".b8", 1},  {".u8", 1},  {".s8", 1},    {".b16", 2},    {".u16", 2},
        {".s16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".u32", 4},
        {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
        {".u64", 8}, {".s64", 8}, {".f64", 8},   {".b128", 16},
    };
    for (const auto& [name, size] : kTypes) {
        if (type == name) return size;
    }
    return 0;
}

bool is_state_space(std::string_view token) {
    return token == ".global" || token == ".const" || token == ".shared" || token == ".local";
}

// One declaration, ".param [.align N] .type [.ptr [.space] [.align N]] name[[count]]": its size.
std::optional<std::size_t> param_size(std::string_view declaration) {
    // No allocation: a declaration has a handful of tokens (12 allow every qualifier twice).
    std::array<std::string_view, 12> tokens;
    std::size_t count_of_tokens = 0;
    for (std::size_t i = 0; i < declaration.size();) {
        while (i < declaration.size() && is_space(declaration[i])) ++i;
        const std::size_t start = i;
        while (i < declaration.size() && !is_space(declaration[i])) ++i;
        if (i == start) continue;
        if (count_of_tokens == tokens.size()) return std::nullopt;
        tokens[count_of_tokens++] = declaration.substr(start, i - start);
    }
    if (count_of_tokens < 3 || tokens[0] != ".param") return std::nullopt;
    std::size_t type_bytes = 0;
    std::size_t t = 1;
    for (; t < count_of_tokens; ++t) {
        const std::string_view token = tokens[t];
        if (token == ".align") {
            ++t;  // its value
            continue;
        }
        if (token == ".ptr" || is_state_space(token)) continue;
        if (token.starts_with('.')) {
            if (type_bytes != 0) return std::nullopt;  // two types
            type_bytes = type_size(token);
            if (type_bytes == 0) return std::nullopt;  // .texref, .pred, or unknown
            continue;
        }
        break;
    }
    // The name, and an array count that may be spelled apart from it ("p [ 16 ]").
    std::string spelled_apart;
    std::string_view name_and_count = t < count_of_tokens ? tokens[t] : std::string_view();
    if (t + 1 < count_of_tokens) {
        for (; t < count_of_tokens; ++t) spelled_apart += tokens[t];
        name_and_count = spelled_apart;
    }
    if (type_bytes == 0 || name_and_count.empty()) return std::nullopt;
    const std::size_t open = name_and_count.find('[');
    if (open == std::string_view::npos) {
        return std::all_of(name_and_count.begin(), name_and_count.end(), is_name_char)
                   ? std::optional<std::size_t>(type_bytes)
                   : std::nullopt;
    }
    if (open == 0 || name_and_count.back() != ']') return std::nullopt;
    // Plain decimal only: PTX numbers follow C, so "010" is octal, and hex, binary and suffixed
    // forms exist too; those go to the driver rather than to a second reading of C's rules.
    std::size_t count = 0;
    const char* first = name_and_count.data() + open + 1;
    const char* last = name_and_count.data() + name_and_count.size() - 1;
    if (first == last || *first == '0') return std::nullopt;
    const auto [end, error] = std::from_chars(first, last, count);
    if (error != std::errc() || end != last || count == 0) return std::nullopt;
    // A size that wraps would pass the launch check with a wrong size: not read, the driver asks.
    if (count > std::numeric_limits<std::size_t>::max() / type_bytes) return std::nullopt;
    return type_bytes * count;
}

// The parameter list after an entry's name, up to its ')': sizes, or nullopt if any declaration
// is not understood. `at` is just past the name.
std::optional<std::vector<std::size_t>> param_list(std::string_view ptx, std::size_t at) {
    while (at < ptx.size() && is_space(ptx[at])) ++at;
    if (at >= ptx.size()) return std::nullopt;
    // No list only where the body or a performance directive (.maxntid, ...) follows at once;
    // anything else (a comment before the list, say) is not guessed at.
    if (ptx[at] == '{' || ptx[at] == ';' || ptx[at] == '.') return std::vector<std::size_t>{};
    if (ptx[at] != '(') return std::nullopt;
    const std::size_t close = ptx.find(')', at);
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view list = ptx.substr(at + 1, close - at - 1);
    if (list.find("//") != std::string_view::npos) return std::nullopt;  // rare; the driver tells
    std::vector<std::size_t> sizes;
    if (list.find_first_not_of(" \t\r\n") == std::string_view::npos) return sizes;
    for (std::size_t start = 0;;) {
        const std::size_t comma = list.find(',', start);
        auto size = param_size(list.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (!size) return std::nullopt;
        sizes.push_back(*size);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return sizes;
}

PtxParamSizes read_entries(std::string_view ptx) {
    // Every declaration read, or not (nullopt); a name declared twice (a prototype, say) goes to
    // the driver. Sorted by name at the end: linear in the number of kernels, bar the sort.
    std::vector<std::pair<std::string, std::optional<std::vector<std::size_t>>>> declared;
    constexpr std::string_view kEntry = ".entry";
    for (const char* hit = find(ptx, 0, kEntry); hit != nullptr;
         hit = find(ptx, static_cast<std::size_t>(hit - ptx.data()) + kEntry.size(), kEntry)) {
        const std::size_t at = static_cast<std::size_t>(hit - ptx.data());
        const std::size_t after = at + kEntry.size();
        // A whole token, outside a line comment.
        if ((at > 0 && !is_space(ptx[at - 1])) || after >= ptx.size() || !is_space(ptx[after])) {
            continue;
        }
        const std::size_t line = ptx.rfind('\n', at);
        const std::size_t line_start = line == std::string_view::npos ? 0 : line + 1;
        if (ptx.substr(line_start, at - line_start).find("//") != std::string_view::npos) continue;
        std::size_t name_start = after;
        while (name_start < ptx.size() && is_space(ptx[name_start])) ++name_start;
        std::size_t name_end = name_start;
        while (name_end < ptx.size() && is_name_char(ptx[name_end])) ++name_end;
        if (name_end == name_start) continue;
        declared.emplace_back(std::string(ptx.substr(name_start, name_end - name_start)),
                              param_list(ptx, name_end));
    }
    // Not for one kernel, the usual module: stable_sort takes a temporary buffer from the heap
    // even then.
    if (declared.size() > 1) {
        std::stable_sort(declared.begin(), declared.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    PtxParamSizes found;
    found.reserve(declared.size());
    for (std::size_t i = 0; i < declared.size();) {
        std::size_t same = i + 1;
        while (same < declared.size() && declared[same].first == declared[i].first) ++same;
        if (same == i + 1 && declared[i].second) {
            found.emplace_back(std::move(declared[i].first), std::move(*declared[i].second));
        }
        i = same;
    }
    return found;
}

}  // namespace

PtxParamSizes ptx_param_sizes(std::string_view ptx) {
    // Generated PTX has line comments only; a block comment could hide or fake an .entry.
    if (find(ptx, 0, "/*") != nullptr) return read_entries(without_comments(ptx));
    return read_entries(ptx);
}

std::string param_sizes_line(const PtxParamSizes& sizes) {
    std::string line;
    for (const auto& [name, params] : sizes) {
        if (!line.empty()) line += ';';
        line += name;
        line += '=';
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (i > 0) line += ',';
            line += std::to_string(params[i]);
        }
    }
    return line;
}

std::optional<PtxParamSizes> parse_param_sizes_line(std::string_view line) {
    // Sized before they are filled: every disk hit of a PTX module parses its line, and each
    // growth was an allocation.
    PtxParamSizes sizes;
    sizes.reserve(static_cast<std::size_t>(std::count(line.begin(), line.end(), ';')) + 1);
    while (!line.empty()) {
        const std::size_t end = std::min(line.find(';'), line.size());
        const std::string_view item = line.substr(0, end);
        const bool another = end != line.size();
        line.remove_prefix(another ? end + 1 : end);
        // A trailing ';' is not what param_sizes_line writes: the line must read back exactly.
        if (another && line.empty()) return std::nullopt;
        const std::size_t equals = item.find('=');
        if (equals == 0 || equals == std::string_view::npos) return std::nullopt;
        const std::string_view name = item.substr(0, equals);
        if (!std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
        if (!sizes.empty() && sizes.back().first >= name) return std::nullopt;  // sorted, once
        std::vector<std::size_t> params;
        const std::string_view list = item.substr(equals + 1);
        params.reserve(static_cast<std::size_t>(std::count(list.begin(), list.end(), ',')) + 1);
        for (std::string_view rest = list; !rest.empty();) {
            const std::size_t comma = std::min(rest.find(','), rest.size());
            std::size_t size = 0;
            const char* first = rest.data();
            const char* last = rest.data() + comma;
            const auto [stop, error] = std::from_chars(first, last, size);
            if (error != std::errc() || stop != last || size == 0 || *first == '0') {
                return std::nullopt;
            }
            params.push_back(size);
            if (comma == rest.size()) break;
            rest.remove_prefix(comma + 1);
            if (rest.empty()) return std::nullopt;  // a trailing comma
        }
        sizes.emplace_back(std::string(name), std::move(params));
    }
    return sizes;
}

}  // namespace kcache::compile
