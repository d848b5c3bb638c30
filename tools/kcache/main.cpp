// SPDX-License-Identifier: Apache-2.0
// The kcache command: ccache's maintenance flags where the meaning is the same (-C, -c,
// --evict-older-than, -d), and subcommands: demo, compile, ls, inspect, verify.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cache/options_from_config.hpp"
#include "cache/settings.hpp"
#include "compile/worker_main.hpp"
#include "kcache/version.hpp"
#include "store/disk_catalog.hpp"
#include "tools/kcache/compile_command.hpp"
#include "tools/kcache/demo.hpp"
#include "tools/kcache/maintenance.hpp"
#include "tools/kcache/output.hpp"
#include "tools/kcache/remote_command.hpp"
#include "tools/kcache/stats_command.hpp"
#include "util/size.hpp"

namespace {

int run(int argc, char** argv) {
    CLI::App app{"kcache: compile a CUDA kernel once, never again"};
    app.set_version_flag("-V,--version", std::string("kcache ") + kcache::kVersion);
    app.require_subcommand(0, 1);
    app.footer(
        "Exit status: 0 success; 1 a failure while running (a compile error, a bad entry left "
        "in place, I/O); 2 a bad command line.");

    std::string directory;
    bool clear = false, cleanup = false, dry_run = false;
    std::string max_size_text, max_files_text, evict_older_text;
    std::vector<std::string> set_config;
    std::string get_config;
    bool show_config = false;
    app.add_option("-d,--dir", directory,
                   "Cache directory (default: KCACHE_DIR, else the XDG cache)");
    app.add_flag("-p,--show-config", show_config,
                 "Show every setting with its value and where it came from");
    app.add_option("-k,--get-config", get_config, "Print one setting's value");
    app.add_option("-o,--set-config", set_config, "Write KEY=VALUE to kcache.conf (repeatable)");
    bool show_stats = false, zero_stats = false, stats_json = false;
    app.add_flag("-s,--show-stats", show_stats,
                 "Statistics of every program that used the directory, and its size");
    app.add_flag("-z,--zero-stats", zero_stats, "Zero the statistics");
    app.add_flag("--json", stats_json, "With -s: JSON with stable field names");
    app.add_flag("-C,--clear", clear, "Remove every entry");
    app.add_flag("-c,--cleanup", cleanup,
                 "Apply the size and file budgets now (least recently used first): those of "
                 "kcache.conf, after any -M or -F, unless KCACHE_MAX_SIZE or KCACHE_MAX_FILES "
                 "overrides them");
    // As ccache: -M and -F always set the budget in kcache.conf (-c then applies it); a budget
    // for one cleanup only comes from the environment (KCACHE_MAX_SIZE=1G kcache -c).
    auto* max_size_opt = app.add_option(
        "-M,--max-size", max_size_text,
        "Set the byte budget (max_size) in kcache.conf, as ccache; with -c, the cleanup then "
        "applies it (k, M, G, T, Ki, Mi, Gi, Ti; a bare number is G; 0: none). For one cleanup "
        "only: KCACHE_MAX_SIZE=SIZE kcache -c");
    // Text, checked by the setting's own parser: CLI11 would wrap "-1" to 2^64-1.
    auto* max_files_opt = app.add_option(
        "-F,--max-files", max_files_text,
        "Set the file budget (max_files) in kcache.conf, as -M (0: none). For one cleanup only: "
        "KCACHE_MAX_FILES=N kcache -c");
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
                            "An include folder for CUDA C++ (outside the CUDA toolkit, only with "
                            "--allow-disk-headers)");
    compile_cmd->add_flag("--allow-disk-headers", compile.allow_disk_headers,
                          "Compile CUDA C++ that reads headers from disk outside the CUDA toolkit "
                          "(those headers are then NOT fingerprinted: a changed one is not seen)");
    compile_cmd->add_option("--option", compile.options, "A further NVRTC option");
    compile_cmd->add_option("-e,--name-expression", compile.name_expressions,
                            "A template instantiation to compile, e.g. 'softmax<float, 32>'");

