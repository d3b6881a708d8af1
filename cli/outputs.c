/* Output paths of the CLI: resolution, checks, collisions and locks (outputs.h). */
#define _DEFAULT_SOURCE /* realpath, flock */
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_outputs_init(cli_outputs *s, const char *command) {
    memset(s, 0, sizeof *s);
    s->command = command;
    for (int i = 0; i < CLI_OUTPUTS_MAX; i++) s->lock_fd[i] = -1;
}

bool cli_path_ends_with(const char *path, const char *ext) {
    size_t len = strlen(path), el = strlen(ext);
    /* a name before the extension ("/tmp/x/.csv" is a hidden file's whole
     * name, not a CSV), and any case ("run.CSV" is a CSV) */
    return len > el && path[len - el - 1] != '/' && !strcasecmp(path + len - el, ext);
}

void cli_derived_path(const char *path, const char *ext, const char *suffix, char *buf, size_t n) {
    size_t len = strlen(path);
    if (ext && cli_path_ends_with(path, ext)) len -= strlen(ext);
    snprintf(buf, n, "%.*s%s", (int)len, path, suffix);
}

void cli_output_describe(const cli_output *o, char *buf, size_t n) {
    if (o->derived)
        snprintf(buf, n, "%s (written for %s %s)", o->given, o->option, o->of);
    else
        snprintf(buf, n, "%s %s", o->option, o->given);
}

/* Splits path into its directory ("." when none) and last component. */
static void split_path(const char *path, char *dir, size_t dn, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dn, ".");
        *base = path;
    } else {
        snprintf(dir, dn, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* Resolves `path` (following symlinks, also dangling ones) into o->path and
 * checks it is absent or a regular file in a writable directory. */
static int resolve(const cli_outputs *s, cli_output *o, const char *path, int depth) {
    char what[2 * CLI_PATH_MAX + 64];
    cli_output_describe(o, what, sizeof what);
    char note[CLI_PATH_MAX + 32] = "";
    if (depth > 0) snprintf(note, sizeof note, " (the symlink's target %s)", path);
    if (depth > 16) {
        fprintf(stderr, "%s: cannot write %s: too many levels of symlinks; give a plain file name\n", s->command,
                what);
        return 1;
    }
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        /* a symlink to an existing file (also /proc/self/fd/N) is judged by its target */
        struct stat tb;
        if (S_ISLNK(sb.st_mode) && stat(path, &tb) == 0) {
            sb = tb;
        } else if (S_ISLNK(sb.st_mode) && errno != ENOENT) {
            fprintf(stderr, "%s: cannot write %s%s: %s\n", s->command, what, note, strerror(errno));
            return 1;
        }
        if (S_ISLNK(sb.st_mode)) { /* dangling: follow by hand to the file it would create */
            char target[CLI_PATH_MAX], next[CLI_PATH_MAX];
            ssize_t len = readlink(path, target, sizeof target - 1);
            if (len < 0) {
                fprintf(stderr, "%s: cannot write %s: reading the symlink %s: %s\n", s->command, what, path,
                        strerror(errno));
                return 1;
            }
            target[len] = '\0';
            char dir[CLI_PATH_MAX];
            const char *base;
            split_path(path, dir, sizeof dir, &base);
            int w = target[0] == '/' ? snprintf(next, sizeof next, "%s", target)
                                     : snprintf(next, sizeof next, "%s/%s", dir, target);
            if (w < 0 || (size_t)w >= sizeof next) {
                fprintf(stderr, "%s: cannot write %s: the symlink %s points to a path that is too long\n",
                        s->command, what, path);
                return 1;
            }
            return resolve(s, o, next, depth + 1);
        }
        if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "%s: %s%s is a directory; give a file name (or remove the directory)\n", s->command,
                    what, note);
            return 1;
        }
        if (!S_ISREG(sb.st_mode)) {
            fprintf(stderr, "%s: %s%s is not a regular file (a device, FIFO, socket or pipe); revtorch writes its "
                            "outputs to regular files only: give a file name\n", s->command, what, note);
            return 1;
        }
        if (!realpath(path, o->path) || (!o->input && access(path, W_OK) != 0)) {
            fprintf(stderr, "%s: cannot write %s%s: %s\n", s->command, what, note, strerror(errno));
            return 1;
        }
        o->exists = true;
        o->dev = sb.st_dev;
        o->ino = sb.st_ino;
    } else if (errno == ENOENT) {
        char dir[CLI_PATH_MAX], rdir[PATH_MAX];
        const char *base;
        split_path(path, dir, sizeof dir, &base);
        if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
            fprintf(stderr, "%s: %s%s names a directory; give a file name\n", s->command, what, note);
            return 1;
        }
        if (!realpath(dir, rdir)) {
            fprintf(stderr, "%s: cannot write %s%s: directory %s: %s\n", s->command, what, note, dir,
                    strerror(errno));
            return 1;
        }
        int w = snprintf(o->path, sizeof o->path, "%s%s%s", rdir, strcmp(rdir, "/") ? "/" : "", base);
        if (w < 0 || (size_t)w >= sizeof o->path) {
            fprintf(stderr, "%s: cannot write %s%s: the path is too long\n", s->command, what, note);
            return 1;
        }
    } else {
        fprintf(stderr, "%s: cannot write %s%s: %s\n", s->command, what, note, strerror(errno));
        return 1;
    }
    /* saves write a temporary beside the file and rename it: the directory must be writable */
    if (o->input) return 0;
    char dir[CLI_PATH_MAX];
    const char *base;
    split_path(o->path, dir, sizeof dir, &base);
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "%s: cannot write %s%s: directory %s: %s\n", s->command, what, note, dir, strerror(errno));
        return 1;
    }
    return 0;
}

