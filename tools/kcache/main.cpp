// The kcache command. Subcommands grow with the tiers; today: demo.
#include <CLI/CLI.hpp>

#include "compile/worker_main.hpp"
#include "tools/kcache/demo.hpp"

namespace {

int run(int argc, char** argv) {
    CLI::App app{"kcache: compile a CUDA kernel once, never again"};
    app.set_version_flag("--version", "kcache 0.1.0");
    app.require_subcommand(1);

    kcache::tool::DemoOptions demo;
    auto* demo_cmd = app.add_subcommand(
        "demo",
        "Run an inference-like loop of shape-keyed kernels: compiles on the first pass, "
        "hits after. Without a GPU, says so and exits 0.");
    demo_cmd->add_option("--passes", demo.passes, "Passes over the layers")
        ->check(CLI::Range(1, 1000));
    demo_cmd->add_flag("--json", demo.json, "Print a JSON summary instead of the table");

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
    if (*demo_cmd) return kcache::tool::run_demo(demo);
    if (*worker_cmd) return kcache::compile::run_compile_worker(0, 1);
    return 0;
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
