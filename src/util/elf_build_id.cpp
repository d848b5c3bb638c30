// SPDX-License-Identifier: Apache-2.0
#include "util/elf_build_id.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "util/hex.hpp"
#include "util/unique_fd.hpp"

namespace kcache::util {
namespace {

bool read_at(int fd, void* out, std::size_t size, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = pread(fd, static_cast<char*>(out) + done, size - done,
                                static_cast<off_t>(offset + done));
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

std::size_t align4(std::size_t n) {
    return (n + 3) & ~std::size_t{3};
}

// Walks one PT_NOTE segment's notes for the GNU build ID.
std::optional<std::string> build_id_in(const std::vector<unsigned char>& notes) {
    std::size_t at = 0;
    while (at + sizeof(Elf64_Nhdr) <= notes.size()) {
        Elf64_Nhdr header;
        std::memcpy(&header, notes.data() + at, sizeof header);
        const std::size_t name_at = at + sizeof header;
        const std::size_t desc_at = name_at + align4(header.n_namesz);
        const std::size_t next = desc_at + align4(header.n_descsz);
        if (header.n_namesz > notes.size() || header.n_descsz > notes.size() ||
            next > notes.size()) {
            return std::nullopt;
        }
        if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
            std::memcmp(notes.data() + name_at, "GNU", 4) == 0 && header.n_descsz > 0) {
            return to_hex(std::string_view(reinterpret_cast<const char*>(notes.data()) + desc_at,
                                           header.n_descsz));
        }
        at = next;
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> elf_build_id_of(int fd) {
    // One read of the file's head usually holds the ELF header, the program headers and the
    // notes (a linker puts them first); what lies beyond it is read where it is. A new process
    // pays this once for each compiler it names, before its first kernel.
    unsigned char head[4096];
    std::size_t have = 0;
    while (have < sizeof head) {
        const ssize_t n = pread(fd, head + have, sizeof head - have, static_cast<off_t>(have));
        if (n <= 0) break;
        have += static_cast<std::size_t>(n);
    }
    // Copies [offset, offset + size) from the head when it holds it, else reads it.
    auto fetch = [&](void* out, std::size_t size, std::uint64_t offset) {
        if (offset <= have && size <= have - offset) {
            std::memcpy(out, head + offset, size);
            return true;
        }
        return read_at(fd, out, size, offset);
    };
    Elf64_Ehdr elf;
    if (!fetch(&elf, sizeof elf, 0)) return std::nullopt;
    if (std::memcmp(elf.e_ident, ELFMAG, SELFMAG) != 0 || elf.e_ident[EI_CLASS] != ELFCLASS64 ||
        elf.e_ident[EI_DATA] != ELFDATA2LSB || elf.e_phentsize != sizeof(Elf64_Phdr) ||
        elf.e_phnum == 0 || elf.e_phnum > 512) {
        return std::nullopt;
    }
    std::vector<Elf64_Phdr> segments(elf.e_phnum);
    if (!fetch(segments.data(), segments.size() * sizeof(Elf64_Phdr), elf.e_phoff)) {
        return std::nullopt;
    }
    for (const Elf64_Phdr& segment : segments) {
        // A note segment is a few hundred bytes; anything huge is not one we want to read.
        if (segment.p_type != PT_NOTE || segment.p_filesz == 0 || segment.p_filesz > 65536) {
            continue;
        }
        std::vector<unsigned char> notes(segment.p_filesz);
        if (!fetch(notes.data(), notes.size(), segment.p_offset)) continue;
        if (auto id = build_id_in(notes)) return id;
    }
    return std::nullopt;
}

std::optional<std::string> elf_build_id(const std::string& path) {
    // Non-blocking and regular files only: a FIFO named by mistake must not hang the caller.
    const UniqueFd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (!file) return std::nullopt;
    struct stat info {};
    if (fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
    return elf_build_id_of(file.get());
}

}  // namespace kcache::util
