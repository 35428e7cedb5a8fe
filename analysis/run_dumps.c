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
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "vrampool.h"

#define MAX_DUMPS 256

/* The pid config_expand_path writes where the glob then matches anything. */
#define GLOB_PID 8246135792468013579L

/*
 * Turns the stats PATTERN into a glob: expanded by config_expand_path as
 * the library would (%h this host), except that %p, %r and %q{NAME},
 * which differ between CMD's processes, match anything; the rest matches
 * literally.
 */
static int pattern_glob(const char *pattern, char *out, size_t size)
{
	char pre[PATH_MAX], expanded[PATH_MAX * 2], pid[32];
	const char *p, *close;
	size_t o = 0, plen;

	/* %q{NAME}: a marker byte, which config_expand_path copies as it is. */
	for (p = pattern; *p && o + 1 < sizeof(pre); p++) {
		if (p[0] == '%' && p[1] == 'q' && p[2] == '{' && (close = strchr(p + 3, '}'))) {
			pre[o++] = '\x02';
			p = close;
		} else {
			pre[o++] = *p;
		}
	}
	pre[o] = '\0';
	if (run_expand(pre, GLOB_PID, expanded, sizeof(expanded)) != 0)
		return -ENAMETOOLONG;
	plen = (size_t)snprintf(pid, sizeof(pid), "%ld", GLOB_PID);
	for (p = expanded, o = 0; *p && o + 3 < size; p++) {
		if (strncmp(p, pid, plen) == 0) {
			out[o++] = '*';
			p += plen - 1;
		} else if (*p == '\x01' || *p == '\x02') {
			out[o++] = '*';
		} else {
			if (strchr("*?[]\\", *p))
				out[o++] = '\\';
			out[o++] = *p;
		}
	}
	out[o] = '\0';
	return 0;
}

int run_snapshot(struct run_target *t)
{
	char pat[PATH_MAX * 2];
	struct stat st;
	glob_t g;
	size_t i;

	free(t->seen);
	t->seen = NULL;
	t->nseen = 0;
	if (pattern_glob(t->pattern, pat, sizeof(pat)) != 0 || glob(pat, 0, NULL, &g) != 0)
		return 0;
	t->seen = calloc(g.gl_pathc, sizeof(*t->seen));
	if (!t->seen) {
		globfree(&g);
		return -ENOMEM;
	}
	for (i = 0; i < g.gl_pathc; i++) {
		if (stat(g.gl_pathv[i], &st) != 0)
			continue;
		t->seen[t->nseen].dev = st.st_dev;
		t->seen[t->nseen].ino = st.st_ino;
		t->seen[t->nseen].mtime = st.st_mtim;
		t->nseen++;
	}
	globfree(&g);
	return 0;
}

/* Whether ST is a file run_snapshot saw, unchanged since. */
static bool run_seen_before(const struct run_target *t, const struct stat *st)
{
	int i;

	for (i = 0; i < t->nseen; i++)
		if (t->seen[i].dev == st->st_dev && t->seen[i].ino == st->st_ino &&
		    t->seen[i].mtime.tv_sec == st->st_mtim.tv_sec &&
		    t->seen[i].mtime.tv_nsec == st->st_mtim.tv_nsec)
			return true;
	return false;
}

int run_collect(const struct run_target *t, struct dump **all)
{
	char pat[PATH_MAX * 2], msg[1024];
	struct stat st;
	glob_t g;
	size_t i;
	int n = 0;

	*all = NULL;
	if (pattern_glob(t->pattern, pat, sizeof(pat)) != 0 || glob(pat, 0, NULL, &g) != 0)
		return 0;
	*all = calloc(g.gl_pathc < MAX_DUMPS ? g.gl_pathc : MAX_DUMPS, sizeof(**all));
	if (!*all) {
		globfree(&g);
		return -ENOMEM;
	}
	for (i = 0; i < g.gl_pathc && n < MAX_DUMPS; i++) {
		if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_mtime < t->start - 1 || run_seen_before(t, &st))
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
	char why[1024], path[PATH_MAX];
	struct stat st;
	int v;

	if (t->status > 128 && t->status < 128 + 65)
		fprintf(stderr, "vrampool run: %s%s was killed by signal %d before its first CUDA call: no stats were written\n",
			esc(o->cmd[0]), what, t->status - 128);
	else if (t->status)
		fprintf(stderr, "vrampool run: %s%s exited with status %d before its first CUDA call: no stats were written (the failure is the program's own; its output says why)\n",
			esc(o->cmd[0]), what, t->status);
	else if (!t->tmpdir[0] && run_expand(t->pattern, (long)t->pid, path, sizeof(path)) == 0 &&
		 stat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
		fprintf(stderr, "vrampool run: the stats of %s%s went to %s, a FIFO or a device, written in place: there is no file to report from\n",
			esc(o->cmd[0]), what, esc(path));
	else if (!t->tmpdir[0] && run_expand(t->pattern, (long)t->pid, path, sizeof(path)) == 0 &&
		 run_path_writable(path, why, sizeof(why)) != 0)
		fprintf(stderr, "vrampool run: %s%s wrote no stats: the library could not write %s (%s)\n",
			esc(o->cmd[0]), what, esc(path), why);
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

/* PATH as the user would type it: relative to the current directory when inside it. */
static const char *run_shown_path(const char *path, const char *cwd)
{
	size_t n = strlen(cwd);

	if (n > 1 && strncmp(path, cwd, n) == 0 && path[n] == '/')
		return path + n + 1;
	return path;
}

char *run_kept_text(struct dump *const *all, const int *n, int runs, const struct run_target *t)
{
	char cwd[PATH_MAX], *text = NULL;
	size_t size = 0;
	FILE *f;
	int i, k, files = 0;

	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	f = open_memstream(&text, &size);
	if (!f)
		return NULL;
	fprintf(f, "vrampool report");
	for (i = 0; i < runs; i++) {
		for (k = 0; k < n[i] && !t[i].tmpdir[0]; k++, files++)
			fprintf(f, " %s", esc(run_shown_path(all[i][k].path, cwd)));
	}
	if (fclose(f) != 0 || !files) {
		free(text);
		return NULL;
	}
	return text;
}
