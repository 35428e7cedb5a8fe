/*
 * telemetry.c: telemetry files read back (dump.h), one checked JSON object
 * a line (load.c reads and checks each value); a last line cut short by a
 * kill is dropped, every other line must be whole.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "load.h"
#include "vrampool.h"

#define TELEMETRY_FILE_MAX (1ULL << 30)		/* a line every few seconds, for weeks */
#define TELEMETRY_LINES_MAX 4000000

/* Reads one telemetry line (an object) into P. */
static int telemetry_parse(struct load_error *e, json_t *o, struct telemetry_point *p)
{
	bool has;
	uint64_t pid = 0;
	int err;
	size_t off;

	if (!json_is_object(o)) {
		off = load_where(e);
		snprintf(e->msg + off, e->size - off, "not a JSON object: not a vrampool telemetry line");
		return -EINVAL;
	}
	if (!json_object_get(o, "rows_seen") || !json_object_get(o, "bytes_requested")) {
		off = load_where(e);
		snprintf(e->msg + off, e->size - off,
			 "not a vrampool telemetry line (it lacks \"rows_seen\" and \"bytes_requested\")");
		return -EINVAL;
	}
	if ((err = load_seconds(e, o, NULL, "t", &p->t, &has)) ||
	    (err = load_seconds(e, o, NULL, "elapsed_s", &p->elapsed_s, &has)) ||
	    (err = load_u64(e, o, NULL, "pid", &pid)) ||
	    (err = load_string(e, o, NULL, "rank", p->rank, sizeof(p->rank), true)) ||
	    (err = load_u64(e, o, NULL, "rows_seen", &p->rows_seen)) ||
	    (err = load_u64(e, o, NULL, "rows_hits", &p->rows_hits)) ||
	    (err = load_u64(e, o, NULL, "bytes_requested", &p->bytes_requested)) ||
	    (err = load_u64(e, o, NULL, "bytes_h2d", &p->bytes_h2d)) ||
	    (err = load_u64(e, o, NULL, "bytes_served", &p->bytes_served)) ||
	    (err = load_u64(e, o, NULL, "pool_bytes", &p->pool_bytes)) ||
	    (err = load_u64(e, o, NULL, "pool_budget", &p->pool_budget)) ||
	    (err = load_string(e, o, NULL, "state", p->state, sizeof(p->state), false)))
		return err;
	p->pid = pid > (uint64_t)INT64_MAX ? 0 : (long long)pid;
	return 0;
}

int telemetry_load(struct telemetry *t, const char *path, char *msg, size_t msg_size)
{
	struct load_error e = { msg, msg_size, path, 0 };
	struct telemetry_point *grown;
	json_error_t jerr;
	json_t *o;
	char *buf = NULL, *line, *nl;
	size_t len = 0;
	int err = 0, cap = 0;
	long lineno = 0;

	memset(t, 0, sizeof(*t));
	err = load_file(&e, path, TELEMETRY_FILE_MAX, &buf, &len);
	if (err)
		return err;
	for (line = buf; line < buf + len; line = nl + 1) {
		bool last;

		nl = memchr(line, '\n', (size_t)(buf + len - line));
		last = !nl;
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		lineno++;
		if (line[strspn(line, " \t\r")] == '\0')
			continue;
		e.line = lineno;
		o = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
		if (!o) {
			if (last)
				break;	/* cut short by a kill: the lines before it stand */
			err = load_json_error(&e, &jerr);
			goto out_free;
		}
		if (t->n == cap) {
			if (cap >= TELEMETRY_LINES_MAX) {
				json_decref(o);
				break;
			}
			cap = cap ? cap * 2 : 256;
			grown = realloc(t->p, (size_t)cap * sizeof(*t->p));
			if (!grown) {
				json_decref(o);
				err = -ENOMEM;
				snprintf(msg, msg_size, "%s: out of memory", esc(path));
				goto out_free;
			}
			t->p = grown;
		}
		memset(&t->p[t->n], 0, sizeof(t->p[t->n]));
		err = telemetry_parse(&e, o, &t->p[t->n]);
		json_decref(o);
		if (err)
			goto out_free;
		t->n++;
		if (last)
			break;
	}
	if (!t->n) {
		snprintf(msg, msg_size, "%s: no telemetry line in it", esc(path));
		err = -EINVAL;
	}
out_free:
	free(buf);
	if (err)
		telemetry_release(t);
	return err;
}

void telemetry_release(struct telemetry *t)
{
	free(t->p);
	t->p = NULL;
	t->n = 0;
}
