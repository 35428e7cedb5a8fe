/*
 * graphs: a small table of graph and executable handles and their
 * host-to-device bytes per launch (graphs.h states the contract). Programs
 * hold few graphs; the table is searched in order under one lock.
 */
#include "pool/graphs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct graphs_entry {
	const void *h;
	uint64_t bytes;
};

static pthread_mutex_t graphs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct graphs_entry *graphs_table;
static size_t graphs_n, graphs_cap;

/* The entry of h, or NULL. Called with graphs_lock held. */
static struct graphs_entry *graphs_find(const void *h)
{
	for (size_t i = 0; i < graphs_n; i++)
		if (graphs_table[i].h == h)
			return &graphs_table[i];
	return NULL;
}

/* The entry of h, made when missing, or NULL (no memory). Called with graphs_lock held. */
static struct graphs_entry *graphs_get(const void *h)
{
	struct graphs_entry *e = graphs_find(h);

	if (e)
		return e;
	if (graphs_n == graphs_cap) {
		size_t ncap = graphs_cap ? 2 * graphs_cap : 16;
		struct graphs_entry *t = realloc(graphs_table, ncap * sizeof(*t));

		if (!t)
			return NULL;
		graphs_table = t;
		graphs_cap = ncap;
	}
	e = &graphs_table[graphs_n++];
	*e = (struct graphs_entry){ .h = h };
	return e;
}

/* Drops h's entry. Called with graphs_lock held. */
static void graphs_drop(const void *h)
{
	struct graphs_entry *e = graphs_find(h);

	if (e)
		*e = graphs_table[--graphs_n];
}

int graphs_add(const void *graph, uint64_t n)
{
	struct graphs_entry *e;

	pthread_mutex_lock(&graphs_lock);
	e = graphs_get(graph);
	if (e)
		e->bytes += n;
	pthread_mutex_unlock(&graphs_lock);
	return e ? 0 : -ENOMEM;
}

void graphs_copy(const void *exec, const void *graph)
{
	struct graphs_entry *g, *x;

	pthread_mutex_lock(&graphs_lock);
	g = graphs_find(graph);
	if (!g || !g->bytes) {
		graphs_drop(exec);
	} else {
		uint64_t bytes = g->bytes;

		x = graphs_get(exec);   /* may move the table: g is not used after */
		if (x)
			x->bytes = bytes;
	}
	pthread_mutex_unlock(&graphs_lock);
}

uint64_t graphs_bytes(const void *exec)
{
	struct graphs_entry *e;
	uint64_t bytes;

	pthread_mutex_lock(&graphs_lock);
	e = graphs_find(exec);
	bytes = e ? e->bytes : 0;
	pthread_mutex_unlock(&graphs_lock);
	return bytes;
}

void graphs_forget(const void *h)
{
	pthread_mutex_lock(&graphs_lock);
	graphs_drop(h);
	pthread_mutex_unlock(&graphs_lock);
}

void graphs_atfork_child(void)
{
	pthread_mutex_init(&graphs_lock, NULL);
	graphs_n = 0;   /* the parent's handles mean nothing here; the memory is the child's copy */
}
