/* The files a CLI command writes, checked together before any work:
 * each is absent or a regular file (a symlink counts as its target, which
 * is then written in its place), its directory is writable, no two of them
 * (derived names included) are the same file, and no other run holds them.
 *
 * Paths are resolved once here; writers are then given the resolved path,
 * so an atomic save (temporary + rename) replaces the symlink's target and
 * leaves the link itself in place, as torch.save does. */
#ifndef CLI_OUTPUTS_H
#define CLI_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/status.h"

#define CLI_OUTPUTS_MAX 12
#define CLI_PATH_MAX 4096

typedef struct cli_output {
    const char *option;      /* "--save" */
    char given[CLI_PATH_MAX]; /* the path as typed, or derived from it ("X.optim.safetensors") */
    char of[CLI_PATH_MAX];    /* derived: the option's value it was made from; else "" */
    char path[CLI_PATH_MAX];  /* resolved: symlinks followed, directory made absolute */
    bool derived, exists, input;
    dev_t dev;
    ino_t ino;
} cli_output;

typedef struct cli_outputs {
    const char *command; /* "revtorch train", for messages */
    cli_output out[CLI_OUTPUTS_MAX];
    int n;
    int lock_fd[CLI_OUTPUTS_MAX];
    char lock_path[CLI_OUTPUTS_MAX][CLI_PATH_MAX];
    int n_locks;
} cli_outputs;

/* An empty set for messages starting with `command`. */
void cli_outputs_init(cli_outputs *s, const char *command);

/* Adds `path` after resolving and checking it: the value of `option`, or
 * when `of` is not NULL a name derived from that value `of`
 * ("X.optim.safetensors" of --save X). `input` marks a file the command
 * only reads (--resume with --save), which may be the same file as --save
 * and need not be writable.
 * Returns the entry, or NULL with a message printed (exit code 1: the file
 * system does not allow it). */
const cli_output *cli_outputs_add(cli_outputs *s, const char *option, const char *path, const char *of, bool input);

/* "--save X" or "X.optim.safetensors (written for --save X)": how messages
 * name output o. */
void cli_output_describe(const cli_output *o, char *buf, size_t n);

/* False, with a message naming `command` and `option`, when `path` (the
 * value of an option that takes a CSV name and draws NAME.png beside it)
 * is empty or ends with .png (the CSV would be written under the
 * picture's name): errors in the name alone, usage errors (exit 2). */
bool cli_csv_name_ok(const char *command, const char *option, const char *path);

/* 0 when no two outputs are the same file; else prints which ones collide
 * and returns 2 (a usage error). --resume and --save may share files. */
int cli_outputs_check_distinct(const cli_outputs *s);

/* Locks every output, derived ones included (another run may name
 * X.steps.csv or X.optim.safetensors as its own output), with flock() on
 * "RESOLVED.lock", held
 * until cli_outputs_release. Returns 0, or 1 with a message when another
 * run holds one of them or a lock file cannot be made. */
int cli_outputs_lock(cli_outputs *s);

/* Removes the lock files and releases the locks (safe to call twice); also
 * ends cli_outputs_unlock_on_signal for s. */
void cli_outputs_release(cli_outputs *s);

/* Until cli_outputs_release(s): SIGINT or SIGTERM removes s's lock files
 * and then ends the process as the signal would (re-raised with the
 * default action: exit status 130 / 143 in a shell); a signal the process
 * ignores stays ignored, and release restores the previous actions. For commands without a
 * graceful stop of their own (revtorch memory --measure; train has one),
 * so an interrupted run leaves no lock files beside its outputs (which are
 * written through temporaries and renames, so none is half-written). One
 * s at a time per process. */
void cli_outputs_unlock_on_signal(cli_outputs *s);

/* "dir/run.csv" → "dir/run<suffix>" (the extension `ext` replaced when the
 * name ends with it, else suffix appended). */
void cli_derived_path(const char *path, const char *ext, const char *suffix, char *buf, size_t n);

/* True when path ends with ext in any case (".CSV" is ".csv") after a
 * name: "dir/.csv" is a hidden file named ".csv", not a CSV named "". */
bool cli_path_ends_with(const char *path, const char *ext);

/* The temporary beside path that cli_open_tmp writes: PATH.tmp.PID. */
void cli_tmp_name(const char *path, char *tmp, size_t n);

/* Opens PATH.tmp.PID (its name written into tmp, n bytes) for writing;
 * cli_commit_tmp renames it over PATH, so a failure never leaves half a
 * file. NULL with the error set (RT_ERR_IO naming the temporary) when it
 * cannot. */
FILE *cli_open_tmp(const char *path, char *tmp, size_t n);

/* Closes f and renames tmp over path; on any failure (a write error, the
 * close, the rename) removes tmp and returns RT_ERR_IO naming path. */
rt_status cli_commit_tmp(FILE *f, const char *tmp, const char *path);
/* cli_commit_tmp in two halves, for a command that writes several files
 * and renames them only once all are written: cli_close_tmp closes f and
 * checks the writes (on failure removes tmp, RT_ERR_IO naming path);
 * cli_rename_tmp renames tmp over path (on failure removes tmp, RT_ERR_IO
 * naming path). */
rt_status cli_close_tmp(FILE *f, const char *tmp, const char *path);
rt_status cli_rename_tmp(const char *tmp, const char *path);
/* Closes f (NULL: none) and removes tmp ("" or NULL: none): the output of
 * a run that failed before cli_commit_tmp, so no PATH.tmp.PID is left. */
void cli_discard_tmp(FILE *f, const char *tmp);

#endif
