// SPDX-License-Identifier: Apache-2.0
// cache/settings_table over util/config: the settings table, kcache.conf's reader and writer, the
// precedence command line > environment > kcache.conf > defaults, and the CacheOptions made from
// it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cache/options_from_config.hpp"
#include "cache/settings.hpp"
#include "cache/settings_table.hpp"
#include "test_support.hpp"

namespace kcache::cache {
namespace {

// The generic machinery's names (Setting, Config, parse_bool...); kcache's table and its rules
// (settings(), load_config, config_directory...) are cache's, which hide util's of the same name.
using namespace kcache::util;

using Overrides = std::map<std::string, std::string>;

// Sets and unsets environment variables for one test, and puts back what was there.
class ScopedEnv {
public:
    ScopedEnv() = default;
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    ~ScopedEnv() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->second) {
                setenv(it->first.c_str(), it->second->c_str(), 1);
            } else {
                unsetenv(it->first.c_str());
            }
        }
    }
    void set(const std::string& name, const std::string& value) {
        save(name);
        setenv(name.c_str(), value.c_str(), 1);
    }
    void unset(const std::string& name) {
        save(name);
        unsetenv(name.c_str());
    }

private:
    void save(const std::string& name) {
        const char* value = std::getenv(name.c_str());
        saved_.emplace_back(name,
                            value != nullptr ? std::optional<std::string>(value) : std::nullopt);
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

// Every test starts from an environment with no KCACHE_* setting in it, and a fresh directory
// that is also KCACHE_DIR (so that the user's own cache directory is never read or written).
class ConfigTest : public ::testing::Test {
protected:
    ConfigTest() {
        for (const Setting& setting : settings()) env_.unset(std::string(setting.environment));
        env_.set("KCACHE_DIR", dir_.path());
    }
    std::string conf() const { return dir_.path() + "/kcache.conf"; }
    // As a program loads them: kcache.conf read through the accepted directory.
    Config load(const Overrides& overrides = {}) {
        auto config = cache::load_settings(overrides);
        EXPECT_TRUE(config.ok()) << config.error().describe();
        return config.ok() ? std::move(config).value() : Config{};
    }
    ConfigEntry entry(const Config& config, std::string_view key) {
        auto found = config.get(key);
        EXPECT_TRUE(found.ok()) << found.error().describe();
        return found.ok() ? *found : ConfigEntry{};
    }
    // The error (a bad command line), or else the first problem (every other source).
    std::string load_error(const Overrides& overrides = {}) {
        auto config = cache::load_settings(overrides);
        if (!config) return config.error().message();
        EXPECT_FALSE(config->problems().empty());
        return config->problems().empty() ? "" : config->problems().front();
    }

    test::TempDir dir_;
    ScopedEnv env_;
};

TEST_F(ConfigTest, WithoutFileOrEnvironmentEverySettingHasItsDefault) {
    const Config config = load();
    ASSERT_EQ(config.entries().size(), settings().size());
    for (const ConfigEntry& item : config.entries()) {
        if (item.setting->key == "dir") continue;  // KCACHE_DIR, set by the fixture
        EXPECT_EQ(item.origin, SettingOrigin::kDefault) << item.setting->key;
        EXPECT_EQ(item.origin_name, "default") << item.setting->key;
        EXPECT_EQ(item.value, item.setting->default_value) << item.setting->key;
    }
    EXPECT_EQ(entry(config, "max_size").value, "4Gi");
}

TEST_F(ConfigTest, EntriesComeInTableOrder) {
    const Config config = load();
    for (std::size_t i = 0; i < settings().size(); ++i) {
        EXPECT_EQ(config.entries()[i].setting->key, settings()[i].key);
    }
}

TEST_F(ConfigTest, GetOfAnUnknownKeyListsTheKnownOnes) {
    auto missing = load().get("colour");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(missing.error().message().rfind("unknown setting 'colour' (known: log, verify, ", 0),
              0u)
        << missing.error().message();
}

TEST_F(ConfigTest, FileValueOverridesDefaultAndNamesTheFile) {
    write_text(conf(), "max_size = 10G\n");
    const ConfigEntry size = entry(load(), "max_size");
    EXPECT_EQ(size.value, "10G");
    EXPECT_EQ(size.origin, SettingOrigin::kConfigFile);
    EXPECT_EQ(size.origin_name, conf());
    EXPECT_EQ(*load().get_uint("max_size"), 10'000'000'000u);
}

TEST_F(ConfigTest, EnvironmentOverridesFile) {
    write_text(conf(), "verify = 0\n");
    env_.set("KCACHE_VERIFY", "1");
    const ConfigEntry verify = entry(load(), "verify");
    EXPECT_EQ(verify.value, "1");
    EXPECT_EQ(verify.origin, SettingOrigin::kEnvironment);
    EXPECT_EQ(verify.origin_name, "environment (KCACHE_VERIFY)");
}

TEST_F(ConfigTest, CommandLineOverridesEnvironment) {
    write_text(conf(), "max_entries = 3\n");
    env_.set("KCACHE_MAX_ENTRIES", "5");
    const ConfigEntry entries = entry(load({{"max_entries", "7"}}), "max_entries");
    EXPECT_EQ(entries.value, "7");
    EXPECT_EQ(entries.origin, SettingOrigin::kCommandLine);
    EXPECT_EQ(entries.origin_name, "command line");
}

TEST_F(ConfigTest, BadValueInFileNamesFileLineAndKey) {
    write_text(conf(), "# sizes\n\nverify = maybe\n");
    EXPECT_EQ(load_error(), conf() +
                                ":3: verify: expected 1/0, true/false, yes/no or on/off, got "
                                "'maybe'");
}

TEST_F(ConfigTest, BadSizeInFileNamesFileLineAndKey) {
    write_text(conf(), "max_size = 4 lots\n");
    const std::string error = load_error();
    EXPECT_EQ(error.rfind(conf() + ":1: max_size: bad size '4 lots'", 0), 0u) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST_F(ConfigTest, UnknownKeyInFileIsAnError) {
    write_text(conf(), "verify = 1\nmax_sise = 1G\n");
    const std::string error = load_error();
    EXPECT_EQ(error.rfind(conf() + ":2: unknown setting 'max_sise' (known: ", 0), 0u) << error;
}

TEST_F(ConfigTest, LineWithoutEqualsSignIsAnError) {
    write_text(conf(), "max_size 1G\n");
    EXPECT_EQ(load_error(), conf() + ":1: expected 'key = value', got 'max_size 1G'");
}

TEST_F(ConfigTest, DirectoryCannotBeSetInTheFileItLivesIn) {
    write_text(conf(), "dir = /elsewhere\n");
    EXPECT_NE(load_error().find(conf() + ":1: dir cannot be set in kcache.conf"),
              std::string::npos);
}

TEST_F(ConfigTest, CommentsAndBlankLinesAreIgnored) {
    write_text(conf(),
               "# kcache settings\n"
               "\n"
               "   # max_files = 1\n"
               "  \t\n"
               "\tmax_files   =   42  \n"
               "# verify = 1\n");
    const Config config = load();
    EXPECT_EQ(entry(config, "max_files").value, "42");
    EXPECT_EQ(entry(config, "verify").origin, SettingOrigin::kDefault);
}

TEST_F(ConfigTest, BadEnvironmentValueNamesTheVariable) {
    env_.set("KCACHE_MAX_FILES", "-3");
    EXPECT_EQ(load_error(), "KCACHE_MAX_FILES: expected a non-negative integer, got '-3'");
}

TEST_F(ConfigTest, BadOrUnknownCommandLineValueIsAnError) {
    EXPECT_EQ(load_error({{"disk", "perhaps"}}),
              "command line: disk: expected 1/0, true/false, yes/no or on/off, got 'perhaps'");
    EXPECT_EQ(load_error({{"colour", "1"}}).rfind("command line: unknown setting 'colour'", 0), 0u);
}

TEST_F(ConfigTest, CompilerLibrariesComeOnlyFromTheEnvironment) {
    write_text(conf(), "nvrtc_library = /opt/libnvrtc.so\n");
    EXPECT_NE(load_error().find(":1: nvrtc_library can only be set in the environment"),
              std::string::npos);
    std::filesystem::remove(conf());
    EXPECT_FALSE(load_config(dir_.path(), {{"nvjitlink_library", "/x.so"}}).ok());
    env_.set("KCACHE_NVRTC_LIBRARY", "/opt/libnvrtc.so");
    EXPECT_EQ(entry(load(), "nvrtc_library").origin, SettingOrigin::kEnvironment);
}

TEST_F(ConfigTest, SizesAcceptCcacheUnits) {
    const std::pair<const char*, std::uint64_t> cases[] = {
        {"500k", 500'000},   {"2M", 2'000'000},    {"4Gi", 4ull << 30},
        {"1Ti", 1ull << 40}, {"5", 5'000'000'000}, {"0", 0},
    };
    for (const auto& [text, bytes] : cases) {
        auto size = load({{"max_size", text}}).get_uint("max_size");
        ASSERT_TRUE(size.ok()) << text;
        EXPECT_EQ(*size, bytes) << text;
    }
    EXPECT_FALSE(load_config(dir_.path(), {{"max_size", "10X"}}).ok());
}

TEST_F(ConfigTest, BooleansAcceptTheWordsKcacheAlwaysTook) {
    for (const char* yes : {"1", "true", "yes", "on", "TRUE", "On"}) {
        EXPECT_EQ(*load({{"verify", yes}}).get_bool("verify"), true) << yes;
    }
    for (const char* no : {"0", "false", "no", "off", "False"}) {
        EXPECT_EQ(*load({{"verify", no}}).get_bool("verify"), false) << no;
    }
    EXPECT_FALSE(load_config(dir_.path(), {{"verify", "2"}}).ok());
}

TEST_F(ConfigTest, DirectoryComesFromCommandLineThenEnvironmentThenXdgThenHome) {
    env_.set("XDG_CACHE_HOME", "/xdg");
    env_.set("HOME", "/home/someone");
    auto given = config_directory({{"dir", "/given"}});
    ASSERT_TRUE(given.ok());
    EXPECT_EQ(given->value, "/given");
    EXPECT_EQ(given->origin, SettingOrigin::kCommandLine);

    auto from_env = config_directory({});
    ASSERT_TRUE(from_env.ok());
    EXPECT_EQ(from_env->value, dir_.path());
    EXPECT_EQ(from_env->origin_name, "environment (KCACHE_DIR)");

    env_.unset("KCACHE_DIR");
    EXPECT_EQ(config_directory({})->value, "/xdg/kcache");
    EXPECT_EQ(config_directory({})->origin, SettingOrigin::kDefault);
    env_.unset("XDG_CACHE_HOME");
    EXPECT_EQ(config_directory({})->value, "/home/someone/.cache/kcache");
    env_.unset("HOME");
    EXPECT_EQ(config_directory({}).error().code(), Errc::kIoError);
}

TEST_F(ConfigTest, LoadWithoutDirectoryReadsTheFileOfTheResolvedOne) {
    write_text(conf(), "max_files = 3\n");
    auto config = cache::load_settings({});
    ASSERT_TRUE(config.ok()) << config.error().describe();
    EXPECT_EQ(config->directory(), dir_.path());
    EXPECT_EQ(entry(*config, "dir").origin, SettingOrigin::kEnvironment);
    EXPECT_EQ(entry(*config, "max_files").value, "3");

    test::TempDir other;
    write_text(other.path() + "/kcache.conf", "max_files = 8\n");
    auto chosen = cache::load_settings({{"dir", other.path()}});
    ASSERT_TRUE(chosen.ok()) << chosen.error().describe();
    EXPECT_EQ(entry(*chosen, "dir").origin, SettingOrigin::kCommandLine);
    EXPECT_EQ(entry(*chosen, "max_files").value, "8");
}

TEST_F(ConfigTest, NoDirectoryAnywhereMeansNoFileAndAnEmptyDir) {
    env_.unset("KCACHE_DIR");
    env_.unset("XDG_CACHE_HOME");
    env_.unset("HOME");
    auto config = load_config("", {});
    ASSERT_TRUE(config.ok()) << config.error().describe();
    EXPECT_EQ(config->directory(), "");
    EXPECT_EQ(config->config_file(), "");
    auto options = cache::to_cache_options(*config);
    ASSERT_TRUE(options.ok());
    EXPECT_EQ(options->disk_directory, "");
}

TEST_F(ConfigTest, SetReplacesTheKeysLineKeepingCommentsAndOtherLines) {
    write_text(conf(),
               "# budgets\n"
               "max_size = 1G\n"
               "\n"
               "# checks\n"
               "verify = 1\n");
    auto set = cache::set_config_value(dir_.path(), {}, "max_size", "10Gi");
    ASSERT_TRUE(set.ok()) << set.error().describe();
    EXPECT_EQ(read_text(conf()),
              "# budgets\n"
              "max_size = 10Gi\n"
              "\n"
              "# checks\n"
              "verify = 1\n");
    EXPECT_EQ(entry(load(), "max_size").origin, SettingOrigin::kConfigFile);
}

TEST_F(ConfigTest, SetAppendsAKeyNotInTheFile) {
    write_text(conf(), "# only a comment\nverify = 1");  // no final newline
    ASSERT_TRUE(cache::set_config_value(dir_.path(), {}, "max_files", "5").ok());
    EXPECT_EQ(read_text(conf()), "# only a comment\nverify = 1\nmax_files = 5\n");
}

TEST_F(ConfigTest, SetCreatesTheDirectoryAndTheFile) {
    const std::string fresh = dir_.path() + "/new/cache";
    auto set = cache::set_config_value(fresh, {}, "compile_workers", " 4 ");
    ASSERT_TRUE(set.ok()) << set.error().describe();
    EXPECT_EQ(read_text(fresh + "/kcache.conf"), "compile_workers = 4\n");
    struct stat info {};
    ASSERT_EQ(stat(fresh.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u);
}

TEST_F(ConfigTest, SetLeavesOneLinePerKey) {
    write_text(conf(), "verify = 0\nmax_files = 1\nverify = 1\n");
    ASSERT_TRUE(cache::set_config_value(dir_.path(), {}, "verify", "yes").ok());
    EXPECT_EQ(read_text(conf()), "verify = yes\nmax_files = 1\n");
}

TEST_F(ConfigTest, SetRefusesBadInputWithoutTouchingTheFile) {
    const std::string original = "# mine\nmax_size = 1G\n";
    write_text(conf(), original);
    struct stat before {};
    ASSERT_EQ(stat(conf().c_str(), &before), 0);

    auto bad_size = cache::set_config_value(dir_.path(), {}, "max_size", "lots");
    ASSERT_FALSE(bad_size.ok());
    EXPECT_EQ(bad_size.error().message().rfind("max_size: bad size 'lots'", 0), 0u)
        << bad_size.error().message();
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "max_sise", "1G").ok());
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "dir", "/elsewhere").ok());
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "nvrtc_library", "/x.so").ok());
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "log", "1\nverify = 1").ok());

    struct stat after {};
    ASSERT_EQ(stat(conf().c_str(), &after), 0);
    EXPECT_EQ(read_text(conf()), original);
    EXPECT_EQ(after.st_ino, before.st_ino);  // not even rewritten with the same bytes
}

