// SPDX-License-Identifier: Apache-2.0
// What the kcache command writes, in one place: text made safe for a terminal, tables that fit
// one, and JSON (nlohmann-json) that stays valid whatever bytes an entry holds. The commands
// build rows and objects; none formats a column or a string literal itself.
#pragma once

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::tool {

// ---- Text for a terminal ----

// `bytes` as text that cannot drive a terminal: a caller's key or a path may hold escape
// sequences (ESC, CSI, OSC), other control bytes, bytes that are not UTF-8 or invisible
// reordering marks. Those are written as C-style escapes (\n, \x1b, \x9b for a lone byte,
// \u202e for a character); the backslash is written \\ so that every escape reads one way back.
// Printable UTF-8 passes through as it is.
std::string escape_text(std::string_view bytes);

// The columns a terminal gives to `text` (printable UTF-8, as escape_text makes it): two for
// East Asian wide characters and emoji, none for combining marks, one for the rest.
std::size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, the middle replaced by "..." where it is too long (the
// ends of a key, "gemm_tiled:64x64x64", tell entries apart more than its middle).
std::string elide(std::string_view text, std::size_t width);

// The width to fit a table into when writing to `stream`: 0 (no limit) unless it is a
// terminal, then $COLUMNS where that is a number, else the terminal's own width.
std::size_t terminal_width(std::FILE* stream);

// ---- Tables ----

struct Column {
    std::string header;
    bool right_aligned = false;
    // May be shortened (elided) to fit the width; the others are kept whole.
    bool elastic = false;
};

// Rows of cells under a header line, columns separated by a space. Every cell is escaped
// (escape_text) here, so that no command can forget to.
class Table {
public:
    explicit Table(std::vector<Column> columns, bool show_header = true);

    // As many cells as columns; missing ones are empty.
    void add_row(std::vector<std::string> cells);
    // The table in at most `width` columns per line where the elastic columns can give enough
    // (each down to a few characters, then lines are left longer); 0: nothing is shortened.
    std::string render(std::size_t width) const;

private:
    std::vector<Column> columns_;
    bool show_header_;
    std::vector<std::vector<std::string>> rows_;  // escaped
};

// ---- Progress ----

// A bar on a terminal, redrawn in place, that names the item at work (the last one started, with
// several threads) cut to the terminal's width; elsewhere a line per item done, or nothing.
// Thread-safe.
class Progress {
public:
    Progress(std::size_t total, std::FILE* stream, bool lines_elsewhere);
    // `doing` to `item` now: "compiling", "checking".
    void started(const std::string& item, const std::string& doing);
    // `what` happened to `item`: "compiled", "bad", ...
    void done(const std::string& item, const std::string& what);
    // Text (lines ending in a newline) written above the bar, which is then drawn again.
    void say(const std::string& text);

private:
    void draw();  // mutex_ held

    std::mutex mutex_;
    std::FILE* const stream_;
    const std::size_t total_;
    const std::size_t width_;  // 0: not a terminal
    const bool lines_elsewhere_;
    std::size_t done_ = 0;  // guarded by mutex_
    std::string shown_;     // guarded by mutex_: what the bar says after the count
};

// ---- JSON ----

// The version of every JSON document the command writes (its "schema_version" field), raised
// when a field changes meaning or goes; new fields do not raise it.
inline constexpr int kJsonSchemaVersion = 1;

using Json = nlohmann::ordered_json;  // fields in the order written, as a reader expects them

// A document with its "schema_version" field first.
Json json_document();

// Whether `bytes` are well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): what JSON text must be.
bool is_utf8(std::string_view bytes);

// Sets `object[name]` to `bytes` as a JSON string. Where they are not UTF-8, the string holds
// them with each bad byte replaced by U+FFFD, and `object[name + "_base64"]` holds the exact
// bytes in base64 (RFC 4648): a reader that needs them exactly looks for that field.
void put_bytes(Json& object, const std::string& name, std::string_view bytes);
// The same for a list: `object[name]` the strings, `object[name + "_base64"]` every element in
// base64 where any of them is not UTF-8.
void put_byte_list(Json& object, const std::string& name, const std::vector<std::string>& list);

std::string base64(std::string_view bytes);

// `document` on one stream, indented two spaces a level (a field per line, for grep and for
// people), in ASCII (other characters as \uXXXX), with a newline.
void print_json(const Json& document, std::FILE* stream = stdout);

}  // namespace kcache::tool
