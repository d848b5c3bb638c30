// SPDX-License-Identifier: Apache-2.0
#include "compile/header_trace.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "compile/compiler.hpp"
#include "util/env.hpp"
#include "util/unique_fd.hpp"

namespace kcache::compile {
namespace {

// A reader of NVRTC's trace (Chrome's trace format: {"traceEvents": [{"name": ..., "args":
// {"detail": ...}}, ...]}) that keeps, per object, its "name" and its args' "detail". Written by
// NVRTC in a folder only this process can write to, but read as untrusted: depth and every
// length are bounded by the bytes present.
class TraceReader {
public:
    explicit TraceReader(std::string_view text) : text_(text) {}

    bool read_document(std::vector<std::string>& headers) {
        headers_ = &headers;
        Object ignored;
        if (!value(0, ignored)) return false;
        skip_space();
        return at_ == text_.size();
    }

private:
    struct Object {
        std::string name;
        std::string detail;
        bool has_name = false;
    };
    static constexpr int kMaxDepth = 64;

    void skip_space() {
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' ||
                                      text_[at_] == '\r' || text_[at_] == '\t')) {
            ++at_;
        }
    }
    bool take(char c) {
        skip_space();
        if (at_ >= text_.size() || text_[at_] != c) return false;
        ++at_;
        return true;
    }
    bool string(std::string& out) {
        if (!take('"')) return false;
        out.clear();
        while (at_ < text_.size()) {
            const char c = text_[at_++];
            if (c == '"') return true;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (at_ >= text_.size()) return false;
            const char escaped = text_[at_++];
            switch (escaped) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'u': {
                    if (at_ + 4 > text_.size()) return false;
                    unsigned code = 0;
                    for (int i = 0; i < 4; ++i) {
                        const char h = text_[at_++];
                        code <<= 4;
                        if (h >= '0' && h <= '9')
                            code |= static_cast<unsigned>(h - '0');
                        else if (h >= 'a' && h <= 'f')
                            code |= static_cast<unsigned>(h - 'a' + 10);
                        else if (h >= 'A' && h <= 'F')
                            code |= static_cast<unsigned>(h - 'A' + 10);
                        else
                            return false;
                    }
                    // UTF-8, as a path's bytes are; a surrogate (past U+FFFF) is kept as it comes,
                    // which no real path matches: such a file is reported, never mistaken.
                    if (code < 0x80) {
                        out += static_cast<char>(code);
                    } else if (code < 0x800) {
                        out += static_cast<char>(0xc0 | (code >> 6));
                        out += static_cast<char>(0x80 | (code & 0x3f));
                    } else {
                        out += static_cast<char>(0xe0 | (code >> 12));
                        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
                        out += static_cast<char>(0x80 | (code & 0x3f));
                    }
                    break;
                }
                default:
                    out += escaped;
                    break;  // '"', '\\', '/'
            }
        }
        return false;
    }
    bool value(int depth, Object& parent_args) {
        if (depth > kMaxDepth) return false;
        skip_space();
        if (at_ >= text_.size()) return false;
        const char c = text_[at_];
        if (c == '"') {
            std::string ignored;
            return string(ignored);
        }
        if (c == '{') return object(depth, parent_args);
        if (c == '[') {
            ++at_;
            if (take(']')) return true;
            do {
                Object ignored;
                if (!value(depth + 1, ignored)) return false;
            } while (take(','));
            return take(']');
        }
        // A number, true, false or null: nothing here needs its value.
        const std::size_t start = at_;
        while (at_ < text_.size() &&
               std::string_view(",]} \n\r\t").find(text_[at_]) == std::string_view::npos) {
            ++at_;
        }
        return at_ > start;
    }
    // `into` receives this object's "detail" when it is an event's "args".
    bool object(int depth, Object& into) {
        ++at_;  // '{'
        Object self;
        if (!take('}')) {
            do {
                std::string member;
                if (!string(member) || !take(':')) return false;
                skip_space();
                if (at_ < text_.size() && text_[at_] == '"' &&
                    (member == "name" || member == "detail")) {
                    std::string text;
                    if (!string(text)) return false;
                    if (member == "name") {
                        self.name = std::move(text);
                        self.has_name = true;
                    } else {
                        self.detail = std::move(text);
                    }
                } else if (member == "args") {
                    if (!value(depth + 1, self)) return false;
                } else {
                    Object ignored;
                    if (!value(depth + 1, ignored)) return false;
                }
            } while (take(','));
            if (!take('}')) return false;
        }
        into.detail = self.detail;
        if (self.has_name && self.name == "Processing Header File") {
            headers_->push_back(self.detail);
        }
        return true;
    }

    std::string_view text_;
    std::size_t at_ = 0;
    std::vector<std::string>* headers_ = nullptr;
};

}  // namespace

std::optional<std::vector<std::string>> headers_in_trace(std::string_view trace) {
    std::vector<std::string> headers;
    if (!TraceReader(trace).read_document(headers)) return std::nullopt;
    if (std::find(headers.begin(), headers.end(), kBuiltinHeader) == headers.end()) {
        return std::nullopt;
    }
    return headers;
}

TraceFolder::TraceFolder() {
    std::string base = util::env_string("TMPDIR").value_or("");
    if (base.empty()) base = "/tmp";
    std::string pattern = base + "/kcache-trace-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) folder_ = std::move(pattern);
}

TraceFolder::~TraceFolder() {
    if (folder_.empty()) return;
    std::ignore = unlink(file().c_str());
    std::ignore = rmdir(folder_.c_str());  // NVRTC writes nothing else there
}

std::optional<std::string> TraceFolder::read() const {
    const util::UniqueFd file_fd{
        open(file().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
    if (!file_fd) return std::nullopt;
    const int fd = file_fd.get();
    struct stat status {};
    // A CUB compile's trace is under a megabyte; the bound only keeps a surprise finite.
    constexpr off_t kMaxTrace = off_t{256} << 20;
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size > kMaxTrace) {
        return std::nullopt;
    }
    std::string text(static_cast<std::size_t>(status.st_size), '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return std::nullopt;
        done += static_cast<std::size_t>(got);
    }
    return text;
}

}  // namespace kcache::compile