TEST_F(ConfigTest, ConcurrentSetsFromFourProcessesAllLand) {
    const char* const keys[] = {"max_size", "max_files", "max_entries", "compile_workers"};
    constexpr int kRounds = 25;
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> children;
    for (int k = 0; k < 4; ++k) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(go[1]);
            char byte = 0;
            (void)!read(go[0], &byte, 1);  // returns when the parent closes its end: all start
            for (int round = 0; round < kRounds; ++round) {
                const std::string value = std::to_string(100 * (k + 1) + round);
                if (!cache::set_config_value(dir_.path(), {}, keys[k], value).ok()) _exit(1);
            }
            _exit(0);
        }
        children.push_back(pid);
    }
    close(go[0]);
    close(go[1]);
    for (const pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    const Config config = load();
    for (int k = 0; k < 4; ++k) {
        const ConfigEntry item = entry(config, keys[k]);
        EXPECT_EQ(item.origin, SettingOrigin::kConfigFile) << keys[k];
        EXPECT_EQ(item.value, std::to_string(100 * (k + 1) + kRounds - 1)) << keys[k];
    }
    const std::string text = read_text(conf());
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;
}

TEST_F(ConfigTest, AFileInTheDirectoryCannotRelaxItsChecksOrNameAProgram) {
    write_text(conf(),
               "allow_shared_dir = 1\n"
               "read_only = 1\n"
               "compile_worker = /tmp/evil.sh\n"
               "max_files = 4\n");
    const Config config = load();
    EXPECT_EQ(entry(config, "allow_shared_dir").origin, SettingOrigin::kDefault);
    EXPECT_EQ(entry(config, "read_only").origin, SettingOrigin::kDefault);
    EXPECT_EQ(entry(config, "compile_worker").value, "");
    EXPECT_EQ(entry(config, "max_files").value, "4") << "the good line still applies";
    ASSERT_EQ(config.problems().size(), 3u);
    EXPECT_NE(config.problems()[0].find(conf() + ":1: allow_shared_dir cannot be set in "
                                                 "kcache.conf (it relaxes a check"),
              std::string::npos)
        << config.problems()[0];
    EXPECT_NE(config.problems()[2].find("names a program to run"), std::string::npos)
        << config.problems()[2];
    // Nor may `kcache -o` write them there.
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "compile_worker", "/tmp/evil.sh").ok());
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "allow_shared_dir", "1").ok());
}

