// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/output.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace kcache::tool {
namespace {

// The code point of the well-formed UTF-8 sequence at `text[at]` and its length; length 0 where
// the bytes there are not one.
std::size_t decode_utf8(std::string_view text, std::size_t at, char32_t& code_point) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
    const unsigned char lead = byte(0);
    std::size_t length = 0;
    char32_t min = 0;
    if (lead < 0x80) {
        code_point = lead;
        return 1;
    }
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
        code_point = lead & 0x1f;
        min = 0x80;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        code_point = lead & 0x0f;
        min = 0x800;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        code_point = lead & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (text.size() - at < length) return 0;
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(i) & 0xc0) != 0x80) return 0;
        code_point = (code_point << 6) | (byte(i) & 0x3f);
    }
    if (code_point < min || code_point > 0x10ffff ||
        (code_point >= 0xd800 && code_point <= 0xdfff)) {
        return 0;
    }
    return length;
}

// Characters that print nothing yet change what a terminal shows: C1 controls (0x9b is CSI on
// some terminals), bidirectional overrides and isolates (they reorder the text around them),
// zero-width characters, line and paragraph separators.
bool is_invisible_control(char32_t c) {
    return (c >= 0x80 && c <= 0x9f) || c == 0xad || (c >= 0x200b && c <= 0x200f) ||
           (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) || c == 0xfeff ||
           (c >= 0xfff9 && c <= 0xfffb);
}

bool is_wide(char32_t c) {
    return (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0x303e) ||
           (c >= 0x3041 && c <= 0x33ff) || (c >= 0x3400 && c <= 0x4dbf) ||
           (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xa000 && c <= 0xa4cf) ||
           (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
           (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
           (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
           (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd);
}

bool is_combining(char32_t c) {
    return (c >= 0x0300 && c <= 0x036f) || (c >= 0x1ab0 && c <= 0x1aff) ||
           (c >= 0x1dc0 && c <= 0x1dff) || (c >= 0x20d0 && c <= 0x20ff) ||
           (c >= 0xfe20 && c <= 0xfe2f);
}

void append_hex(std::string& out, unsigned value, int digits) {
    static const char kDigits[] = "0123456789abcdef";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
        out += kDigits[(value >> shift) & 15];
}

// The width of each code point of `text` and where it starts.
struct Glyph {
    std::size_t at;
    std::size_t bytes;
    std::size_t width;
};

std::vector<Glyph> glyphs(std::string_view text) {
    std::vector<Glyph> out;
    for (std::size_t at = 0; at < text.size();) {
        char32_t c = 0;
        std::size_t length = decode_utf8(text, at, c);
        if (length == 0) {  // not from escape_text: one column a byte
            length = 1;
            c = 0xfffd;
        }
        out.push_back({at, length, is_combining(c) ? 0u : is_wide(c) ? 2u : 1u});
        at += length;
    }
    return out;
}

}  // namespace

std::string escape_text(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t at = 0; at < bytes.size();) {
        char32_t c = 0;
        const std::size_t length = decode_utf8(bytes, at, c);
        if (length == 0) {
            out += "\\x";
            append_hex(out, static_cast<unsigned char>(bytes[at]), 2);
            ++at;
            continue;
        }
        if (c == '\\') {
            out += "\\\\";
        } else if (c < 0x20 || c == 0x7f) {
            switch (c) {
                case '\n':
                    out += "\\n";
                    break;
                case '\t':
                    out += "\\t";
                    break;
                case '\r':
                    out += "\\r";
                    break;
                default:
                    out += "\\x";
                    append_hex(out, static_cast<unsigned>(c), 2);
            }
        } else if (is_invisible_control(c)) {
            out += "\\u";
            append_hex(out, static_cast<unsigned>(c), 4);
        } else {
            out.append(bytes.substr(at, length));
        }
        at += length;
    }
    return out;
}

std::size_t display_width(std::string_view text) {
    std::size_t width = 0;
    for (const Glyph& glyph : glyphs(text)) width += glyph.width;
    return width;
}

std::string elide(std::string_view text, std::size_t width) {
    if (display_width(text) <= width) return std::string(text);
    static constexpr std::string_view kMark = "...";
    if (width <= kMark.size()) return std::string(kMark.substr(0, width));
    const std::vector<Glyph> all = glyphs(text);
    // The head gets the odd column: it names the kernel family.
    const std::size_t room = width - kMark.size();
    const std::size_t tail_room = room / 2;
    std::size_t head_end = 0, used = 0;
    for (const Glyph& glyph : all) {
        if (used + glyph.width > room - tail_room) break;
        used += glyph.width;
        head_end = glyph.at + glyph.bytes;
    }
    std::size_t tail_start = text.size(), tail_used = 0;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        if (tail_used + it->width > width - kMark.size() - used) break;
        tail_used += it->width;
        tail_start = it->at;
    }
    return std::string(text.substr(0, head_end)) + std::string(kMark) +
           std::string(text.substr(tail_start));
}

