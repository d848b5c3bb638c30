// SPDX-License-Identifier: Apache-2.0
// The fleet test of issue 17: N node processes, each with its own empty disk directory, one
// redis-server, all asking for the same K kernels at once (four threads each, in different
// orders). Across the fleet each kernel is compiled once: the others wait on its lease and take
// its value. Then again with the first lease holder killed (SIGKILL) while it holds its lease: at
// most one extra compile, and every surviving node still gets every kernel.
//
//   kcache_fleet run [NODES] [KERNELS]     the whole test (default 16 nodes, 32 kernels)
//   kcache_fleet bench [NODES] [KERNELS]   the fleet on one Redis against as many independent
//                                          nodes (no remote tier): compiles and wall time
//   kcache_fleet node DIR URL KERNELS LEASE_MS GATE   one node (started by `run`)
//
// PTX compiled on the host by the real nvJitLink; the fake driver loads the cubins. Exits 0 when
// every assertion held, 77 (skipped) without nvJitLink or redis-server, 1 otherwise.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver/compiler_api.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "testing/fake_driver.hpp"
#include "testing/redis_server.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using kcache::fakes::RedisServer;

constexpr int kSkipped = 77;
constexpr int kThreadsPerNode = 4;

std::string self_path() {
    std::error_code ignored;
    return std::filesystem::read_symlink("/proc/self/exe", ignored).string();
}

// One node: waits for the gate, asks for every kernel from four threads, prints its counts.
int run_node(const std::string& dir, const std::string& url, int kernels, int lease_ms,
             const std::string& gate) {
    kcache::CacheOptions options;
    options.driver = std::make_shared<kcache::fakes::FakeDriver>();
    options.disk_directory = dir;
    if (url != "-") options.remote = url;
    options.remote_lease_time = std::chrono::milliseconds(lease_ms);
    kcache::KernelCache cache(options);
    while (!std::filesystem::exists(gate)) std::this_thread::sleep_for(1ms);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreadsPerNode; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kernels; ++i) {
                const int cols = 1 + (i + t * kernels / kThreadsPerNode) % kernels;
                auto kernel = cache.kernel(
                    "softmax:" + std::to_string(cols),
                    [cols] {
                        return kcache::Source::ptx(kcache::examples::softmax_rows_ptx(cols));
                    },
                    "softmax_rows");
                if (!kernel) {
                    std::fprintf(stderr, "node %d: %s\n", getpid(),
                                 kernel.error().describe().c_str());
                    ++failures;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    cache.wait_for_uploads();
    const kcache::CacheStats stats = cache.stats();
    std::printf(
        "compiles=%llu remote_hits=%llu lease_waited=%llu lease_takeovers=%llu "
        "entries=%zu failures=%d\n",
        static_cast<unsigned long long>(stats.compiles),
        static_cast<unsigned long long>(stats.remote_hits),
        static_cast<unsigned long long>(stats.remote_lease_waited),
        static_cast<unsigned long long>(stats.remote_lease_takeovers), cache.size(),
        failures.load());
    return failures == 0 ? 0 : 1;
}

struct Node {
    pid_t pid = -1;
    std::string output;  // a file
};

std::map<std::string, unsigned long long> parse_counts(const std::string& line) {
    std::map<std::string, unsigned long long> counts;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
        const auto equals = word.find('=');
        if (equals != std::string::npos) {
            counts[word.substr(0, equals)] = std::strtoull(word.c_str() + equals + 1, nullptr, 10);
        }
    }
    return counts;
}

struct RoundResult {
    unsigned long long compiles = 0;
    double seconds = 0;
};

