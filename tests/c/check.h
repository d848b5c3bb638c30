// SPDX-License-Identifier: Apache-2.0
/* The C suite's harness: CHECK macros that print the calling thread's last kcache error when they
 * fail, temporary directories, and a main that runs one named test (as ctest registers them) or
 * all. C99 plus POSIX (mkdtemp, setenv, pthreads). */
#ifndef KCACHE_TESTS_C_CHECK_H
#define KCACHE_TESTS_C_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcache/kcache.h"

/* A test returns 0 when it passes, 1 when it fails, 77 when it cannot run here (skipped). */
#define C_TEST_SKIP 77
typedef int (*c_test_fn)(void);
struct c_test {
    const char* name;
    c_test_fn run;
};

#define CHECK(condition)                                                                       \
    do {                                                                                       \
        if (!(condition)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n  last error: %s\n", __FILE__, __LINE__, \
                    #condition, kcache_last_error_message());                                  \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

#define CHECK_STATUS(expected, call)                                                               \
    do {                                                                                           \
        const kcache_status check_status_ = (call);                                                \
        if (check_status_ != (expected)) {                                                         \
            fprintf(stderr, "%s:%d: %s\n  returned %s, expected %s\n  last error: %s\n", __FILE__, \
                    __LINE__, #call, kcache_status_name(check_status_),                            \
                    kcache_status_name(expected), kcache_last_error_message());                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(text, part)                                                         \
    do {                                                                                   \
        const char* check_text_ = (text);                                                  \
        if (check_text_ == NULL || strstr(check_text_, (part)) == NULL) {                  \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
                    check_text_ ? check_text_ : "(null)", (part));                         \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

/* A fresh directory under TMPDIR (or /tmp), in `path` (at least 256 bytes); 0 on success. */
int c_test_temp_dir(char* path);
/* Removes a directory made by c_test_temp_dir and everything in it. */
void c_test_remove_dir(const char* path);
/* The number of entry files (*.kc) below `directory`. */
int c_test_count_entries(const char* directory);

/* Runs the test named by argv[1], or every test when there is none; the exit status of ctest's
 * convention (0, 1, 77). */
int c_test_main(int argc, char** argv, const struct c_test* tests, size_t count);

#endif
