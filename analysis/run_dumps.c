/*
 * run_dumps.c: what `vrampool run` does after each run of CMD (run.h).
 *
 * Children of CMD inherit LD_PRELOAD and write one dump each (the stats path
 * has %p). The report takes the dumps of the processes that made copies:
 * one is reported alone, several side by side (one column per rank or
 * process); --ab sums each run's into one for the comparison. A run that
 * wrote no dump is explained: it failed or was killed first, its copies
 * cannot be seen, or it made no CUDA call.
 */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run.h"
#include "vrampool.h"

#define MAX_DUMPS 256

/* Turns the stats PATTERN into a glob: %p, %r, %h match anything, the rest literally. */
static void pattern_glob(const char *pattern, char *out, size_t size)
{
	const char *p;
	size_t o = 0;

	for (p = pattern; *p && o + 3 < size; p++) {
		if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == 'h')) {
			out[o++] = '*';
			p++;
		} else {
			if (strchr("*?[]\\", *p))
				out[o++] = '\\';
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

int run_collect(const struct run_target *t, struct dump **all)
{
	char pat[PATH_MAX * 2], msg[1024];
	struct stat st;
	glob_t g;
	size_t i;
	int n = 0;

	*all = NULL;
	pattern_glob(t->pattern, pat, sizeof(pat));
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	*all = calloc(g.gl_pathc < MAX_DUMPS ? g.gl_pathc : MAX_DUMPS, sizeof(**all));
	if (!*all) {
		globfree(&g);
		return -ENOMEM;
	}
	for (i = 0; i < g.gl_pathc && n < MAX_DUMPS; i++) {
		if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_mtime < t->start - 1)
			continue;
		if (dump_load(&(*all)[n], g.gl_pathv[i], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool run: %s\n", msg);
			free(*all);
			*all = NULL;
			globfree(&g);
			return -EINVAL;
		}
		(*all)[n].wall_s = t->wall_s;
		n++;
	}
	globfree(&g);
	if (!n) {
		free(*all);
		*all = NULL;
	}
	return n;
}

/*
 * Keeps, among the N dumps of ALL, those of the processes that made copies
 * (moved to the front), or when none did, the main process's alone.
 * Returns how many are kept.
 */
static int run_keep_copiers(struct dump *all, int n, pid_t main_pid)
{
	struct dump tmp;
	int i, k = 0;

	for (i = 0; i < n; i++) {
		if (!all[i].h2d_calls)
			continue;
		if (i != k) {
			tmp = all[k];
			all[k] = all[i];
			all[i] = tmp;
		}
		k++;
	}
	if (k)
		return k;
	for (i = 0; i < n && all[i].pid != (long long)main_pid; i++)
		;
	if (i < n && i != 0)
		all[0] = all[i];
	return 1;
}

/* Names what T's run was, for the report: CMD, or CMD and its children. */
static void run_name(struct dump *d, const struct run_target *t, const struct run_options *o)
{
	if (!t->tmpdir[0])
		return;
	snprintf(d->path, sizeof(d->path), "%.4000s%s", o->cmd[0],
		 d->processes > 1 ? " and its children" : "");
}

void run_no_dump(const struct run_options *o, const struct run_target *t, const char *what)
{
	char why[1024];
	int v;

	if (t->status > 128 && t->status < 128 + 65)
		fprintf(stderr, "vrampool run: %s%s was killed by signal %d before its first CUDA call: no stats were written\n",
			esc(o->cmd[0]), what, t->status - 128);
	else if (t->status)
		fprintf(stderr, "vrampool run: %s%s exited with status %d before its first CUDA call: no stats were written (the failure is the program's own; its output says why)\n",
			esc(o->cmd[0]), what, t->status);
	else if ((v = inspect_program_verdict(o->cmd[0], why, sizeof(why))) >= 0 &&
		 !inspect_verdict_seen(v) && v != INSPECT_NONE)
		fprintf(stderr, "vrampool run: %s%s wrote no stats: its CUDA calls cannot be seen (%s)\n",
			esc(o->cmd[0]), what, why);
	else
		fprintf(stderr, "vrampool run: %s%s wrote no stats: the library saw no CUDA call in it (no CUDA use on this path); `vrampool inspect %s` tells more\n",
			esc(o->cmd[0]), what, esc(o->cmd[0]));
}

void run_report_one(struct dump *all, int n, const struct run_target *t,
		    const struct run_options *o)
{
	int k = run_keep_copiers(all, n, t->pid), i;

	if (k == 1) {
		run_name(&all[0], t, o);
		report_print_one(stderr, &all[0]);
		return;
	}
	/* The private directory goes away: name each dump by its process. */
	for (i = 0; i < k && t->tmpdir[0]; i++)
		snprintf(all[i].path, sizeof(all[i].path), "%.4000s, pid %lld", o->cmd[0], all[i].pid);
	report_print_columns(stderr, all, k);
}

void run_sum(struct dump *d, struct dump *all, int n, const struct run_target *t,
	     const struct run_options *o)
{
	int k = run_keep_copiers(all, n, t->pid), i;

	*d = all[0];
	for (i = 1; i < k; i++)
		dump_add(d, &all[i]);
	d->wall_s = t->wall_s;
	if (d->processes > 1 && !t->tmpdir[0])
		snprintf(d->path, sizeof(d->path), "%.4000s", t->pattern);
	run_name(d, t, o);
}
