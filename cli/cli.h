/* The revtorch command's subcommands. Each returns the process exit code:
 * 0 success, 1 failure (message on stderr), 2 usage error. */
#ifndef RT_CLI_CLI_H
#define RT_CLI_CLI_H

int rt_cmd_train(int argc, char **argv);
int rt_cmd_eval(int argc, char **argv);
int rt_cmd_bench(int argc, char **argv);
int rt_cmd_memory(int argc, char **argv);
int rt_cmd_check(int argc, char **argv);

#endif
