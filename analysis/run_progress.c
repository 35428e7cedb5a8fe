/*
 * run_progress.c: `vrampool run`'s one-line progress while CMD runs
 * (run.h), on a terminal only.
 *
 * The library rewrites its dump at each telemetry interval while the job
 * runs ("final": false); the launcher reads it again when its time stamp
 * moves and redraws one line on stderr with a carriage return, so a long
 * job shows that it is alive and what the pool does without --verbose.
 * Nothing is drawn when stderr is not a terminal (a log file gets no
 * carriage returns), under --verbose (the library's own lines are the
 * progress), or with TERM=dumb; the line is cleared before anything else
 * the launcher prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "run.h"
#include "vrampool.h"

#define RUN_PROGRESS_TICK_S 1.0	/* how often the line's clock is redrawn */

static double run_progress_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void run_progress_start(struct run_progress *p, const struct run_options *o,
			const struct run_target *t)
{
	const char *term = getenv("TERM");

	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO) && !o->verbose && !(term && strcmp(term, "dumb") == 0);
	p->pattern = t->pattern;
	p->start = run_progress_clock();
	p->next = p->start + RUN_PROGRESS_TICK_S;
}

double run_progress_due(const struct run_progress *p)
{
	double left;

	if (!p || !p->on)
		return -1;
	left = p->next - run_progress_clock();
	return left > 0 ? left : 0;
}

/* Reads the dump of CMD (pid CHILD) again when it changed; returns whether P's figures are new. */
static bool run_progress_read(struct run_progress *p, pid_t child)
{
	char path[PATH_MAX], err[256];
	struct dump *d;
	struct stat st;
	bool fresh = false;

	if (run_expand(p->pattern, (long)child, path, sizeof(path)) != 0 || stat(path, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return false;
	if (st.st_mtim.tv_sec == p->mtime.tv_sec && st.st_mtim.tv_nsec == p->mtime.tv_nsec)
		return false;
	d = calloc(1, sizeof(*d));
	if (!d)
		return false;
	if (dump_load(d, path, err, sizeof(err)) == 0) {
		p->mtime = st.st_mtim;
		p->copies = d->h2d_calls;
		p->requested = d->requested;
		p->served = d->served;
		p->pool_bytes = d->pool_bytes;
		snprintf(p->state, sizeof(p->state), "%s", d->state);
		p->has_dump = fresh = true;
	}
	free(d);
	return fresh;
}

void run_progress_tick(struct run_progress *p, pid_t child)
{
	char req[32], pool[32];
	double now;
	long s;

	if (!p || !p->on)
		return;
	now = run_progress_clock();
	if (now < p->next)
		return;
	p->next = now + RUN_PROGRESS_TICK_S;
	run_progress_read(p, child);
	s = (long)(now - p->start);
	fprintf(stderr, "\r\033[Kvrampool run: %ld:%02ld", s / 60, s % 60);
	if (p->has_dump) {
		fprintf(stderr, ", %llu copies, %s requested, %.1f%% served from the pool",
			(unsigned long long)p->copies, tool_format_bytes(p->requested, req, sizeof(req)),
			p->requested ? 100.0 * (double)p->served / (double)p->requested : 0.0);
		if (p->state[0])
			fprintf(stderr, ", pool %s %s", esc(p->state),
				tool_format_bytes(p->pool_bytes, pool, sizeof(pool)));
	}
	fflush(stderr);
	p->shown = true;
}

void run_progress_end(struct run_progress *p)
{
	if (p && p->on && p->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	if (p)
		p->shown = false;
}
