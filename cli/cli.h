/* The revtorch command's subcommands. Each returns the process exit code:
 * 0 success, 1 failure (message on stderr), 2 usage error. */
#ifndef CLI_CLI_H
#define CLI_CLI_H

int cli_cmd_train(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_memory(int argc, char **argv);
int cli_cmd_check(int argc, char **argv);

#endif