TEST_F(ConfigTest, NothingIsReadFromADirectoryThatIsRefused) {
    write_text(conf(), "max_files = 4\ncompile_workers = 9\n");
    ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);  // anyone could have written that file
    const Config config = load();
    EXPECT_EQ(entry(config, "max_files").origin, SettingOrigin::kDefault);
    EXPECT_EQ(entry(config, "compile_workers").origin, SettingOrigin::kDefault);
    // Not a setting's problem: the disk tier says why the directory is refused.
    EXPECT_TRUE(config.problems().empty());
    // Allowed from outside the directory, it is read.
    env_.set("KCACHE_ALLOW_SHARED_DIR", "1");
    EXPECT_EQ(entry(load(), "max_files").value, "4");
}

TEST_F(ConfigTest, AConfigFileThatIsAFifoOrHugeIsAProblemNotAHang) {
    ASSERT_EQ(mkfifo(conf().c_str(), 0600), 0);
    env_.set("KCACHE_MAX_FILES", "6");
    const Config config = load();  // a blocking open would wait here for a writer forever
    EXPECT_EQ(entry(config, "max_files").value, "6");
    ASSERT_EQ(config.problems().size(), 1u);
    EXPECT_NE(config.problems()[0].find("FIFO"), std::string::npos) << config.problems()[0];
    std::filesystem::remove(conf());
    ASSERT_EQ(truncate((write_text(conf(), ""), conf()).c_str(), off_t{1} << 32), 0);
    ASSERT_EQ(load().problems().size(), 1u);
    std::filesystem::remove(conf());
    std::filesystem::create_symlink("/dev/zero", conf());
    ASSERT_EQ(load().problems().size(), 1u);
}