    bool json = false, repair = false;
    std::string fingerprint;
    auto* ls_cmd = app.add_subcommand(
        "ls", "List the entries: fingerprint, size, age, last use, arch, kind, key, kernels");
    ls_cmd->add_flag("--json", json, "JSON instead of a table");
    bool full = false;
    std::size_t width = 0;
    auto* width_opt = ls_cmd->add_option(
        "-w,--width", width,
        "Fit the table into N columns, shortening keys and kernel names (default: the "
        "terminal's width, $COLUMNS or the tty's, when writing to one; 0: no limit)");
    ls_cmd->add_flag("-f,--full", full, "Never shorten a column")->excludes(width_opt);
    auto* inspect_cmd = app.add_subcommand("inspect", "Show one entry's key material");
    inspect_cmd->add_option("fingerprint", fingerprint, "The fingerprint or a unique prefix")
        ->required();
    inspect_cmd->add_flag("--json", json, "JSON instead of text");
    auto* verify_cmd = app.add_subcommand("verify", "Check every entry's checksum and structure");
    verify_cmd->add_flag("--repair", repair, "Remove the bad entries");
    verify_cmd->add_flag("--json", json, "JSON instead of text");

    auto* remote_cmd = app.add_subcommand("remote", "The remote tier (Redis): ping");
    remote_cmd->require_subcommand(1);
    auto* ping_cmd = remote_cmd->add_subcommand(
        "ping", "Reach every configured server: round trip, whether writes are allowed");
    ping_cmd->add_flag("--json", json, "JSON instead of text");
    std::string batch_text = "64M";
    auto* push_cmd = app.add_subcommand(
        "push", "Upload every local entry the remote tier lacks (pipelined; signed if configured)");
    push_cmd->add_option("--batch-size", batch_text, "Bytes per pipelined batch (default 64M)");
    std::vector<std::string> pull_fingerprints;
    std::string pull_arch;
    auto* pull_cmd = app.add_subcommand(
        "pull",
        "Fetch entries from the remote tier into the disk tier: by fingerprint, or every "
        "entry of an arch");
    pull_cmd->add_option("fingerprints", pull_fingerprints, "Fingerprints (32 hex digits)");
    pull_cmd->add_option("--arch", pull_arch, "Every entry of this arch (sm_XX)");
    pull_cmd->add_option("--batch-size", batch_text, "Bytes per pipelined batch (default 64M)");
    kcache::tool::KeygenOptions keygen;
    bool hmac = false;
    auto* keygen_cmd = app.add_subcommand(
        "keygen",
        "Make a signing key pair for remote entries (Ed25519), or a shared secret "
        "(--hmac)");
    keygen_cmd
        ->add_option("private", keygen.private_path,
                     "The private key (or, with --hmac, the secret) to write")
        ->required();
    keygen_cmd->add_option("public", keygen.public_path, "The public key to write (Ed25519)");
    keygen_cmd->add_flag("--hmac", hmac, "An HMAC-SHA256 shared secret instead");

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
    if (*worker_cmd) {
        kcache::cache::apply_environment_log_setting();
        return kcache::compile::run_compile_worker(0, 1);
    }
    if (*demo_cmd) return kcache::tool::run_demo(demo);
    if (*keygen_cmd) {
        if (hmac) keygen.scheme = "hmac";
        return kcache::tool::keygen(keygen);
    }

