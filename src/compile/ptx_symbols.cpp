// SPDX-License-Identifier: Apache-2.0
#include "compile/ptx_symbols.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

namespace kcache::compile {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool is_name(std::string_view token) {
    // PTX identifiers: a letter, '_', '$' or '%' first, then also digits ('.' is no part of a
    // name here: a directive starts with one).
    if (token.empty()) return false;
    auto first = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
    };
    if (!first(token.front())) return false;
    return std::all_of(token.begin() + 1, token.end(),
                       [&](char c) { return first(c) || (c >= '0' && c <= '9'); });
}

// A statement's tokens: words split at spaces, with ( ) [ ] , = each a token of its own.
std::vector<std::string_view> tokens_of(std::string_view statement) {
    std::vector<std::string_view> tokens;
    std::size_t at = 0;
    while (at < statement.size()) {
        const char c = statement[at];
        if (is_space(c)) {
            ++at;
        } else if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',' || c == '=') {
            tokens.push_back(statement.substr(at, 1));
            ++at;
        } else {
            std::size_t end = at;
            while (end < statement.size() && !is_space(statement[end]) &&
                   std::string_view("()[],=").find(statement[end]) == std::string_view::npos) {
                ++end;
            }
            tokens.push_back(statement.substr(at, end - at));
            at = end;
        }
    }
    return tokens;
}

// `statement` past the directives that end at their line's end rather than at a ';' (.version,
// .target, .address_size, .file, .loc); nullopt when such a line holds another directive after
// its operands (ptxas reads "… .address_size 64 .weak .func f() …" as two statements).
std::optional<std::string_view> past_line_directives(std::string_view statement) {
    for (;;) {
        const std::size_t start = statement.find_first_not_of(" \t\r\n");
        if (start == std::string_view::npos) return std::string_view();
        statement.remove_prefix(start);
        bool line_directive = false;
        for (const std::string_view directive :
             {".version", ".target", ".address_size", ".file", ".loc"}) {
            line_directive =
                line_directive ||
                (statement.starts_with(directive) &&
                 (statement.size() == directive.size() || is_space(statement[directive.size()])));
        }
        if (!line_directive) return statement;
        const std::size_t end = std::min(statement.find('\n'), statement.size());
        // Its operands are numbers, names, strings (blank here) and commas: no directive.
        for (const std::string_view token : tokens_of(statement.substr(1, end - 1))) {
            if (token.starts_with('.')) return std::nullopt;
        }
        if (end == statement.size()) return std::string_view();
        statement.remove_prefix(end + 1);
    }
}

// Adds what one module-scope statement (its comments, strings and initializers dropped) defines
// to `names`; false when it does not read.
bool read_statement(std::string_view statement, std::vector<std::string>& names) {
    const std::optional<std::string_view> rest = past_line_directives(statement);
    if (!rest) return false;
    const std::vector<std::string_view> tokens = tokens_of(*rest);
    std::size_t at = 0;
    bool declared_only = false;
    while (at < tokens.size() && (tokens[at] == ".visible" || tokens[at] == ".weak" ||
                                  tokens[at] == ".common" || tokens[at] == ".extern")) {
        declared_only = declared_only || tokens[at] == ".extern";
        ++at;
    }
    if (at == tokens.size()) return at == 0;  // empty; a linkage alone does not read
    const std::string_view directive = tokens[at++];
    if (directive == ".section" || directive == ".pragma") return true;
    if (directive == ".entry" || directive == ".func") {
        if (directive == ".func" && at < tokens.size() && tokens[at] == "(") {
            while (at < tokens.size() && tokens[at] != ")") ++at;  // its return parameters
            ++at;
        }
        if (at >= tokens.size() || !is_name(tokens[at])) return false;
        if (!declared_only) names.emplace_back(tokens[at]);
        return true;
    }
    if (directive != ".global" && directive != ".const" && directive != ".shared" &&
        directive != ".local") {
        return false;  // .alias, or anything else: not read, so not shared
    }
    // Declarators separated by commas: each "name", "name[N]" or "name = {...}"; the name is the
    // last token before a bracket or '='.
    std::string_view last;
    bool named = false;  // the current declarator's name was taken
    for (; at <= tokens.size(); ++at) {
        const std::string_view token = at < tokens.size() ? tokens[at] : ",";
        if (token == ",") {
            if (!named) {
                if (!is_name(last)) return false;
                if (!declared_only) names.emplace_back(last);
            }
            last = {};
            named = false;
        } else if (token == "[" || token == "=") {
            if (!named) {
                if (!is_name(last)) return false;
                if (!declared_only) names.emplace_back(last);
                named = true;
            }
        } else if (!named) {
            last = token;
        }
    }
    return true;
}

// Characters the scanner stops at: all else is copied to the statement or skipped. Inside braces
// (bodies, most of a module) a ';' ends nothing the scanner reads.
constexpr std::array<bool, 256> special_table(std::string_view characters) {
    std::array<bool, 256> special{};
    for (const char c : characters) special[static_cast<unsigned char>(c)] = true;
    return special;
}
constexpr std::array<bool, 256> kSpecial = special_table("{}/\";");
constexpr std::array<bool, 256> kSpecialInBraces = special_table("{}/\"");

}  // namespace

std::optional<std::vector<std::string>> ptx_module_symbols(std::string_view ptx) {
    std::vector<std::string> names;
    std::string statement;  // at module scope, since the last ';' or body
    long depth = 0;         // braces: a body, a section or an initializer
    bool initializer = false;
    std::size_t at = 0;
    const std::size_t size = ptx.size();
    while (at < size) {
        const std::size_t from = at;
        const std::array<bool, 256>& special = depth == 0 ? kSpecial : kSpecialInBraces;
        while (at < size && !special[static_cast<unsigned char>(ptx[at])]) ++at;
        if (depth == 0) statement.append(ptx.substr(from, at - from));
        if (at == size) break;
        const char c = ptx[at];
        if (c == '/' && at + 1 < size && ptx[at + 1] == '/') {
            at = ptx.find('\n', at);
            if (at == std::string_view::npos) at = size;
        } else if (c == '/' && at + 1 < size && ptx[at + 1] == '*') {
            const std::size_t end = ptx.find("*/", at + 2);
            if (end == std::string_view::npos) return std::nullopt;
            at = end + 2;
            if (depth == 0) statement += ' ';
        } else if (c == '"') {
            std::size_t end = at + 1;
            while (end < size && ptx[end] != '"') end += ptx[end] == '\\' ? 2 : 1;
            if (end >= size) return std::nullopt;
            at = end + 1;
            if (depth == 0) statement += " \"\" ";
        } else if (c == '{') {
            if (depth == 0) {
                // An initializer's braces belong to its statement; a body's end its header.
                initializer = statement.find('=') != std::string::npos;
                if (!initializer) {
                    if (!read_statement(statement, names)) return std::nullopt;
                    statement.clear();
                }
            }
            ++depth;
            ++at;
        } else if (c == '}') {
            if (--depth < 0) return std::nullopt;
            if (depth == 0 && initializer) statement += " {} ";
            ++at;
        } else if (c == ';' && depth == 0) {
            if (!read_statement(statement, names)) return std::nullopt;
            statement.clear();
            ++at;
        } else {
            if (depth == 0) statement += c;  // a '/' alone, or a ';' in a body
            ++at;
        }
    }
    // Nothing after the last statement but line directives: a declaration not ended does not read.
    const std::optional<std::string_view> rest = past_line_directives(statement);
    if (depth != 0 || !rest || !rest->empty()) return std::nullopt;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

}  // namespace kcache::compile
