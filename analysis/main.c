/*
 * main.c: the `vrampool` command's entry point, a table of subcommands in
 * the manner of bpftool's src/main.c. Each subcommand lives in its own file
 * and has a usage text; `vrampool help`, `vrampool help CMD` and
 * `vrampool CMD --help` print them. An unknown subcommand exits with 2.
 */
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
	  "print one stats dump as a table, or compare two (off, on)" },
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
		"  %-8s %s\n\n"
		"`vrampool help COMMAND` or `vrampool COMMAND --help` explains one.\n",
		"help", "print this text, or the usage of one command");
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

int main(int argc, char **argv)
{
	const struct subcommand *cmd;

	if (argc < 2) {
		usage_all(stderr);
		return TOOL_EXIT_ERROR;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		if (argc > 2) {
			cmd = subcommand_find(argv[2]);
			if (!cmd) {
				fprintf(stderr, "vrampool: unknown command '%s'\n", argv[2]);
				usage_all(stderr);
				return TOOL_EXIT_ERROR;
			}
			cmd->usage(stdout);
			return TOOL_EXIT_OK;
		}
		usage_all(stdout);
		return TOOL_EXIT_OK;
	}
	cmd = subcommand_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "vrampool: unknown command '%s'\n\n", argv[1]);
		usage_all(stderr);
		return TOOL_EXIT_ERROR;
	}
	if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
		cmd->usage(stdout);
		return TOOL_EXIT_OK;
	}
	return cmd->main(argc - 1, argv + 1);
}