std::size_t terminal_width(std::FILE* stream) {
    const int fd = fileno(stream);
    if (fd < 0 || isatty(fd) == 0) return 0;
    if (const char* columns = std::getenv("COLUMNS")) {
        char* end = nullptr;
        const long value = std::strtol(columns, &end, 10);
        if (end != columns && *end == '\0' && value > 0 && value < 100000) {
            return static_cast<std::size_t>(value);
        }
    }
    winsize size{};
    if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 80;
}

Table::Table(std::vector<Column> columns, bool show_header)
    : columns_(std::move(columns)), show_header_(show_header) {}

void Table::add_row(std::vector<std::string> cells) {
    cells.resize(columns_.size());
    for (auto& cell : cells) cell = escape_text(cell);
    rows_.push_back(std::move(cells));
}

std::string Table::render(std::size_t width) const {
    const std::size_t n = columns_.size();
    std::vector<std::size_t> widths(n, 0);
    for (std::size_t c = 0; c < n; ++c) {
        if (show_header_) widths[c] = display_width(columns_[c].header);
        for (const auto& row : rows_) widths[c] = std::max(widths[c], display_width(row[c]));
    }
    if (width != 0) {
        // Shorten the widest elastic column a column at a time until the lines fit: the short
        // ones stay whole as long as possible.
        constexpr std::size_t kMinElastic = 8;
        auto total = [&] {
            std::size_t sum = n == 0 ? 0 : n - 1;
            for (std::size_t w : widths) sum += w;
            return sum;
        };
        for (std::size_t over = total(); over > width; --over) {
            std::size_t widest = n;
            for (std::size_t c = 0; c < n; ++c) {
                if (columns_[c].elastic && widths[c] > kMinElastic &&
                    (widest == n || widths[c] > widths[widest])) {
                    widest = c;
                }
            }
            if (widest == n) break;
            --widths[widest];
        }
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
        std::string text;
        for (std::size_t c = 0; c < n; ++c) {
            const std::string cell = elide(cells[c], widths[c]);
            const std::string pad(widths[c] - display_width(cell), ' ');
            if (c > 0) text += ' ';
            text += columns_[c].right_aligned ? pad + cell : cell + pad;
        }
        // No trailing blanks: the last column is often the longest and left-aligned.
        text.erase(text.find_last_not_of(' ') + 1);
        out += text + '\n';
    };
    if (show_header_) {
        std::vector<std::string> headers;
        for (const auto& column : columns_) headers.push_back(column.header);
        line(headers);
    }
    for (const auto& row : rows_) line(row);
    return out;
}

Progress::Progress(std::size_t total, std::FILE* stream, bool lines_elsewhere)
    : stream_(stream),
      total_(total),
      width_(terminal_width(stream)),
      lines_elsewhere_(lines_elsewhere) {}

void Progress::started(const std::string& item, const std::string& doing) {
    std::lock_guard lock(mutex_);
    if (width_ == 0) return;
    shown_ = doing + " " + item;
    draw();
}

