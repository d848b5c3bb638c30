// SPDX-License-Identifier: Apache-2.0
/* The C suite's harness (check.h). */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int c_test_temp_dir(char* path) {
    const char* base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    if (snprintf(path, 256, "%s/kcache-c-test-XXXXXX", base) >= 256) return -1;
    return mkdtemp(path) != NULL ? 0 : -1;
}

void c_test_remove_dir(const char* path) {
    char command[512];
    if (strstr(path, "kcache-c-test-") == NULL || strchr(path, '\'') != NULL) return;
    if (snprintf(command, sizeof command, "rm -rf '%s'", path) < (int)sizeof command) {
        if (system(command) != 0) fprintf(stderr, "could not remove %s\n", path);
    }
}

int c_test_count_entries(const char* directory) {
    char command[512];
    FILE* pipe;
    int count = -1;
    if (strchr(directory, '\'') != NULL) return -1;
    snprintf(command, sizeof command, "find '%s' -type f -name '*.kc' | wc -l", directory);
    pipe = popen(command, "r");
    if (pipe == NULL) return -1;
    if (fscanf(pipe, "%d", &count) != 1) count = -1;
    pclose(pipe);
    return count;
}

int c_test_main(int argc, char** argv, const struct c_test* tests, size_t count) {
    size_t i;
    int failed = 0, ran = 0;
    for (i = 0; i < count; ++i) {
        int result;
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
        ++ran;
        result = tests[i].run();
        printf("%-70s %s\n", tests[i].name,
               result == 0             ? "passed"
               : result == C_TEST_SKIP ? "skipped"
                                       : "FAILED");
        if (argc > 1) return result;
        if (result != 0 && result != C_TEST_SKIP) ++failed;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(none)");
        return 1;
    }
    return failed == 0 ? 0 : 1;
}