TEST_F(ConfigTest, OneBadSettingKeepsEveryOtherAndNeverTurnsOffASafetyOption) {
    write_text(conf(), "max_entries = 12\nmax_files = lots\n");
    env_.set("KCACHE_MAX_SIZE", "bogus");
    env_.set("KCACHE_VERIFY", "please");
    env_.set("KCACHE_READ_ONLY", "sure");
    env_.set("KCACHE_COMPILE_WORKERS", "2");
    const Config config = load();
    EXPECT_EQ(config.problems().size(), 4u);
    EXPECT_EQ(entry(config, "max_entries").value, "12");
    EXPECT_EQ(entry(config, "compile_workers").value, "2");
    EXPECT_EQ(entry(config, "max_size").value, "4Gi") << "the default, below the bad value";
    EXPECT_EQ(*config.get_bool("verify"), true) << "verification was asked for";
    EXPECT_EQ(*config.get_bool("read_only"), true) << "a read-only cache was asked for";
    EXPECT_EQ(config.directory(), dir_.path()) << "the disk tier is kept";
}

TEST_F(ConfigTest, TheLenientOptionsKeepTheDiskAndCountTheProblems) {
    env_.set("KCACHE_MAX_SIZE", "bogus");
    write_text(conf(), "max_entries = 12\n");
    const CacheOptions options = CacheOptions::from_env_lenient();
    EXPECT_EQ(options.disk_directory, dir_.path());
    EXPECT_EQ(options.max_entries, 12u);
    ASSERT_EQ(options.configuration_problems.size(), 1u);
    EXPECT_NE(options.configuration_problems[0].find("KCACHE_MAX_SIZE"), std::string::npos);
    EXPECT_FALSE(CacheOptions::from_env().ok()) << "the strict one refuses";
}

