// A small PTX scanner: identifiers, directives, braces and statement ends, comments and strings
// skipped. It is not a PTX parser; it knows just enough to find module-scope `.global`
// declarations and to count every mention of a name.
#include "compile/ptx_prune.hpp"

#include <optional>
#include <unordered_map>
#include <vector>

namespace kcache::compile {
namespace {

bool is_follow(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$';
}

// PTX identifiers: [a-zA-Z][a-zA-Z0-9_$]* or [_$%][a-zA-Z0-9_$]+.
bool starts_identifier(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

using Counts = std::unordered_map<std::string_view, std::size_t>;

// Every identifier-like word of a comment counts as a mention.
void count_names(std::string_view comment, Counts& counts) {
    for (std::size_t k = 0; k < comment.size();) {
        if (starts_identifier(comment[k]) && (k == 0 || !is_follow(comment[k - 1]))) {
            std::size_t e = k + 1;
            while (e < comment.size() && is_follow(comment[e])) ++e;
            ++counts[comment.substr(k, e - k)];
            k = e;
        } else {
            ++k;
        }
    }
}

struct Declaration {
    std::size_t begin = 0;  // the `.global`
    std::size_t end = 0;    // one past its ';'
    std::string_view name;
    std::vector<std::string_view> mentions;  // identifiers in it, its own name included
};

struct Scan {
    Counts counts;  // identifier -> occurrences
    std::vector<Declaration> candidates;
};

bool is_linkage(std::string_view directive) {
    return directive == ".visible" || directive == ".extern" || directive == ".weak" ||
           directive == ".common";
}

// nullopt when the text is not something this scanner can follow.
std::optional<Scan> scan(std::string_view text) {
    Scan out;
    int depth = 0;
    // The directive just before the current token, if the token before was one: only a linkage
    // directive (.visible, .extern, .weak, .common) can stand before `.global` in a declaration.
    std::string_view previous_directive;
    std::optional<Declaration> open;  // a `.global` statement being read
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const char c = text[i];
        if (c == '/' && i + 1 < n && text[i + 1] == '/') {
            const std::size_t eol = text.find('\n', i);
            // Comments are searched for names too: a mention keeps a declaration (the safe side).
            count_names(text.substr(i, eol == std::string_view::npos ? n - i : eol - i),
                        out.counts);
            i = eol == std::string_view::npos ? n : eol;
            continue;
        }
        if (c == '/' && i + 1 < n && text[i + 1] == '*') {
            const std::size_t close = text.find("*/", i + 2);
            if (close == std::string_view::npos) return std::nullopt;
            count_names(text.substr(i, close - i), out.counts);
            i = close + 2;
            continue;
        }
        if (c == '"') {
            const std::size_t close = text.find('"', i + 1);
            if (close == std::string_view::npos) return std::nullopt;
            i = close + 1;
            previous_directive = {};
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0') {
            ++i;
            continue;
        }
        if (c == '.' && i + 1 < n && is_follow(text[i + 1])) {  // a directive or a type
            std::size_t e = i + 1;
            while (e < n && is_follow(text[e])) ++e;
            const std::string_view directive = text.substr(i, e - i);
            if (depth == 0 && !open && directive == ".global" && !is_linkage(previous_directive)) {
                open = Declaration{i, 0, {}, {}};
            }
            previous_directive = directive;
            i = e;
            continue;
        }
        if (starts_identifier(c)) {
            std::size_t e = i + 1;
            while (e < n && is_follow(text[e])) ++e;
            const std::string_view name = text.substr(i, e - i);
            ++out.counts[name];
            if (open) {
                if (open->name.empty()) open->name = name;
                open->mentions.push_back(name);
            }
            previous_directive = {};
            i = e;
            continue;
        }
        if (c >= '0' && c <= '9') {  // numbers, 0f3F800000 and 0x1p3 included
            std::size_t e = i + 1;
            while (e < n && is_follow(text[e])) ++e;
            previous_directive = {};
            i = e;
            continue;
        }
        previous_directive = {};
        if (c == '{') {
            ++depth;
        } else if (c == '}') {
            if (--depth < 0) return std::nullopt;
        } else if (c == ';' && depth == 0 && open) {
            open->end = i + 1;
            if (!open->name.empty()) out.candidates.push_back(std::move(*open));
            open.reset();
        }
        ++i;
    }
    if (depth != 0 || open) return std::nullopt;
    return out;
}

}  // namespace

PrunedPtx drop_unreferenced_globals(std::string_view ptx, const std::set<std::string>& keep) {
    auto scanned = scan(ptx);
    if (!scanned) return {std::string(ptx), 0};
    std::vector<bool> dropped(scanned->candidates.size(), false);
    std::size_t total = 0;
    // Until nothing more goes: dropping one takes its mentions out of the counts.
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t k = 0; k < scanned->candidates.size(); ++k) {
            const Declaration& d = scanned->candidates[k];
            if (dropped[k] || scanned->counts[d.name] != 1 ||
                keep.count(std::string(d.name)) != 0) {
                continue;
            }
            dropped[k] = true;
            ++total;
            changed = true;
            for (std::string_view mention : d.mentions) --scanned->counts[mention];
        }
    }
    if (total == 0) return {std::string(ptx), 0};

    PrunedPtx out;
    out.dropped = total;
    out.ptx.reserve(ptx.size());
    std::size_t at = 0;
    for (std::size_t k = 0; k < scanned->candidates.size(); ++k) {
        if (!dropped[k]) continue;
        const Declaration& d = scanned->candidates[k];
        out.ptx.append(ptx.substr(at, d.begin - at));
        at = d.end;
        if (at < ptx.size() && ptx[at] == '\n') ++at;  // the line it stood on
    }
    out.ptx.append(ptx.substr(at));
    return out;
}

}  // namespace kcache::compile
