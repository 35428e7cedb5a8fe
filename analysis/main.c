/*
 * main.c: the `vrampool` command's entry point, a table of subcommands in
 * the manner of bpftool's src/main.c. Each subcommand lives in its own file
 * and has a usage text; `vrampool help`, `vrampool help CMD` and
 * `vrampool CMD --help` print them (`vrampool help --help` the overview),
 * `vrampool --version` and `vrampool version` the version. An unknown
 * subcommand or option is one line on stderr and exit 2, as the
 * subcommands' bad options are (options.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "vrampool.h"

struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	void (*usage)(FILE *out);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{ "run", run_main, run_usage,
	  "run a program with the library preloaded, then print its report" },
	{ "inspect", inspect_main, inspect_usage,
	  "tell whether a program's host-to-device copies will be seen" },
	{ "report", report_main, report_usage,
	  "print stats dumps: one as a table, off/on compared, ranks side by side" },
};

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

/* Prints the overview: every subcommand with its one-line summary. */
static void usage_all(FILE *out)
{
	size_t i;

	fprintf(out,
		"usage: vrampool COMMAND [ARGS...]\n"
		"\n"
		"vrampool serves repeated host-to-device CUDA copies from a pool of\n"
		"device memory. Commands:\n\n");
	for (i = 0; i < NSUBCOMMANDS; i++)
		fprintf(out, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(out,
		"  %-8s %s\n"
		"  %-8s %s\n\n"
		"`vrampool help COMMAND` or `vrampool COMMAND --help` explains one;\n"
		"`man vrampool` has the manual.\n",
		"help", "print this text, or the usage of one command",
		"version", "print the version (also --version)");
}

/* Whether ARG asks for help. */
static bool is_help(const char *arg)
{
	return strcmp(arg, "help") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* Finds the subcommand called NAME, or returns NULL. */
static const struct subcommand *subcommand_find(const char *name)
{
	size_t i;

	for (i = 0; i < NSUBCOMMANDS; i++)
		if (strcmp(subcommands[i].name, name) == 0)
			return &subcommands[i];
	return NULL;
}

/* Says in one line that NAME is neither a command nor an option of the command. */
static int unknown_command(const char *name)
{
	fprintf(stderr, "vrampool: unknown %s '%s' (vrampool help)\n",
		name[0] == '-' ? "option" : "command", esc(name));
	return TOOL_EXIT_ERROR;
}

int main(int argc, char **argv)
{
	const struct subcommand *cmd;

	if (argc < 2) {
		usage_all(stderr);
		return TOOL_EXIT_ERROR;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0 ||
	    strcmp(argv[1], "-V") == 0) {
		printf("vrampool %s\n", VRAMPOOL_VERSION);
		return TOOL_EXIT_OK;
	}
	if (is_help(argv[1])) {
		if (argc > 2 && !is_help(argv[2])) {
			cmd = subcommand_find(argv[2]);
			if (!cmd && strcmp(argv[2], "version") == 0) {
				printf("usage: vrampool version (or vrampool --version)\n\nPrints the version of the command.\n");
				return TOOL_EXIT_OK;
			}
			if (!cmd)
				return unknown_command(argv[2]);
			cmd->usage(stdout);
			return TOOL_EXIT_OK;
		}
		usage_all(stdout);
		return TOOL_EXIT_OK;
	}
	cmd = subcommand_find(argv[1]);
	if (!cmd)
		return unknown_command(argv[1]);
	if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
		cmd->usage(stdout);
		return TOOL_EXIT_OK;
	}
	return cmd->main(argc - 1, argv + 1);
}
