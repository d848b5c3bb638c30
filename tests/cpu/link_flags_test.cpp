// SPDX-License-Identifier: Apache-2.0
// How kcache's programs are linked: every symbol bound at start, so that a warm new process's
// first kernel does not bind each libc and libstdc++ function it calls for the first time.
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

namespace kcache {
namespace {

// The main program's dynamic flags, read from its dynamic section as loaded.
struct BindFlags {
    bool found_dynamic = false;
    ElfW(Xword) flags = 0;
    ElfW(Xword) flags_1 = 0;
};

BindFlags main_program_flags() {
    BindFlags out;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* flags = static_cast<BindFlags*>(data);
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
                // NOLINTNEXTLINE(performance-no-int-to-ptr): the loader gives an address
                const auto* entry = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr +
                                                                       info->dlpi_phdr[i].p_vaddr);
                for (; entry->d_tag != DT_NULL; ++entry) {
                    if (entry->d_tag == DT_FLAGS) flags->flags = entry->d_un.d_val;
                    if (entry->d_tag == DT_FLAGS_1) flags->flags_1 = entry->d_un.d_val;
                }
                flags->found_dynamic = true;
            }
            return 1;  // the first object is the main program
        },
        &out);
    return out;
}

TEST(LinkFlags, ProgramsBindEverySymbolAtStart) {
    const BindFlags flags = main_program_flags();
    ASSERT_TRUE(flags.found_dynamic);
    EXPECT_TRUE((flags.flags & DF_BIND_NOW) != 0 || (flags.flags_1 & DF_1_NOW) != 0)
        << "linked without -z now: symbols are bound at their first call";
}

}  // namespace
}  // namespace kcache
