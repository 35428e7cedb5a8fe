/*
 * sbuf: the bounded writer of the reports (sbuf.h is the contract).
 */
#include "report/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sbuf_init(struct sbuf *b, char *p, size_t len)
{
	b->p = p;
	b->len = len;
	b->used = 0;
	b->full = len == 0;
	if (len)
		p[0] = '\0';
}

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->len - b->used) {
		b->full = 1;
		b->p[b->used] = '\0';
		return;
	}
	b->used += (size_t)n;
}

void sbuf_putc(struct sbuf *b, char ch)
{
	if (b->full || b->used + 1 >= b->len) {
		b->full = 1;
		return;
	}
	b->p[b->used++] = ch;
	b->p[b->used] = '\0';
}

void sbuf_line(struct sbuf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || b->full)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n] = '\n';
	line[n + 1] = '\0';
	if (b->used + (size_t)n + 1 >= b->len) {
		b->full = 1;
		return;
	}
	memcpy(b->p + b->used, line, (size_t)n + 2);
	b->used += (size_t)n + 1;
}
