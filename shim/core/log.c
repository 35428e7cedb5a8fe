/*
 * log: the shim's only voice on stderr.
 *
 * Each line is formatted into a buffer on the stack (at most LOG_LINE_MAX
 * bytes, cut short with "..." when longer) and handed to the kernel with one
 * write(2), so lines from concurrent threads never interleave and nothing is
 * allocated. errno is preserved for the interposed caller.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

#define LOG_LINE_MAX 1024
#define LOG_PREFIX "vrampool: "

static atomic_int log_verbose_on;

void log_set_verbose(int on)
{
	atomic_store_explicit(&log_verbose_on, on != 0, memory_order_relaxed);
}

int log_is_verbose(void)
{
	return atomic_load_explicit(&log_verbose_on, memory_order_relaxed);
}

/*
 * Writes all of buf to stderr, retrying after a signal or a short write; a
 * failing stderr is ignored, since there is nowhere left to complain.
 */
static void log_write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(STDERR_FILENO, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/*
 * Formats the prefix, the message and a newline into one stack buffer and
 * writes it at once. A message too long for the buffer ends in "...". A
 * newline inside the message is replaced by a space, so one call is always
 * one line.
 */
static void log_vline(const char *fmt, va_list ap)
{
	char buf[LOG_LINE_MAX];
	size_t pre = sizeof(LOG_PREFIX) - 1;
	size_t room = sizeof(buf) - pre - 1;	/* keep one byte for '\n' */
	size_t len, i;
	int saved = errno;
	int n;

	memcpy(buf, LOG_PREFIX, pre);
	n = vsnprintf(buf + pre, room + 1, fmt, ap);
	if (n < 0)
		n = 0;
	len = (size_t)n;
	if (len > room) {
		len = room;
		memcpy(buf + pre + len - 3, "...", 3);
	}
	for (i = pre; i < pre + len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch == '\n' || ch == '\r')
			buf[i] = ' ';
		else if (ch < 0x20 || ch == 0x7f)
			buf[i] = '?';
	}
	buf[pre + len] = '\n';
	log_write_all(buf, pre + len + 1);
	errno = saved;
}

void log_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap);
	va_end(ap);
}

void log_verbose(const char *fmt, ...)
{
	va_list ap;

	if (!log_is_verbose())
		return;
	va_start(ap, fmt);
	log_vline(fmt, ap);
	va_end(ap);
}

void log_text(const char *text, unsigned long len)
{
	char buf[LOG_LINE_MAX * 8];
	unsigned long i, n = len < sizeof(buf) ? len : sizeof(buf);
	int saved = errno;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)text[i];

		buf[i] = (ch < 0x20 && ch != '\n') || ch == 0x7f ? '?' : (char)ch;
	}
	if (n > 0 && n == sizeof(buf))
		buf[n - 1] = '\n';
	log_write_all(buf, n);
	errno = saved;
}

const char *log_escape(char *buf, unsigned long len, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	unsigned long k = 0;

	if (len == 0)
		return buf;
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		unsigned long need = ch >= 0x20 && ch < 0x7f ? 1 : 4;

		if (k + need + 4 > len) {
			if (k + 4 <= len) {
				memcpy(buf + k, "...", 3);
				k += 3;
			}
			break;
		}
		if (need == 1) {
			buf[k++] = (char)ch;
		} else {
			buf[k++] = '\\';
			buf[k++] = 'x';
			buf[k++] = hex[ch >> 4];
			buf[k++] = hex[ch & 15];
		}
	}
	buf[k] = '\0';
	return buf;
}

/*
 * Formats bytes as "12 B" below one KiB, otherwise with one decimal in the
 * largest binary unit that keeps the number under 1024 ("1.2 GiB",
 * "640.0 KiB"), TiB being the last. Integer arithmetic only, rounded to
 * the nearest tenth.
 */
const char *log_bytes(char *buf, unsigned long len, unsigned long long bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	unsigned long long unit = 1024, tenths;
	int u = 0;

	if (len == 0)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", bytes);
		return buf;
	}
	for (;;) {
		tenths = bytes / unit * 10 + ((bytes % unit) * 10 + unit / 2) / unit;
		if (tenths < 10240 || u == 3)
			break;
		unit *= 1024;
		u++;
	}
	snprintf(buf, len, "%llu.%llu %s", tenths / 10, tenths % 10, units[u]);
	return buf;
}