TEST_F(ConfigTest, LogLevelsAreCheckedWhereverTheyComeFrom) {
    const std::string file = dir_.path() + "/log";
    for (const std::string good : {"off", "0", "warn", "info", "1", "debug", "2", file.c_str()}) {
        EXPECT_EQ(entry(load({{"log", good}}), "log").value, good);
    }
    EXPECT_FALSE(cache::load_settings({{"log", "loud"}}).ok());
    write_text(conf(), "log = loud\n");
    EXPECT_EQ(load().problems().size(), 1u);
    // A level from the file, but no file to write to: the directory would choose it.
    write_text(conf(), "log = info\n");
    EXPECT_EQ(entry(load(), "log").value, "info");
    write_text(conf(), "log = /home/someone/.bashrc\n");
    const Config named = load();
    EXPECT_EQ(entry(named, "log").origin, SettingOrigin::kDefault);
    ASSERT_EQ(named.problems().size(), 1u);
    EXPECT_NE(named.problems()[0].find("cannot be named in kcache.conf"), std::string::npos);
    EXPECT_FALSE(cache::set_config_value(dir_.path(), {}, "log", "/tmp/x.log").ok());
    reset_log();
}

TEST_F(ConfigTest, KcacheLogReachesACacheBuiltFromExplicitOptionsButNeverOverridesTheSettings) {
    reset_log();
    env_.set("KCACHE_LOG", "info");
    EXPECT_EQ(log_level(), LogLevel::kWarn) << "util's log reads no environment of its own";
    {
        KernelCache cache(test::fake_options(std::make_shared<fakes::FakeDriver>()));
        EXPECT_EQ(log_level(), LogLevel::kInfo);
    }
    write_text(conf(), "log = off\n");
    env_.unset("KCACHE_LOG");
    reset_log();
    load();
    env_.set("KCACHE_LOG", "debug");  // after the settings were read: too late to count
    KernelCache cache(test::fake_options(std::make_shared<fakes::FakeDriver>()));
    EXPECT_EQ(log_level(), LogLevel::kOff) << "kcache.conf's setting, applied by load_settings";
    reset_log();
}

