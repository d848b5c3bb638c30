// SPDX-License-Identifier: Apache-2.0
#include "testing/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

extern char** environ;

namespace kcache::fakes {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string server_binary() {
    const char* given = std::getenv("KCACHE_TEST_REDIS_SERVER");
    return given != nullptr && *given != '\0' ? given : "redis-server";
}

// redis-cli beside an explicitly given server, else from PATH.
std::string cli_binary() {
    const char* given = std::getenv("KCACHE_TEST_REDIS_SERVER");
    if (given != nullptr && *given != '\0') {
        auto beside = std::filesystem::path(given).parent_path() / "redis-cli";
        if (::access(beside.c_str(), X_OK) == 0) return beside.string();
    }
    return "redis-cli";
}

std::string read_file_tail(const std::string& path, std::size_t limit) {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > limit ? text.substr(text.size() - limit) : text;
}

util::UniqueFd loopback_listener(int backlog, std::uint16_t* port) {
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return {};
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return {};
    if (backlog >= 0 && ::listen(fd.get(), backlog) != 0) return {};
    socklen_t length = sizeof address;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
    *port = ntohs(address.sin_port);
    return fd;
}

// A port that was free a moment ago: the kernel's pick for port 0, released. Another process may
// take it before the server binds it; start() then tries another.
std::uint16_t free_port() {
    std::uint16_t port = 0;
    auto fd = loopback_listener(-1, &port);
    return fd ? port : 0;
}

util::UniqueFd connect_loopback(std::uint16_t port) {
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return {};
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return {};
    // A stopped server must not hang the harness itself: its client waits at most this long.
    timeval timeout{10, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    return fd;
}

std::string format_resp(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& arg : args) {
        out += "$" + std::to_string(arg.size()) + "\r\n";
        out += arg;
        out += "\r\n";
    }
    return out;
}

bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// The harness's blocking RESP reader: a failure is a reply of type '!' naming it.
class RespStream {
public:
    explicit RespStream(int fd) : fd_(fd) {}

    RespValue read() {
        RespValue value;
        std::string line;
        if (!read_line(&line) || line.empty()) return failed("connection closed or timed out");
        value.type = line[0];
        value.text = line.substr(1);
        switch (value.type) {
            case '+':
            case '-':
            case ':':
                return value;
            case '$': {
                const long long length = std::stoll(value.text);
                value.text.clear();
                if (length < 0) {
                    value.type = '_';
                    return value;
                }
                if (!read_exact(static_cast<std::size_t>(length) + 2, &value.text)) {
                    return failed("bulk string cut short");
                }
                value.text.resize(static_cast<std::size_t>(length));
                return value;
            }
            case '*': {
                const long long count = std::stoll(value.text);
                value.text.clear();
                if (count < 0) {
                    value.type = '_';
                    return value;
                }
                for (long long i = 0; i < count; ++i) value.elements.push_back(read());
                return value;
            }
            default:
                return failed("not RESP: " + line);
        }
    }

private:
    static RespValue failed(std::string why) {
        RespValue value;
        value.type = '!';
        value.text = std::move(why);
        return value;
    }
    bool fill() {
        char chunk[65536];
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n <= 0) return false;
        buffer_.append(chunk, static_cast<std::size_t>(n));
        return true;
    }
    bool read_line(std::string* line) {
        std::size_t end;
        while ((end = buffer_.find("\r\n")) == std::string::npos) {
            if (!fill()) return false;
        }
        *line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return true;
    }
    bool read_exact(std::size_t count, std::string* out) {
        while (buffer_.size() < count) {
            if (!fill()) return false;
        }
        *out = buffer_.substr(0, count);
        buffer_.erase(0, count);
        return true;
    }

    int fd_;
    std::string buffer_;
};