const cli_output *cli_outputs_add(cli_outputs *s, const char *option, const char *path, const char *of, bool input) {
    if (s->n == CLI_OUTPUTS_MAX) {
        fprintf(stderr, "%s: too many outputs\n", s->command);
        return NULL;
    }
    cli_output *o = &s->out[s->n];
    memset(o, 0, sizeof *o);
    o->option = option;
    o->derived = of != NULL;
    o->input = input;
    snprintf(o->given, sizeof o->given, "%s", path);
    snprintf(o->of, sizeof o->of, "%s", of ? of : "");
    if (!*path) {
        fprintf(stderr, "%s: %s needs a file name, got an empty one\n", s->command, option);
        return NULL;
    }
    if (resolve(s, o, path, 0)) return NULL;
    s->n++;
    return o;
}

static bool same_file(const cli_output *a, const cli_output *b) {
    if (!strcmp(a->path, b->path)) return true;
    return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
}

int cli_outputs_check_distinct(const cli_outputs *s) {
    for (int i = 0; i < s->n; i++)
        for (int j = i + 1; j < s->n; j++) {
            const cli_output *a = &s->out[i], *b = &s->out[j];
            if (!same_file(a, b)) continue;
            bool resume_save = (a->input && !strcmp(b->option, "--save")) || (b->input && !strcmp(a->option, "--save"));
            if (resume_save || (a->input && b->input)) continue;
            char da[2 * CLI_PATH_MAX + 64], db[2 * CLI_PATH_MAX + 64];
            cli_output_describe(a, da, sizeof da);
            cli_output_describe(b, db, sizeof db);
            fprintf(stderr, "%s: %s and %s are the same file (%s): one would overwrite the other; give each output "
                            "its own name\n", s->command, da, db, a->path);
            return 2;
        }
    return 0;
}

int cli_outputs_lock(cli_outputs *s) {
    for (int i = 0; i < s->n; i++) {
        const cli_output *o = &s->out[i];
        /* derived files too: another run may name X.steps.csv itself */
        char lp[CLI_PATH_MAX];
        int w = snprintf(lp, sizeof lp, "%s.lock", o->path);
        if (w < 0 || (size_t)w >= sizeof lp) {
            fprintf(stderr, "%s: cannot lock %s %s: the path is too long\n", s->command, o->option, o->given);
            return 1;
        }
        bool dup = false;
        for (int k = 0; k < s->n_locks; k++) dup |= !strcmp(s->lock_path[k], lp);
        if (dup) continue;
        for (int attempt = 0;; attempt++) {
            int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
            struct stat fs, ps;
            if (fd < 0 || fstat(fd, &fs) != 0 || !S_ISREG(fs.st_mode)) {
                fprintf(stderr, "%s: cannot lock %s %s: lock file %s: %s\n", s->command, o->option, o->given, lp,
                        fd < 0 ? strerror(errno) : "not a regular file; remove it");
                if (fd >= 0) close(fd);
                return 1;
            }
            if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                int e = errno;
                close(fd);
                if (e == EWOULDBLOCK)
                    fprintf(stderr, "%s: %s %s is in use by another run (it holds the lock %s); wait for that run "
                                    "to end or choose another %s\n", s->command, o->option, o->given, lp, o->option);
                else
                    fprintf(stderr, "%s: cannot lock %s %s (lock file %s): %s\n", s->command, o->option, o->given,
                            lp, strerror(e));
                return 1;
            }
            /* a run that just ended removed the file we opened: lock the new one */
            if (stat(lp, &ps) == 0 && ps.st_dev == fs.st_dev && ps.st_ino == fs.st_ino) {
                s->lock_fd[s->n_locks] = fd;
                memcpy(s->lock_path[s->n_locks], lp, sizeof lp);
                s->n_locks++;
                break;
            }
            close(fd);
            if (attempt == 10) {
                fprintf(stderr, "%s: cannot lock %s %s: lock file %s keeps changing\n", s->command, o->option,
                        o->given, lp);
                return 1;
            }
        }
    }
    return 0;
}