TEST_F(ConfigTest, CacheOptionsTakeEverySettingThatHasAField) {
    write_text(conf(),
               "max_entries = 7\n"
               "verify = yes\n"
               "compile_workers = 3\n");
    env_.set("KCACHE_MAX_SIZE", "2Mi");
    env_.set("KCACHE_ALLOW_SHARED_DIR", "on");
    env_.set("KCACHE_COMPILE_WORKER", "/opt/bin/kcache");
    env_.set("KCACHE_READ_ONLY", "1");
    auto options = cache::to_cache_options(load({{"max_files", "9"}}));
    ASSERT_TRUE(options.ok()) << options.error().describe();
    EXPECT_EQ(options->max_entries, 7u);
    EXPECT_TRUE(options->verify);
    EXPECT_TRUE(options->allow_shared_directory);
    EXPECT_EQ(options->compile_workers, 3u);
    EXPECT_EQ(options->compile_worker_command, "/opt/bin/kcache");
    EXPECT_EQ(options->disk_max_bytes, 2u << 20);
    EXPECT_EQ(options->disk_max_files, 9u);
    EXPECT_EQ(options->disk_directory, dir_.path());
    EXPECT_TRUE(options->read_only);

    auto no_disk = cache::to_cache_options(load({{"disk", "off"}}));
    ASSERT_TRUE(no_disk.ok());
    EXPECT_EQ(no_disk->disk_directory, "");
}