bool send_all_pipe(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// Runs `argv`, with `input` on its stdin; its stdout (and its stderr too if `with_stderr`).
std::string run_program(const std::vector<std::string>& argv, const std::string& input,
                        bool with_stderr) {
    int out_pipe[2], in_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return {};
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        return {};
    }
    util::UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
    util::UniqueFd in_read(in_pipe[0]), in_write(in_pipe[1]);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_read.get(), STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
    if (with_stderr) {
        posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDERR_FILENO);
    } else {
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t child = -1;
    const int spawned = posix_spawnp(&child, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    in_read.reset();
    out_write.reset();
    if (spawned != 0) return {};

    // Writes stdin from a thread: a large value would otherwise fill both pipes and deadlock.
    std::thread writer([&] {
        // A redis-cli that exits early must not take the test down with SIGPIPE: blocked in this
        // thread, the write fails with EPIPE instead.
        sigset_t pipe_signal;
        sigemptyset(&pipe_signal);
        sigaddset(&pipe_signal, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
        (void)send_all_pipe(in_write.get(), input);
        in_write.reset();
    });
    std::string output;
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::read(out_read.get(), chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        output.append(chunk, static_cast<std::size_t>(n));
    }
    writer.join();
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return output;
}

}  // namespace

// ---- RedisServer ----

Result<std::unique_ptr<RedisServer>> RedisServer::start(RedisServerOptions options) {
    std::unique_ptr<RedisServer> server(new RedisServer());
    server->options_ = std::move(options);
    std::string pattern = (std::filesystem::temp_directory_path() / "kcache-redis-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        return Error(Errc::kIoError, "redis harness: mkdtemp: " + std::string(strerror(errno)));
    }
    server->directory_ = pattern;
    // A port taken between free_port() and the server's bind makes it exit: try another.
    std::string last_error;
    for (int attempt = 0; attempt < 8; ++attempt) {
        server->port_ = free_port();
        if (server->port_ == 0) return Error(Errc::kIoError, "redis harness: no free port");
        auto launched = server->launch();
        if (launched) return server;
        last_error = launched.error().message();
        if (last_error.find("Address already in use") == std::string::npos) break;
    }
    return Error(Errc::kIoError, last_error);
}

Result<void> RedisServer::launch() {
    const std::string conf_path = directory_ + "/redis.conf";
    const std::string log_path = directory_ + "/redis.log";
    {
        std::ofstream conf(conf_path, std::ios::trunc);
        conf << "port " << port_ << "\n"
             << "bind 127.0.0.1\n"
             << "dir " << directory_ << "\n"
             << "save \"\"\n"
             << "appendonly no\n"
             << "protected-mode no\n"
             << "daemonize no\n"
             << "logfile " << log_path << "\n";
        if (options_.unix_socket) {
            conf << "unixsocket " << unix_socket() << "\n"
                 << "unixsocketperm 700\n";
        }
        if (!options_.password.empty()) conf << "requirepass " << options_.password << "\n";
        for (const auto& line : options_.config_lines) conf << line << "\n";
        if (!conf) return Error(Errc::kIoError, "redis harness: cannot write " + conf_path);
    }
    std::ofstream(log_path, std::ios::trunc).close();

    const std::string binary = server_binary();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_APPEND,
                                     0);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>(conf_path.c_str()),
                    nullptr};
    pid_t child = -1;
    const int spawned = posix_spawnp(&child, binary.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        return Error(Errc::kIoError, "redis harness: cannot run " + binary + ": " +
                                         std::strerror(spawned) +
                                         " (install redis-server or set KCACHE_TEST_REDIS_SERVER)");
    }
    pid_ = child;

    // Up when it answers PING on its TCP port: PONG, or NOAUTH under requirepass.
    const auto give_up = Clock::now() + 10s;
    while (Clock::now() < give_up) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return Error(Errc::kIoError, "redis harness: " + binary +
                                             " exited at start: " + read_file_tail(log_path, 600));
        }
        if (auto fd = connect_loopback(port_)) {
            if (send_all(fd.get(), format_resp({"PING"}))) {
                const RespValue pong = RespStream(fd.get()).read();
                if (pong.type == '+' || pong.type == '-') return ok();
            }
        }
        std::this_thread::sleep_for(10ms);
    }
    kill();
    return Error(Errc::kIoError, "redis harness: " + binary + " did not answer PING in time: " +
                                     read_file_tail(log_path, 600));
}

namespace {
struct Probe {
    bool available = false;
    std::string reason;
};
const Probe& probe() {
    static const Probe result = [] {
        Probe p;
        auto server = RedisServer::start();
        p.available = server.ok();
        if (!server) p.reason = "redis-server cannot start: " + server.error().message();
        return p;
    }();
    return result;
}
bool required() {
    const char* value = std::getenv("KCACHE_TEST_REQUIRE_REDIS");
    return value != nullptr && std::string_view(value) == "1";
}
}  // namespace

bool RedisServer::available() {
    return required() || probe().available;
}

std::string RedisServer::unavailable_reason() {
    return probe().available ? std::string() : probe().reason;
}

RedisServer::~RedisServer() {
    kill();
    std::error_code ignored;
    if (!directory_.empty()) std::filesystem::remove_all(directory_, ignored);
}

std::string RedisServer::unix_socket() const {
    return options_.unix_socket ? directory_ + "/redis.sock" : std::string();
}

std::string RedisServer::url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
}

void RedisServer::stop() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

void RedisServer::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
}

Result<void> RedisServer::restart() {
    kill();
    // The port stays ours in practice: the kernel does not hand out a just-closed listener's
    // port again at once, and redis-server binds with SO_REUSEADDR.
    return launch();
}

std::string RedisServer::cli(const std::vector<std::string>& args, const std::string& input) const {
    std::vector<std::string> argv{cli_binary(), "-h", "127.0.0.1", "-p", std::to_string(port_)};
    if (!options_.password.empty()) {
        argv.insert(argv.end(), {"--no-auth-warning", "-a", options_.password});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, input, false);
}

