/*
 * graphs: the host-to-device bytes of the program's CUDA graphs. A copy
 * captured into a graph moves nothing when it is captured; it moves its
 * bytes at each launch of the graph's executable. The pool counts a
 * captured copy's bytes against its graph (graphs_add, from the capture
 * info of its stream), carries them to each executable made or updated
 * from the graph (graphs_copy), and counts them at each launch
 * (graphs_bytes), so that bytes.h2d stays what crossed the link.
 *
 * Invariants:
 * - One table for graphs and executables, keyed by handle (a graph and an
 *   executable alive at once never share one); a destroyed handle leaves
 *   it (graphs_forget), so a handle made again starts at 0.
 * - Copies the pool never sees in a graph (nodes added by hand, copies of
 *   a run that is off or of no layout) are not in it: those are counted
 *   when they are made, as before.
 */
#ifndef VRAMPOOL_GRAPHS_H
#define VRAMPOOL_GRAPHS_H

#include <stdint.h>

/* Adds n bytes to graph's. Returns 0, or -ENOMEM (the caller counts them now). */
int graphs_add(const void *graph, uint64_t n);

/* The executable exec now runs graph: its bytes are graph's (none when graph has none). */
void graphs_copy(const void *exec, const void *graph);

/* The host-to-device bytes of one launch of exec (0 when unknown). */
uint64_t graphs_bytes(const void *exec);

/* Handle h (a graph or an executable) was destroyed. */
void graphs_forget(const void *h);

/* In a forked child: forgets the parent's graphs. */
void graphs_atfork_child(void);

#endif
