/* `revtorch superres`: the --out directory (created with its parents, removed
 * again when a failed eval leaves it empty) and the files in it, written to
 * a temporary name and renamed so that a failure never leaves half a file. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "outputs.h"
#include "superres_internal.h"

/* Creates --out and its missing parents (mkdir -p) unless it exists as a
 * directory. *created (optional) receives how many path levels were made, for
 * cli_sr_unmake_out. */
int cli_sr_make_out(const cli_sr_opts *o, int *created) {
    if (created) *created = 0;
    struct stat sb;
    if (stat(o->out, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return -1;
        fprintf(stderr, "revtorch superres %s: --out %s exists and is not a directory\n", o->cmd, o->out);
        return 1;
    }
    char path[CLI_PATH_MAX];
    if (snprintf(path, sizeof path, "%s", o->out) >= (int)sizeof path) {
        fprintf(stderr, "revtorch superres %s: --out %s: path too long\n", o->cmd, o->out);
        return 1;
    }
    int made = 0;
    for (char *p = path + 1;; p++) { /* each prefix ending before a '/', then the whole path */
        const bool end = *p == '\0';
        if (*p != '/' && !end) continue;
        *p = '\0';
        if (mkdir(path, 0777) == 0) made++;
        else if (errno != EEXIST || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "revtorch superres %s: cannot create --out %s (at %s): %s\n", o->cmd, o->out, path,
                    strerror(errno == EEXIST ? ENOTDIR : errno));
            return 1;
        }
        if (end) break;
        *p = '/';
    }
    if (created) *created = made;
    return -1;
}

/* Removes the `created` innermost levels of --out that cli_sr_make_out made, if
 * still empty (rmdir fails on a non-empty directory). */
void cli_sr_unmake_out(const cli_sr_opts *o, int created) {
    char path[CLI_PATH_MAX];
    snprintf(path, sizeof path, "%s", o->out);
    for (int i = 0; i < created; i++) {
        size_t l = strlen(path);
        while (l > 1 && path[l - 1] == '/') path[--l] = '\0';
        if (rmdir(path) != 0) return;
        char *slash = strrchr(path, '/');
        if (!slash) return;
        *slash = '\0';
    }
}

void cli_sr_out_path(const cli_sr_opts *o, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", o->out, name);
}