TEST_F(ConfigTest, DefaultsAreCacheOptionsDefaults) {
    auto options = cache::to_cache_options(load());
    ASSERT_TRUE(options.ok()) << options.error().describe();
    const CacheOptions defaults;
    EXPECT_EQ(options->max_entries, defaults.max_entries);
    EXPECT_EQ(options->verify, defaults.verify);
    EXPECT_EQ(options->allow_shared_directory, defaults.allow_shared_directory);
    EXPECT_EQ(options->read_only, defaults.read_only);
    EXPECT_EQ(options->compile_workers, defaults.compile_workers);
    EXPECT_EQ(options->compile_worker_command, defaults.compile_worker_command);
    EXPECT_EQ(options->disk_max_bytes, defaults.disk_max_bytes);
    EXPECT_EQ(options->disk_max_files, defaults.disk_max_files);
    EXPECT_EQ(options->host_compile, defaults.host_compile);
    EXPECT_EQ(options->memory_bytes, defaults.memory_bytes);
    EXPECT_EQ(options->bundle_warm_ups, defaults.bundle_warm_ups);
}

TEST(ConfigTable, EverySettingHasAKcacheVariableAndAOneLineDescription) {
    for (const Setting& setting : settings()) {
        for (const char c : setting.key) {
            EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || c == '_') << setting.key;
        }
        std::string upper;
        for (const char c : setting.key) {
            upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        }
        EXPECT_EQ(setting.environment, "KCACHE_" + upper);
        EXPECT_EQ(find_setting(setting.key), &setting);
        EXPECT_FALSE(setting.description.empty()) << setting.key;
        // A '|' or a line break would break the user guide's table.
        EXPECT_EQ(setting.description.find_first_of("|\n"), std::string_view::npos);
        EXPECT_EQ(setting.default_text.find_first_of("|\n"), std::string_view::npos);
        if (!setting.default_value.empty()) {
            EXPECT_TRUE(check_value(setting, setting.default_value).ok()) << setting.key;
        }
    }
    EXPECT_EQ(find_setting("no_such_setting"), nullptr);
}