// One round: the fleet started at once; `kill_a_holder` kills the first lease holder seen;
// `independent` nodes have no remote tier (each compiles everything).
bool round(const std::string& work, int nodes, int kernels, bool kill_a_holder,
           bool independent = false, RoundResult* result = nullptr) {
    std::filesystem::create_directories(work);
    auto started = RedisServer::start();
    if (!started) {
        std::fprintf(stderr, "fleet: %s\n", started.error().describe().c_str());
        return false;
    }
    RedisServer& server = **started;
    const std::string gate = work + "/gate";
    const int lease_ms = kill_a_holder ? 1500 : 10000;
    std::vector<Node> fleet(static_cast<std::size_t>(nodes));
    const std::string self = self_path();
    for (int n = 0; n < nodes; ++n) {
        Node& node = fleet[static_cast<std::size_t>(n)];
        node.output = work + "/node" + std::to_string(n) + ".out";
        const std::string dir = work + "/node" + std::to_string(n);
        std::vector<std::string> args = {self,
                                         "node",
                                         dir,
                                         independent ? std::string("-") : server.url(),
                                         std::to_string(kernels),
                                         std::to_string(lease_ms),
                                         gate};
        std::vector<char*> argv;
        for (auto& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, node.output.c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (posix_spawn(&node.pid, self.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
            std::fprintf(stderr, "fleet: cannot start a node\n");
            return false;
        }
        posix_spawn_file_actions_destroy(&actions);
    }
    const auto start = std::chrono::steady_clock::now();
    std::ofstream(gate).put('\n');
    pid_t killed = -1;
    if (kill_a_holder) {
        // The first lease seen: its token starts "<host>:<pid>:", and that node dies holding it.
        for (int tries = 0; tries < 20000 && killed < 0; ++tries) {
            const auto keys = server.command({"KEYS", "kcache:lease:*"});
            for (const auto& key : keys.elements) {
                auto token = server.get(key.text);
                if (!token) continue;
                const auto first = token->find(':');
                const auto second = token->find(':', first + 1);
                if (first == std::string::npos || second == std::string::npos) continue;
                killed = static_cast<pid_t>(std::atoi(token->substr(first + 1).c_str()));
                ::kill(killed, SIGKILL);
                std::printf("fleet: killed node %d holding %s\n", killed, key.text.c_str());
                break;
            }
            if (killed < 0) std::this_thread::sleep_for(1ms);
        }
        if (killed < 0) {
            std::fprintf(stderr, "fleet: saw no lease to kill its holder\n");
            return false;
        }
    }
    bool ok = true;
    unsigned long long compiles = 0, waited = 0, takeovers = 0;
    int survivors = 0;
    for (Node& node : fleet) {
        int status = 0;
        waitpid(node.pid, &status, 0);
        if (node.pid == killed) continue;
        ++survivors;
        std::ifstream in(node.output);
        std::string line;
        std::getline(in, line);
        const auto counts = parse_counts(line);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || counts.count("entries") == 0 ||
            counts.at("entries") != static_cast<unsigned long long>(kernels) ||
            counts.at("failures") != 0) {
            std::fprintf(stderr, "fleet: node %d did not get every kernel: status %d, '%s'\n",
                         node.pid, status, line.c_str());
            ok = false;
            continue;
        }
        compiles += counts.at("compiles");
        waited += counts.at("lease_waited");
        takeovers += counts.at("lease_takeovers");
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "fleet: %d nodes (%d survived), %d kernels: %llu compiles across the fleet, %llu "
        "waits on leases, %llu takeovers, %.2f s\n",
        nodes, survivors, kernels, compiles, waited, takeovers, seconds);
    if (result != nullptr) *result = {compiles, seconds};
    if (independent) return ok;
    const unsigned long long allowed = static_cast<unsigned long long>(kernels);
    if (!kill_a_holder && compiles != allowed) {
        std::fprintf(stderr, "fleet: %llu compiles, expected exactly %d\n", compiles, kernels);
        ok = false;
    }
    // The killed node's own compiles are not counted; the survivors compile what it had not
    // uploaded, and at most one kernel twice: the one whose lease died with it.
    if (kill_a_holder && compiles > allowed + 1) {
        std::fprintf(stderr, "fleet: %llu compiles by the survivors, expected at most %d\n",
                     compiles, kernels + 1);
        ok = false;
    }
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 6 && args[0] == "node") {
        return run_node(args[1], args[2], std::atoi(args[3].c_str()), std::atoi(args[4].c_str()),
                        args[5]);
    }
    if (args.empty() || (args[0] != "run" && args[0] != "bench")) {
        std::fprintf(stderr, "usage: kcache_fleet run|bench [NODES] [KERNELS]\n");
        return 2;
    }
    if (!kcache::driver::nvjitlink_api().ok()) {
        std::printf("fleet: skipped: no nvJitLink here\n");
        return kSkipped;
    }
    if (!RedisServer::available()) {
        std::printf("fleet: skipped: %s\n", RedisServer::unavailable_reason().c_str());
        return kSkipped;
    }
    const int nodes = args.size() > 1 ? std::atoi(args[1].c_str()) : 16;
    const int kernels = args.size() > 2 ? std::atoi(args[2].c_str()) : 32;
    char pattern[] = "/tmp/kcache-fleet-XXXXXX";
    const std::string work = mkdtemp(pattern);
    bool ok = true;
    if (args[0] == "bench") {
        RoundResult together, independent;
        ok = round(work + "/together", nodes, kernels, false, false, &together);
        ok = round(work + "/independent", nodes, kernels, false, true, &independent) && ok;
        std::printf(
            "\n| %d nodes, %d kernels each, at once | compiles | wall s |\n|---|---|---|\n"
            "| one Redis (remote tier, lease) | %llu | %.2f |\n"
            "| independent nodes (no remote tier) | %llu | %.2f |\n\n",
            nodes, kernels, together.compiles, together.seconds, independent.compiles,
            independent.seconds);
    } else {
        ok = round(work + "/together", nodes, kernels, false);
        ok = round(work + "/killed", nodes, kernels, true) && ok;
    }
    std::error_code ignored;
    std::filesystem::remove_all(work, ignored);
    std::printf("fleet: %s\n", ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
