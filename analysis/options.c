/*
 * options.c: one-line errors for bad options (options.h), worded from
 * getopt_long's own state (optopt, optind) and the subcommand's table.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "vrampool.h"

/* The long name of the option whose value is C, or NULL. */
static const char *option_long_name(const struct option *options, int c)
{
	for (; options->name; options++)
		if (!options->flag && options->val == c)
			return options->name;
	return NULL;
}

/* Prints "vrampool CMD: " (or "vrampool: ") on stderr. */
static void option_prefix(const char *cmd)
{
	fprintf(stderr, "vrampool%s%s: ", cmd ? " " : "", cmd ? cmd : "");
}

/* Prints " (vrampool help CMD)" and the newline. */
static void option_help(const char *cmd)
{
	fprintf(stderr, " (vrampool help%s%s)\n", cmd ? " " : "", cmd ? cmd : "");
}

/* Prints the option C by its long name where it has one, else as -C. */
static void option_print(const struct option *options, int c)
{
	const char *name = option_long_name(options, c);

	if (name)
		fprintf(stderr, "--%s", name);
	else
		fprintf(stderr, "-%c", c);
}

/*
 * Words the error on the long-option word ARG ("--name" or "--name=v"):
 * ambiguous (a prefix of several), given a value it takes none, or unknown.
 */
static void option_long_error(const struct option *options, const char *arg)
{
	const char *name = arg + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct option *o, *match = NULL;
	char word[256];
	int n = 0;

	snprintf(word, sizeof(word), "--%.*s", (int)len, name);
	for (o = options; o->name; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		match = o;
		if (strlen(o->name) == len) {
			n = 1;
			break;
		}
		n++;
	}
	if (n > 1) {
		fprintf(stderr, "ambiguous option '%s' (", esc(word));
		for (o = options, n = 0; o->name; o++)
			if (strncmp(o->name, name, len) == 0)
				fprintf(stderr, "%s--%s", n++ ? ", " : "", o->name);
		fprintf(stderr, ")");
	} else if (n == 1 && eq && match->has_arg == no_argument) {
		fprintf(stderr, "option '--%s' takes no value", match->name);
	} else {
		fprintf(stderr, "unknown option '%s'", esc(word));
	}
}

int tool_option_error(const char *cmd, const struct option *options, int c,
		      int argc, char **argv)
{
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	char letter[2] = { (char)optopt, '\0' };

	option_prefix(cmd);
	if (c == ':') {
		option_print(options, optopt);
		fprintf(stderr, " needs a value");
	} else if (optopt) {
		if (option_long_name(options, optopt) && strncmp(arg, "--", 2) == 0)
			option_long_error(options, arg);
		else
			fprintf(stderr, "unknown option '-%s'", esc(letter));
	} else if (strncmp(arg, "--", 2) == 0) {
		option_long_error(options, arg);
	} else {
		fprintf(stderr, "unknown option '%s'", esc(arg));
	}
	option_help(cmd);
	return TOOL_EXIT_ERROR;
}

bool tool_option_empty(const char *cmd, const struct option *options, int c,
		       const char *value)
{
	if (!value || *value)
		return false;
	option_prefix(cmd);
	option_print(options, c);
	fprintf(stderr, " needs a value");
	option_help(cmd);
	return true;
}
