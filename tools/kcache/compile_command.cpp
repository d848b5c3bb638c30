// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/compile_command.hpp"

#include <atomic>
#include <cstdio>
#include <thread>

#include "compile/arch.hpp"
#include "driver/driver.hpp"
#include "kcache/kernel_cache.hpp"
#include "store/cache_directory.hpp"
#include "tools/kcache/output.hpp"
#include "util/files.hpp"

namespace kcache::tool {

int run_compile(const CompileOptions& options, CacheOptions cache_options) {
    compile::Target target;
    if (options.arch.empty()) {
        auto driver = driver::default_driver();
        auto arch = driver->current_arch();
        // This process makes no context: the devices' arch, when they all share one.
        if (!arch && driver->uniform_arch() > 0) arch = driver->uniform_arch();
        if (!arch) {
            std::fprintf(stderr,
                         "kcache: no GPU to take the arch from (%s); name one with --arch sm_XX\n",
                         arch.error().message().c_str());
            return 2;
        }
        target.arch = *arch;
    } else if (auto parsed = compile::parse_target(options.arch); parsed) {
        target = *parsed;
    } else {
        std::fprintf(stderr, "kcache: --arch: %s\n", parsed.error().message().c_str());
        return 2;
    }
    // Read every file first: a missing one is a usage error, and nothing is compiled.
    std::vector<Source> sources;
    for (const auto& file : options.files) {
        auto text = util::read_named_file(file, store::kMaxEntryBytes);
        if (!text || !*text) {
            std::fprintf(stderr, "kcache: cannot read %s%s\n", file.c_str(),
                         text ? "" : (": " + text.error().message()).c_str());
            return 2;
        }
        if (file.ends_with(".ptx")) {
            sources.push_back(Source::ptx(std::move(**text)));
        } else if (file.ends_with(".cu") || file.ends_with(".cuh") || file.ends_with(".cpp")) {
            std::vector<std::string> nvrtc;
            for (const auto& d : options.defines) nvrtc.push_back("-D" + d);
            for (const auto& i : options.includes) nvrtc.push_back("-I" + i);
            nvrtc.insert(nvrtc.end(), options.options.begin(), options.options.end());
            Source source = Source::cuda(std::move(**text), nvrtc, options.name_expressions);
            source.allow_disk_headers = options.allow_disk_headers;
            source.arch_specific = target.arch_specific;
            sources.push_back(std::move(source));
        } else {
            std::fprintf(stderr, "kcache: %s: not a .cu or .ptx file\n", file.c_str());
            return 2;
        }
    }

    const std::size_t jobs =
        options.jobs != 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
    cache_options.compile_workers = jobs > 1 ? jobs : 0;
    const std::string directory = cache_options.disk_directory;
    KernelCache cache(std::move(cache_options));

    // A line per file where stderr is no terminal (logs, CI).
    Progress progress(sources.size(), stderr, /*lines_elsewhere=*/true);
    std::atomic<std::size_t> next{0};
    std::atomic<int> failures{0}, compiled{0}, present{0}, not_stored{0};
    std::vector<std::thread> pool;
    pool.reserve(jobs);
    for (std::size_t t = 0; t < jobs; ++t) {
        pool.emplace_back([&] {
            for (std::size_t i = next++; i < sources.size(); i = next++) {
                const std::string& file = options.files[i];
                progress.started(file, "compiling");
                auto origin = cache.prebuild(
                    file, [&] { return sources[i]; }, target.arch);
                const char* what = "compiled";
                if (!origin) {
                    // kIoError: made, or not even tried, but not on disk where a program looks.
                    const bool stored_nothing = origin.error().code() == Errc::kIoError;
                    ++(stored_nothing ? not_stored : failures);
                    what = stored_nothing ? "NOT STORED" : "FAILED";
                    std::string message = std::string("kcache: ") +
                                          (stored_nothing ? "not stored: " : "") +
                                          origin.error().describe() + "\n";
                    if (origin.error().message().find("allow_disk_headers") != std::string::npos) {
                        message += "kcache: (here: --allow-disk-headers)\n";
                    }
                    progress.say(message);
                } else if (*origin == Provenance::kCompiled) {
                    ++compiled;
                } else {
                    ++present;
                    what = "already in the cache";
                }
                progress.done(file, what);
            }
        });
    }
    for (auto& thread : pool) thread.join();
    cache.wait_for_uploads();
    std::printf("%d compiled, %d already in the cache, %d failed, %d not stored (%s, %s)\n",
                compiled.load(), present.load(), failures.load(), not_stored.load(),
                target.name().c_str(), escape_text(directory).c_str());
    const CacheStats stats = cache.stats();
    if (stats.remote_enabled) {
        std::printf("remote: %llu uploaded, %llu there already, %llu refused, %llu dropped\n",
                    static_cast<unsigned long long>(stats.remote_writes),
                    static_cast<unsigned long long>(stats.remote_writes_exists),
                    static_cast<unsigned long long>(stats.remote_write_errors),
                    static_cast<unsigned long long>(stats.remote_writes_dropped));
    }
    if (stats.disk_evicted != 0) {
        std::fprintf(stderr,
                     "kcache: the directory's budgets (max_size, max_files) removed %llu least "
                     "recently used entries while compiling\n",
                     static_cast<unsigned long long>(stats.disk_evicted));
    }
    return failures == 0 && not_stored == 0 ? 0 : 1;
}

}  // namespace kcache::tool
