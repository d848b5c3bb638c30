// The kcache command: ccache's maintenance flags where the meaning is the same (-C, -c,
// --evict-older-than, -d), and subcommands: demo, compile, ls, inspect, verify.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "compile/worker_main.hpp"
#include "store/disk_store.hpp"
#include "tools/kcache/compile_command.hpp"
#include "tools/kcache/demo.hpp"
#include "tools/kcache/maintenance.hpp"
#include "util/env.hpp"
#include "util/size.hpp"

namespace {

// -d, else KCACHE_DIR, XDG_CACHE_HOME/kcache, HOME/.cache/kcache.
std::string cache_directory(const std::string& given) {
    if (!given.empty()) return given;
    auto found = kcache::store::default_directory();
    return found ? *found : std::string();
}

// The disk budgets as a cache in this environment would apply them.
kcache::tool::Budgets environment_budgets(std::string& error) {
    kcache::tool::Budgets budgets{kcache::store::kDefaultMaxBytes, kcache::store::kDefaultMaxFiles};
    if (auto size = kcache::util::env_string("KCACHE_MAX_SIZE")) {
        auto bytes = kcache::util::parse_size(*size);
        if (!bytes) {
            error = "KCACHE_MAX_SIZE: " + bytes.error().message();
            return budgets;
        }
        budgets.max_bytes = *bytes;
    }
    auto files = kcache::util::env_uint("KCACHE_MAX_FILES");
    if (!files) {
        error = files.error().message();
    } else if (*files) {
        budgets.max_files = **files;
    }
    return budgets;
}

int run(int argc, char** argv) {
    CLI::App app{"kcache: compile a CUDA kernel once, never again"};
    app.set_version_flag("--version", "kcache 0.1.0");
    app.require_subcommand(0, 1);
    app.footer(
        "Exit status: 0 success; 1 a failure while running (a compile error, a bad entry left "
        "in place, I/O); 2 a bad command line.");

    std::string directory;
    bool clear = false, cleanup = false, dry_run = false;
    std::string max_size_text, evict_older_text;
    std::uint64_t max_files = 0;
    bool max_files_given = false;
    app.add_option("-d,--dir", directory,
                   "Cache directory (default: KCACHE_DIR, else the XDG cache)");
    app.add_flag("-C,--clear", clear, "Remove every entry");
    app.add_flag("-c,--cleanup", cleanup,
                 "Apply the size and file budgets now (least recently used first)");
    auto* max_size_opt = app.add_option(
        "-M,--max-size", max_size_text,
        "With -c: the byte budget to apply (k, M, G, T, Ki, Mi, Gi, Ti; a bare number is G)");
    auto* max_files_opt =
        app.add_option("-F,--max-files", max_files, "With -c: the file budget to apply (0: none)");
    app.add_option("--evict-older-than", evict_older_text,
                   "Remove entries not used for AGE (30d, 12h, 90m, 3600s; a bare number is days)");
    app.add_flag("--dry-run", dry_run, "With -C, -c or --evict-older-than: say, remove nothing");

    kcache::tool::DemoOptions demo;
    auto* demo_cmd = app.add_subcommand(
        "demo",
        "Run an inference-like loop of shape-keyed kernels: compiles on the first pass, "
        "hits after. Without a GPU, says so and exits 0.");
    demo_cmd->add_option("--passes", demo.passes, "Passes over the layers")
        ->check(CLI::Range(1, 1000));
    demo_cmd->add_flag("--json", demo.json, "Print a JSON summary instead of the table");

    kcache::tool::CompileOptions compile;
    auto* compile_cmd = app.add_subcommand(
        "compile", "Compile .cu and .ptx files into the cache for an arch; no GPU needed");
    compile_cmd->add_option("files", compile.files, "The .cu and .ptx files")->required();
    compile_cmd->add_option("--arch", compile.arch, "sm_XX or sm_XXa (default: this GPU's)");
    compile_cmd->add_option("-j,--jobs", compile.jobs, "Parallel compiles (default: the cores)")
        ->check(CLI::Range(1, 1024));
    compile_cmd->add_option("-D", compile.defines,
                            "A macro for CUDA C++: -D NAME or -D NAME=VALUE");
    compile_cmd->add_option("-I", compile.includes,
                            "An include folder for CUDA C++ (its headers are NOT fingerprinted)");
    compile_cmd->add_option("--option", compile.options, "A further NVRTC option");
    compile_cmd->add_option("-e,--name-expression", compile.name_expressions,
                            "A template instantiation to compile, e.g. 'softmax<float, 32>'");

    bool json = false, repair = false;
    std::string fingerprint;
    auto* ls_cmd = app.add_subcommand(
        "ls", "List the entries: fingerprint, size, age, last use, arch, kind, key, kernels");
    ls_cmd->add_flag("--json", json, "JSON instead of a table");
    auto* inspect_cmd = app.add_subcommand("inspect", "Show one entry's key material");
    inspect_cmd->add_option("fingerprint", fingerprint, "The fingerprint or a unique prefix")
        ->required();
    inspect_cmd->add_flag("--json", json, "JSON instead of text");
    auto* verify_cmd = app.add_subcommand("verify", "Check every entry's checksum and structure");
    verify_cmd->add_flag("--repair", repair, "Remove the bad entries");
    verify_cmd->add_flag("--json", json, "JSON instead of text");

    // Internal: the process a WorkerPool starts to compile CUDA C++ (requests on stdin, answers
    // on stdout). Hidden from --help: an empty group.
    auto* worker_cmd =
        app.add_subcommand("compile-worker", "Serve a kcache compile worker pool")->group("");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // CLI11 returns 0 for --help/--version; bad flags and values exit 2 with one line.
        if (e.get_exit_code() != 0) {
            std::fprintf(stderr, "kcache: %s\n", e.what());
            return 2;
        }
        return app.exit(e);
    }
    auto usage_error = [](const std::string& message) {
        std::fprintf(stderr, "kcache: %s\n", message.c_str());
        return 2;
    };
    if (*worker_cmd) return kcache::compile::run_compile_worker(0, 1);
    if (*demo_cmd) return kcache::tool::run_demo(demo);