void Progress::done(const std::string& item, const std::string& what) {
    std::lock_guard lock(mutex_);
    ++done_;
    if (width_ != 0) {
        shown_ = what + " " + item;
        draw();
        if (done_ == total_) std::fputc('\n', stream_);
    } else if (lines_elsewhere_) {
        std::fprintf(stream_, "%zu/%zu %s: %s\n", done_, total_, escape_text(item).c_str(),
                     what.c_str());
    }
}

void Progress::say(const std::string& text) {
    std::lock_guard lock(mutex_);
    // On its own lines: after the bar, the text would start mid-line.
    if (width_ != 0 && !shown_.empty()) std::fputs("\r\x1b[K", stream_);
    std::fputs(text.c_str(), stream_);
    if (width_ != 0 && !shown_.empty() && done_ != total_) draw();
}

void Progress::draw() {
    constexpr std::size_t kBar = 30;
    const std::size_t filled = total_ == 0 ? kBar : done_ * kBar / total_;
    const std::string head = "[" + std::string(filled, '#') + std::string(kBar - filled, '.') +
                             "] " + std::to_string(done_) + "/" + std::to_string(total_) + " ";
    // Within the width: a line that wrapped would leave its head behind at each redraw.
    const std::size_t room = width_ > head.size() + 1 ? width_ - head.size() - 1 : 0;
    // \x1b[K clears what a longer earlier line left to the right.
    std::fprintf(stream_, "\r%s%s\x1b[K", head.c_str(), elide(escape_text(shown_), room).c_str());
    std::fflush(stream_);
}

Json json_document() {
    Json document = Json::object();
    document["schema_version"] = kJsonSchemaVersion;
    return document;
}

bool is_utf8(std::string_view bytes) {
    for (std::size_t at = 0; at < bytes.size();) {
        char32_t c = 0;
        const std::size_t length = decode_utf8(bytes, at, c);
        if (length == 0) return false;
        at += length;
    }
    return true;
}

namespace {

std::string lossy_utf8(std::string_view bytes) {
    std::string out;
    for (std::size_t at = 0; at < bytes.size();) {
        char32_t c = 0;
        const std::size_t length = decode_utf8(bytes, at, c);
        if (length == 0) {
            out += "\xef\xbf\xbd";  // U+FFFD
            ++at;
        } else {
            out.append(bytes.substr(at, length));
            at += length;
        }
    }
    return out;
}

}  // namespace

std::string base64(std::string_view bytes) {
    static const char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::size_t left = std::min<std::size_t>(3, bytes.size() - i);
        std::uint32_t group = 0;
        for (std::size_t j = 0; j < 3; ++j) {
            group = (group << 8) | (j < left ? static_cast<unsigned char>(bytes[i + j]) : 0u);
        }
        for (std::size_t j = 0; j < 4; ++j) {
            out += j <= left ? kAlphabet[(group >> (18 - 6 * j)) & 63] : '=';
        }
    }
    return out;
}

void put_bytes(Json& object, const std::string& name, std::string_view bytes) {
    if (is_utf8(bytes)) {
        object[name] = std::string(bytes);
        return;
    }
    object[name] = lossy_utf8(bytes);
    object[name + "_base64"] = base64(bytes);
}

void put_byte_list(Json& object, const std::string& name, const std::vector<std::string>& list) {
    const bool exact =
        std::all_of(list.begin(), list.end(), [](const auto& s) { return is_utf8(s); });
    Json text = Json::array(), encoded = Json::array();
    for (const auto& item : list) {
        text.push_back(lossy_utf8(item));
        encoded.push_back(base64(item));
    }
    object[name] = std::move(text);
    if (!exact) object[name + "_base64"] = std::move(encoded);
}

void print_json(const Json& document, std::FILE* stream) {
    // Strict: every string was made UTF-8 above, so an error here is a bug to hear about. ASCII
    // only: a key's C1 controls or bidirectional marks stay escapes when the JSON is shown.
    const std::string text =
        document.dump(2, ' ', /*ensure_ascii=*/true, Json::error_handler_t::strict);
    std::fputs(text.c_str(), stream);
    std::fputc('\n', stream);
}

}  // namespace kcache::tool
