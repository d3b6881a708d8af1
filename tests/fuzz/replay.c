/* Replays fuzz inputs through a harness's LLVMFuzzerTestOneInput without
 * libFuzzer, so the normal (gcc, Release and ASan) test suite runs every
 * committed corpus file and every input that ever crashed.
 * Usage: fuzz_replay_<name> DIR_OR_FILE...  (a missing directory is an error,
 * so a renamed corpus cannot silently replay nothing). Exit 0 when every input
 * returned; a crash is the harness's abort or a sanitizer report. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) { fclose(f); return 1; }
    for (;;) {
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); fclose(f); return 1; }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    long count = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) { perror(argv[a]); return 1; }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[a])) return 1;
            count++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[a], &names, NULL, alphasort); /* sorted: a stable order */
        if (n < 0) { perror(argv[a]); return 1; }
        for (int i = 0; i < n; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], names[i]->d_name);
            struct stat fs;
            if (names[i]->d_name[0] != '.' && stat(path, &fs) == 0 && S_ISREG(fs.st_mode)) {
                if (replay_file(path)) return 1;
                count++;
            }
            free(names[i]);
        }
        free(names);
    }
    printf("replayed %ld inputs\n", count);
    return 0;
}
