/*
 * options: the one-line errors of the command's option parsing, shared by
 * every subcommand (run, inspect, report) so that a bad option reads the
 * same everywhere, as git and coreutils do:
 *
 *   vrampool run: unknown option '--bogus' (vrampool help run)
 *
 * The subcommands call getopt_long with opterr = 0 and an option string
 * that starts "+:" (stop at the first operand; report a missing argument
 * as ':'), and hand anything it returns that is not an option of theirs to
 * tool_option_error. An empty value ("--layout ''") is refused as a
 * missing one by tool_option_empty: none of the command's options takes
 * an empty string to mean anything. Nothing here keeps state.
 */
#ifndef VRAMPOOL_OPTIONS_H
#define VRAMPOOL_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>

/*
 * Prints on stderr the one line for getopt_long's result C ('?': an
 * unknown, ambiguous or valueless-but-given-a-value option; ':': a
 * missing value), naming subcommand CMD ("run"; NULL for the command
 * itself), the offending ARGV word (optind has passed it) and the help
 * that explains it. OPTIONS is the subcommand's table. Returns the exit
 * status, TOOL_EXIT_ERROR (2).
 */
int tool_option_error(const char *cmd, const struct option *options, int c,
		      int argc, char **argv);

/*
 * Whether VALUE, the argument of option C of OPTIONS, is empty; when it is,
 * prints "vrampool CMD: --NAME needs a value (vrampool help CMD)" on stderr.
 */
bool tool_option_empty(const char *cmd, const struct option *options, int c,
		       const char *value);

#endif