    std::map<std::string, std::string> overrides;
    if (!directory.empty()) overrides["dir"] = directory;
    auto config = kcache::cache::load_settings(overrides);
    if (!config) return usage_error(config.error().message());
    // What could not be used is said, and the rest applies, as in the library.
    for (const auto& problem : config->problems()) {
        std::fprintf(stderr, "kcache: setting not used: %s\n", problem.c_str());
    }
    const std::string dir = config->directory();
    if (dir.empty()) return usage_error("no cache directory: give -d DIR or set KCACHE_DIR");
    const bool max_files_given = max_files_opt->count() > 0;
    const bool maintenance = clear || cleanup || !evict_older_text.empty();
    const bool configuring = !set_config.empty() || max_size_opt->count() > 0 || max_files_given;
    const bool reporting = show_config || !get_config.empty() || show_stats || zero_stats;
    if (stats_json && !show_stats) return usage_error("--json goes with -s (or a subcommand)");
    if (dry_run && !maintenance) {
        return usage_error("--dry-run goes with -C, -c or --evict-older-than");
    }
    if ((maintenance || configuring || reporting) && !app.get_subcommands().empty()) {
        return usage_error("the option flags take no subcommand");
    }

    // As ccache: settings first (-o, -M, -F, each checked before anything is written), then
    // maintenance, then what to show.
    std::vector<std::pair<std::string, std::string>> writes;
    for (const auto& item : set_config) {
        const std::size_t equals = item.find('=');
        if (equals == std::string::npos)
            return usage_error("-o wants KEY=VALUE, got '" + item + "'");
        writes.emplace_back(item.substr(0, equals), item.substr(equals + 1));
    }
    if (max_size_opt->count() > 0) writes.emplace_back("max_size", max_size_text);
    if (max_files_given) writes.emplace_back("max_files", max_files_text);
    for (const auto& [key, value] : writes) {
        if (auto allowed = kcache::cache::check_file_setting(key, value); !allowed) {
            return usage_error(allowed.error().message());
        }
    }
    if (!writes.empty()) {
        // The values as the library would take them, before any is written: a value its type
        // accepts may still be out of range (compile_workers=99999999).
        std::map<std::string, std::string> trial = overrides;
        for (const auto& [key, value] : writes) {
            if (kcache::cache::find_setting(key)->scope == kcache::util::SettingScope::kAnywhere) {
                trial[key] = value;
            }
        }
        auto tried = kcache::cache::load_config("", trial);
        if (!tried) return usage_error(tried.error().message());
        if (auto options = kcache::cache::to_cache_options(*tried); !options) {
            return usage_error(options.error().message());
        }
    }
    for (const auto& [key, value] : writes) {
        if (auto written = kcache::cache::set_config_value(
                dir, kcache::cache::directory_policy(*config), key, value);
            !written) {
            std::fprintf(stderr, "kcache: %s\n", written.error().message().c_str());
            return written.error().code() == kcache::Errc::kInvalidArgument ? 2 : 1;
        }
        std::printf("%s = %s (in %s/kcache.conf)\n", kcache::tool::escape_text(key).c_str(),
                    kcache::tool::escape_text(value).c_str(),
                    kcache::tool::escape_text(dir).c_str());
    }
    if (!writes.empty()) {
        config = kcache::cache::load_settings(overrides);  // what the settings are now
        if (!config) return usage_error(config.error().message());
    }
    // The directory as the library would accept it; the commands below work through it only.
    const auto open_directory = [&](bool create =
                                        false) -> std::shared_ptr<kcache::store::CacheDirectory> {
        kcache::store::DirectoryPolicy policy = kcache::cache::directory_policy(*config);
        policy.create = create;
        auto opened = kcache::store::CacheDirectory::open(dir, policy);
        if (!opened) {
            std::fprintf(stderr, "kcache: %s\n", opened.error().message().c_str());
            return nullptr;
        }
        return std::move(*opened);
    };

