// SPDX-License-Identifier: Apache-2.0
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/bench.hpp"

namespace kcache::bench {

// When KCACHE_BENCH_PERF is "ctl,ack,event" (perf's control and ack fifos, as given to
// `perf record -D -1 --control fifo:ctl,ack`, and the sampling event's name), the timed loads are
// all that perf samples: the window opens as the clock starts and shuts as it stops. Only that
// event is switched, so perf's tracking of the process's mappings goes on between windows.
// Without the variable, nothing happens.
void profile_window(const char* command) {
    static const char* setting = std::getenv("KCACHE_BENCH_PERF");
    if (setting == nullptr) return;
    const std::string text(setting);
    const std::size_t first = text.find(','), second = text.find(',', first + 1);
    if (second == std::string::npos) return;
    std::ofstream(text.substr(0, first)) << command << ' ' << text.substr(second + 1) << '\n'
                                         << std::flush;
    std::ifstream ack(text.substr(first + 1, second - first - 1));
    std::string line;
    std::getline(ack, line);  // perf's "ack": the window is open (or shut) from here on
}

}  // namespace kcache::bench
