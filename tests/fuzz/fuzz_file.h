/* Gives a fuzz input a file name, for readers that take a path.
 *
 * The bytes go into one memfd per process (memory, no disk traffic), rewritten
 * for every input. Two names reach it: /proc/self/fd/N, and a symlink ending
 * in ".gz" inside a private temporary directory, so readers that pick a code
 * path by the name's suffix (rt_idx_read) get both paths exercised by one input.
 * Harness-only code (tests/fuzz), never part of the library. */
#ifndef RT_FUZZ_FILE_H
#define RT_FUZZ_FILE_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mem.h"

typedef struct rt_fuzz_file {
    int fd;
    char plain[64];  /* /proc/self/fd/N */
    char dir[64];    /* private temporary directory */
    char gz[96];     /* DIR/input.gz -> /proc/self/fd/N */
} rt_fuzz_file;

static rt_fuzz_file rt_fuzz_f = {-1, "", "", ""};

static void rt_fuzz_file_cleanup(void) {
    if (rt_fuzz_f.gz[0]) unlink(rt_fuzz_f.gz);
    if (rt_fuzz_f.dir[0]) rmdir(rt_fuzz_f.dir);
}

/* Writes data to the memfd; returns the shared state (aborts the harness if
 * the OS refuses: that is not a finding about the reader). */
static const rt_fuzz_file *rt_fuzz_file_put(const uint8_t *data, size_t size) {
    if (rt_fuzz_f.fd < 0) {
        rt_fuzz_f.fd = memfd_create("rt_fuzz", 0);
        if (rt_fuzz_f.fd < 0) { perror("memfd_create"); abort(); }
        snprintf(rt_fuzz_f.plain, sizeof rt_fuzz_f.plain, "/proc/self/fd/%d", rt_fuzz_f.fd);
        const char *tmp = getenv("TMPDIR");
        snprintf(rt_fuzz_f.dir, sizeof rt_fuzz_f.dir, "%s/rt_fuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(rt_fuzz_f.dir)) { perror("mkdtemp"); abort(); }
        snprintf(rt_fuzz_f.gz, sizeof rt_fuzz_f.gz, "%s/input.gz", rt_fuzz_f.dir);
        if (symlink(rt_fuzz_f.plain, rt_fuzz_f.gz) != 0) { perror("symlink"); abort(); }
        atexit(rt_fuzz_file_cleanup);
    }
    if (ftruncate(rt_fuzz_f.fd, 0) != 0) { perror("ftruncate"); abort(); }
    size_t done = 0;
    while (done < size) {
        ssize_t k = pwrite(rt_fuzz_f.fd, data + done, size - done, (off_t)done);
        if (k <= 0) { perror("pwrite"); abort(); }
        done += (size_t)k;
    }
    return &rt_fuzz_f;
}

/* Every tracked byte a reader booked must be returned, success or failure. */
static void rt_fuzz_check_no_tracked_leak(const char *what) {
    rt_memstats ms;
    rt_memstats_get(&ms);
    if (ms.live_total != 0) {
        fprintf(stderr, "%s left %lld tracked bytes live\n", what, (long long)ms.live_total);
        abort();
    }
}

#endif