TEST(ConfigTable, MarkdownHasAHeaderAndOneRowPerSetting) {
    const std::string table = settings_markdown_table();
    EXPECT_EQ(table.rfind("| setting | environment | default | meaning |\n|---|---|---|---|\n", 0),
              0u);
    EXPECT_EQ(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')),
              settings().size() + 2);
    EXPECT_NE(table.find("| `max_size` | `KCACHE_MAX_SIZE` | `4Gi` | byte budget"),
              std::string::npos);
}

// util/config knows no product: another program's table brings its own file name, directory
// setting and words, and nothing of kcache's shows in what it says.
constexpr std::array kOtherTable = {
    Setting{"home", "OTHER_HOME", SettingType::kPath, SettingScope::kNotInFile, "", "none",
            "where other.ini lives", "other.ini lives in it"},
    Setting{"jobs", "OTHER_JOBS", SettingType::kUnsigned, SettingScope::kAnywhere, "2", "`2`",
            "jobs"},
};
const SettingsSchema kOtherSchema{.settings = kOtherTable,
                                  .file_name = "other.ini",
                                  .directory_key = "home",
                                  .directory_flag = "--home",
                                  .in_code = "Other::Options"};

TEST(GenericConfig, AnotherProgramsTableSpeaksItsOwnWords) {
    const ParsedConfigFile parsed =
        util::parse_config_file(kOtherSchema, "jobs = 4\nhome = /x\ncolour = 1\n", "/o/other.ini");
    ASSERT_EQ(parsed.settings.size(), 1u);
    EXPECT_EQ(parsed.settings[0].setting, &kOtherTable[1]);
    EXPECT_EQ(parsed.settings[0].value, "4");
    ASSERT_EQ(parsed.problems.size(), 2u);
    EXPECT_EQ(parsed.problems[0],
              "/o/other.ini:2: home cannot be set in other.ini (other.ini lives in it); use --home "
              "or OTHER_HOME");
    EXPECT_EQ(parsed.problems[1], "/o/other.ini:3: unknown setting 'colour' (known: home, jobs)");
    auto refused = util::check_file_setting(kOtherSchema, "home", "/y");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message(),
              "home cannot be set in other.ini; use --home or OTHER_HOME");

    ScopedEnv env;
    env.set("OTHER_JOBS", "7");
    const ConfigFile file{.path = "/o/other.ini", .text = "jobs = 3\n", .error = std::nullopt};
    auto config = util::load_config(
        kOtherSchema, "", util::config_entry(kOtherTable[0], "/o", SettingOrigin::kCommandLine, {}),
        {}, &file);
    ASSERT_TRUE(config.ok()) << config.error().describe();
    EXPECT_EQ(config->directory(), "/o");
    EXPECT_EQ(config->config_file(), "/o/other.ini");
    EXPECT_EQ(*config->get_uint("jobs"), 7u);
    EXPECT_EQ(config->get("jobs")->origin_name, "environment (OTHER_JOBS)");
    EXPECT_EQ(util::settings_markdown_table(kOtherTable).find("kcache"), std::string::npos);
}

TEST(ConfigUserGuide, SettingsTableIsTheGeneratedOne) {
    const std::string guide = read_text(std::string(KCACHE_SOURCE_DIR) + "/docs/user-guide.md");
    const std::string open = "<!-- settings-table -->\n";
    const std::string close = "<!-- /settings-table -->";
    const auto begin = guide.find(open);
    const auto end = guide.find(close);
    // The table is the documentation of every setting: a guide without it fails, never skips.
    ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && end > begin)
        << "docs/user-guide.md has no " << open.substr(0, open.size() - 1) << " ... " << close
        << " markers; paste cache::settings_markdown_table() between them";
    std::string inside = guide.substr(begin + open.size(), end - begin - open.size());
    while (!inside.empty() && inside.front() == '\n') inside.erase(0, 1);
    while (inside.size() > 1 && inside.ends_with("\n\n")) inside.pop_back();
    EXPECT_EQ(inside, settings_markdown_table());
}

}  // namespace
}  // namespace kcache::cache
