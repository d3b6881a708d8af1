/* The revtorch command's subcommands. Each returns the process exit code:
 * 0 success, 1 runtime failure (message on stderr), 2 usage error: the
 * command line alone is wrong, found before any file is read (message
 * naming the option, its value, the allowed range and the fix). */
#ifndef CLI_CLI_H
#define CLI_CLI_H

int cli_cmd_train(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_memory(int argc, char **argv);
int cli_cmd_check(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_segment(int argc, char **argv);
int cli_cmd_superres(int argc, char **argv);
int cli_cmd_video(int argc, char **argv);

#endif