    if (*compile_cmd) {
        // The library's own options for this directory (budgets, allow_shared_dir, workers), so
        // that a pre-warm stores what a program's cache would, where it would.
        auto options = kcache::cache::to_cache_options(*config);
        if (!options) return usage_error(options.error().message());
        if (options->disk_directory.empty()) {
            return usage_error("kcache compile fills the disk tier, which disk=0 (" +
                               config->get("disk")->origin_name + ") turns off");
        }
        if (options->compile_worker_command.empty()) {
            std::error_code ignored;
            options->compile_worker_command =
                std::filesystem::read_symlink("/proc/self/exe", ignored).string();
        }
        return kcache::tool::run_compile(compile, std::move(*options));
    }
    if (*remote_cmd || *push_cmd || *pull_cmd) {
        auto options = kcache::cache::to_cache_options(*config);
        if (!options) return usage_error(options.error().message());
        const auto batch_bytes = kcache::util::parse_size(batch_text);
        if (!batch_bytes || *batch_bytes == 0) {
            return usage_error("--batch-size: expected a size such as 64M, got '" + batch_text +
                               "'");
        }
        if (*remote_cmd) return kcache::tool::remote_ping(*options, json);
        const auto opened = open_directory(/*create=*/pull_cmd->parsed());
        if (!opened) return 1;
        if (*push_cmd) return kcache::tool::remote_push(*options, *opened, *batch_bytes);
        return kcache::tool::remote_pull(*options, opened, pull_fingerprints, pull_arch,
                                         *batch_bytes);
    }
    if (*ls_cmd || *inspect_cmd || *verify_cmd) {
        if (*inspect_cmd) {
            if (auto checked = kcache::store::check_fingerprint_prefix(fingerprint); !checked) {
                return usage_error(checked.error().message());
            }
        }
        const auto opened = open_directory();
        if (!opened) return 1;
        if (*ls_cmd) {
            if (full) {
                width = 0;
            } else if (width_opt->count() == 0) {
                width = kcache::tool::terminal_width(stdout);
            }
            return kcache::tool::list_cache(*opened, json, width);
        }
        if (*inspect_cmd) return kcache::tool::inspect_entry(*opened, fingerprint, json);
        return kcache::tool::verify_cache(*opened, repair, json);
    }
    int status = 0;
    std::shared_ptr<kcache::store::CacheDirectory> opened;
    std::error_code no_throw;
    if (maintenance && !std::filesystem::is_directory(dir, no_throw)) {
        return usage_error("no cache directory at " + dir);
    }
    if (zero_stats || maintenance || show_stats) {
        opened = open_directory(/*create=*/!maintenance);
        if (!opened) return 1;
    }
    if (zero_stats) status = kcache::tool::zero_stats(opened);
    if (maintenance && status == 0) {
        if (clear) status = kcache::tool::clear_cache(*opened, dry_run);
        if (status == 0 && (cleanup || !evict_older_text.empty())) {
            std::optional<std::chrono::seconds> older_than;
            if (!evict_older_text.empty()) {
                std::string error;
                older_than = kcache::tool::parse_age(evict_older_text, error);
                if (!older_than) return usage_error(error);
            }
            kcache::tool::Budgets budgets;  // --evict-older-than alone applies no budget
            if (cleanup) {
                auto options = kcache::cache::to_cache_options(*config);
                if (!options) return usage_error(options.error().message());
                budgets = {options->disk_max_bytes, options->disk_max_files};
            }
            status = kcache::tool::cleanup_cache(*opened, budgets, older_than, dry_run);
        }
    }
    if (show_config) {
        // A directory that is there but refused: its kcache.conf was not read, and -p says why.
        if (std::filesystem::exists(dir, no_throw) && !opened) (void)open_directory();
        kcache::tool::Table table({{""}, {""}, {""}, {""}}, /*show_header=*/false);
        for (const auto& entry : config->entries()) {
            table.add_row({std::string(entry.setting->key), "=", entry.printable_value(),
                           "(" + entry.origin_name + ")"});
        }
        std::fputs(table.render(0).c_str(), stdout);
    }
    if (!get_config.empty()) {
        auto entry = config->get(get_config);
        if (!entry) return usage_error(entry.error().message());
        std::printf("%s\n", entry->printable_value().c_str());
    }
    if (show_stats && status == 0) {
        auto options = kcache::cache::to_cache_options(*config);
        if (!options) return usage_error(options.error().message());
        status = kcache::tool::show_stats(opened, options->disk_max_bytes, options->disk_max_files,
                                          stats_json);
    }
    if (maintenance || configuring || reporting) return status;
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