RespValue RedisServer::command(const std::vector<std::string>& args) const {
    auto fd = connect_loopback(port_);
    RespValue failed;
    failed.type = '!';
    if (!fd) {
        failed.text = "cannot connect to 127.0.0.1:" + std::to_string(port_);
        return failed;
    }
    RespStream stream(fd.get());
    if (!options_.password.empty()) {
        if (!send_all(fd.get(), format_resp({"AUTH", options_.password}))) return failed;
        RespValue auth = stream.read();
        if (auth.type != '+') return auth;
    }
    if (!send_all(fd.get(), format_resp(args))) {
        failed.text = "send failed";
        return failed;
    }
    return stream.read();
}

bool RedisServer::set(const std::string& key, const std::string& value) const {
    const RespValue reply = command({"SET", key, value});
    return reply.type == '+' && reply.text == "OK";
}

std::optional<std::string> RedisServer::get(const std::string& key) const {
    RespValue reply = command({"GET", key});
    if (reply.type != '$') return std::nullopt;
    return std::move(reply.text);
}

// ---- TricklingServer ----

namespace {
bool make_wake_pipe(util::UniqueFd* read_end, util::UniqueFd* write_end) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    read_end->reset(fds[0]);
    write_end->reset(fds[1]);
    return true;
}

// Waits for `fd` to become readable or the wake pipe to close: false when woken to stop.
bool wait_readable(int fd, int wake, int timeout_ms = -1) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
    for (;;) {
        const int n = ::poll(fds, 2, timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        if (fds[1].revents != 0) return false;
        return n > 0;
    }
}
}  // namespace

TricklingServer::TricklingServer(std::string reply, std::chrono::milliseconds interval,
                                 std::size_t chunk)
    : reply_(std::move(reply)), interval_(interval), chunk_(std::max<std::size_t>(chunk, 1)) {
    listener_ = loopback_listener(16, &port_);
    make_wake_pipe(&wake_read_, &wake_write_);
    thread_ = std::thread([this] { serve(); });
}

TricklingServer::~TricklingServer() {
    wake_write_.reset();
    thread_.join();
}

std::string TricklingServer::url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
}

void TricklingServer::serve() {
    // One connection at a time, which is all a test of one request needs.
    while (wait_readable(listener_.get(), wake_read_.get())) {
        util::UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!client) continue;
        ++accepted_;
        for (;;) {
            // Each arrival of request bytes is answered with the whole reply, trickled.
            if (!wait_readable(client.get(), wake_read_.get())) return;
            char request[4096];
            const ssize_t n = ::recv(client.get(), request, sizeof request, 0);
            if (n <= 0) break;
            bool open = true;
            for (std::size_t at = 0; at < reply_.size(); at += chunk_) {
                if (wait_readable(wake_read_.get(), wake_read_.get(),
                                  static_cast<int>(interval_.count()))) {
                    return;
                }
                const std::size_t size = std::min(chunk_, reply_.size() - at);
                if (!send_all(client.get(), std::string_view(reply_).substr(at, size))) {
                    open = false;
                    break;
                }
                written_ += static_cast<std::int64_t>(size);
            }
            if (!open) break;
        }
    }
}

// ---- SilentServer ----

SilentServer::SilentServer() {
    listener_ = loopback_listener(16, &port_);
    make_wake_pipe(&wake_read_, &wake_write_);
    thread_ = std::thread([this] { serve(); });
}

SilentServer::~SilentServer() {
    wake_write_.reset();
    thread_.join();
}

std::string SilentServer::url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
}

void SilentServer::serve() {
    std::vector<util::UniqueFd> clients;  // held open, never answered, until the server goes
    std::vector<pollfd> fds;
    for (;;) {
        fds.clear();
        fds.push_back({wake_read_.get(), POLLIN, 0});
        fds.push_back({listener_.get(), POLLIN, 0});
        for (const auto& client : clients) fds.push_back({client.get(), POLLIN, 0});
        const int n = ::poll(fds.data(), fds.size(), -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || fds[0].revents != 0) return;
        if (fds[1].revents & POLLIN) {
            util::UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (client) {
                ++accepted_;
                clients.push_back(std::move(client));
            }
        }
        // Reads and discards requests, so that a client's send never blocks on a full buffer.
        for (std::size_t i = 2; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            char sink[4096];
            (void)::recv(fds[i].fd, sink, sizeof sink, MSG_DONTWAIT);
        }
    }
}

// ---- BlackholeListener ----

BlackholeListener::BlackholeListener() {
    // A backlog of 0 still queues a connection or so; the fillers take those places, and the
    // first filler whose connect does not complete shows that later SYNs are dropped.
    listener_ = loopback_listener(0, &port_);
    if (!listener_) return;
    for (int i = 0; i < 8 && !ready_; ++i) {
        util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) return;
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(port_);
        const int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
        if (rc != 0 && errno != EINPROGRESS) return;
        if (rc != 0) {
            pollfd pfd{fd.get(), POLLOUT, 0};
            if (::poll(&pfd, 1, 200) == 0) ready_ = true;
        }
        fillers_.push_back(std::move(fd));
    }
}

std::string BlackholeListener::url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
}

}  // namespace kcache::fakes