    const std::string dir = cache_directory(directory);
    if (dir.empty()) return usage_error("no cache directory: give -d DIR or set KCACHE_DIR");
    max_files_given = max_files_opt->count() > 0;
    const bool maintenance = clear || cleanup || !evict_older_text.empty();
    if ((max_size_opt->count() > 0 || max_files_given) && !cleanup) {
        return usage_error("-M and -F apply budgets with -c (kcache -c -M 2G)");
    }
    if (dry_run && !maintenance)
        return usage_error("--dry-run goes with -C, -c or --evict-older-than");
    if (maintenance && app.get_subcommands().size() > 0) {
        return usage_error("-C, -c and --evict-older-than take no subcommand");
    }

    if (*compile_cmd) {
        compile.directory = dir;
        std::error_code ignored;
        compile.worker_command = std::filesystem::read_symlink("/proc/self/exe", ignored).string();
        return kcache::tool::run_compile(compile);
    }
    if (*ls_cmd) return kcache::tool::list_cache(dir, json);
    if (*inspect_cmd) return kcache::tool::inspect_entry(dir, fingerprint, json);
    if (*verify_cmd) return kcache::tool::verify_cache(dir, repair, json);
    if (!std::filesystem::is_directory(dir)) {
        return usage_error("no cache directory at " + dir);
    }
    if (clear) return kcache::tool::clear_cache(dir, dry_run);
    if (cleanup || !evict_older_text.empty()) {
        std::optional<std::chrono::seconds> older_than;
        if (!evict_older_text.empty()) {
            std::string error;
            older_than = kcache::tool::parse_age(evict_older_text, error);
            if (!older_than) return usage_error(error);
        }
        kcache::tool::Budgets budgets;  // --evict-older-than alone applies no budget
        if (cleanup) {
            std::string error;
            budgets = environment_budgets(error);
            if (!error.empty()) return usage_error(error);
            if (max_size_opt->count() > 0) {
                auto bytes = kcache::util::parse_size(max_size_text);
                if (!bytes) return usage_error(bytes.error().message());
                budgets.max_bytes = *bytes;
            }
            if (max_files_given) budgets.max_files = max_files;
        }
        return kcache::tool::cleanup_cache(dir, budgets, older_than, dry_run);
    }
    std::fputs(app.help().c_str(), stderr);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    // kcache's own calls return errors as values; this only catches what the standard library
    // or CLI11 may throw (allocation failure, say), so that it is reported, not a crash.
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kcache: %s\n", e.what());
        return 1;
    }
}
