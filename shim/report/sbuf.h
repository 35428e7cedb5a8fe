/*
 * sbuf: a bounded writer into a caller's buffer, for the reports (the JSON
 * dump, the summary).
 *
 * Invariants: while len > 0, p[used] is '\0' and used < len. What does not
 * fit is dropped and remembered: full is set, and every later write is
 * dropped too, so the text stops where the first thing that did not fit
 * would have begun. The buffer is the caller's; an sbuf owns nothing.
 *
 * Nothing here allocates, takes a lock or makes a CUDA call, so the
 * reporter thread can write while another thread is stopped by a signal
 * anywhere.
 */
#ifndef VRAMPOOL_SBUF_H
#define VRAMPOOL_SBUF_H

#include <stddef.h>

struct sbuf {
	char *p;
	size_t len, used;
	int full;               /* something did not fit: later writes are dropped */
};

/* Starts an empty text in p, len bytes (full at once when len is 0). */
void sbuf_init(struct sbuf *b, char *p, size_t len);

/* Appends printf-style text, whole or not at all. */
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends one character. */
void sbuf_putc(struct sbuf *b, char ch);

/*
 * Appends one line (the newline added here; at most 1022 characters before
 * it, longer lines cut), whole or not at all, so a text cut short ends at a
 * line's end.
 */
void sbuf_line(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