/* The outputs whose lock files a SIGINT/SIGTERM removes, and the actions
 * the handler replaced (CLI-only state: a handler has no other way to reach
 * them). */
static cli_outputs *volatile cli_signal_outputs;
static const int cli_signals[2] = {SIGINT, SIGTERM};
static struct sigaction cli_signal_prev[2];
static bool cli_signal_installed[2];

static void cli_outputs_on_signal(int sig) {
    cli_outputs *s = cli_signal_outputs;
    for (int k = 0; s && k < s->n_locks; k++) unlink(s->lock_path[k]); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_outputs_unlock_on_signal(cli_outputs *s) {
    if (s) cli_signal_outputs = s; /* before a handler can run */
    for (int i = 0; i < 2; i++) {
        if (s && !cli_signal_installed[i]) {
            struct sigaction sa = {0}, prev;
            sa.sa_handler = cli_outputs_on_signal;
            sigemptyset(&sa.sa_mask);
            /* a signal the caller ignores (trap '' INT, a background job) stays ignored */
            if (sigaction(cli_signals[i], NULL, &prev) == 0 && prev.sa_handler != SIG_IGN &&
                sigaction(cli_signals[i], &sa, &cli_signal_prev[i]) == 0)
                cli_signal_installed[i] = true;
        } else if (!s && cli_signal_installed[i]) {
            sigaction(cli_signals[i], &cli_signal_prev[i], NULL);
            cli_signal_installed[i] = false;
        }
    }
    if (!s) cli_signal_outputs = NULL; /* after the handlers are gone */
}

void cli_outputs_release(cli_outputs *s) {
    if (cli_signal_outputs == s) cli_outputs_unlock_on_signal(NULL);
    for (int k = 0; k < s->n_locks; k++) {
        unlink(s->lock_path[k]);
        close(s->lock_fd[k]);
        s->lock_fd[k] = -1;
    }
    s->n_locks = 0;
}

bool cli_csv_name_ok(const char *command, const char *option, const char *path) {
    if (!*path) {
        fprintf(stderr, "%s: %s needs a file name, got an empty one\n", command, option);
        return false;
    }
    if (!cli_path_ends_with(path, ".png")) return true;
    fprintf(stderr, "%s: %s %s: give the CSV file's name (e.g. %.*s.csv); the picture is drawn beside it with "
                    ".png\n", command, option, path, (int)strlen(path) - 4, path);
    return false;
}

void cli_tmp_name(const char *path, char *tmp, size_t n) { snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid()); }

FILE *cli_open_tmp(const char *path, char *tmp, size_t n) {
    cli_tmp_name(path, tmp, n);
    FILE *f = fopen(tmp, "w");
    if (!f) rt_error_set(RT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    return f;
}

void cli_discard_tmp(FILE *f, const char *tmp) {
    if (f) fclose(f);
    if (tmp && tmp[0]) unlink(tmp);
}

/* The failure of either half: tmp removed, RT_ERR_IO naming path with errno's reason. */
static rt_status tmp_failed(const char *tmp, const char *path) {
    int e = errno;
    unlink(tmp);
    return rt_error_set(RT_ERR_IO, "cannot write %s: %s", path, strerror(e ? e : EIO));
}

rt_status cli_close_tmp(FILE *f, const char *tmp, const char *path) {
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? tmp_failed(tmp, path) : RT_OK;
}

rt_status cli_rename_tmp(const char *tmp, const char *path) {
    return rename(tmp, path) != 0 ? tmp_failed(tmp, path) : RT_OK;
}

rt_status cli_commit_tmp(FILE *f, const char *tmp, const char *path) {
    RT_TRY(cli_close_tmp(f, tmp, path));
    return cli_rename_tmp(tmp, path);
}
