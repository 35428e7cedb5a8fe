/*
 * text.c: what the command prints, made readable and safe: byte counts for
 * humans, and strings from outside (paths, names read from ELF files,
 * strings read from dumps) escaped so that nothing can move the cursor,
 * change colours, retitle the window or reorder the text on a terminal.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vrampool.h"

#define ESC_SLOT_SIZE 16384

const char *tool_format_bytes(uint64_t n, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)n;
	int u = -1;

	if (n < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", n);
		return buf;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, size, "%.1f %s", v, units[u]);
	return buf;
}

/*
 * Returns the length of the valid UTF-8 sequence at S (1 to 4), or 0 when
 * S does not start one (a stray continuation byte, an overlong form, a
 * surrogate, a truncated sequence or a code point past U+10FFFF). *CP gets
 * the code point.
 */
static int utf8_len(const unsigned char *s, uint32_t *cp)
{
	int n, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* Whether code point C must not reach a terminal as it is. */
static bool unsafe_cp(uint32_t c)
{
	return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) ||
	       (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
	       c == 0x200e || c == 0x200f || c == 0x061c;
}

/*
 * Writes the escaped form of the character (or bad byte sequence) at P into
 * TMP (at least 17 bytes) and returns how many bytes of P it stands for.
 */
static int escape_unit(const unsigned char *p, char *tmp)
{
	uint32_t cp;
	int n = utf8_len(p, &cp), i, k;

	if (n && !unsafe_cp(cp)) {
		memcpy(tmp, p, (size_t)n);
		tmp[n] = '\0';
		return n;
	}
	/* One escape per byte of a bad sequence (or the control). */
	k = n ? n : 1;
	tmp[0] = '\0';
	for (i = 0; i < k; i++) {
		size_t t = strlen(tmp);

		if (p[i] == '\t')
			snprintf(tmp + t, 17 - t, "\\t");
		else if (p[i] == '\n')
			snprintf(tmp + t, 17 - t, "\\n");
		else if (p[i] == '\r')
			snprintf(tmp + t, 17 - t, "\\r");
		else if (p[i] == 0x1b)
			snprintf(tmp + t, 17 - t, "\\e");
		else
			snprintf(tmp + t, 17 - t, "\\x%02x", p[i]);
	}
	return k;
}

/* The length of the escaped form of P, or more than LIMIT once it passes LIMIT. */
static size_t escape_len(const unsigned char *p, size_t limit)
{
	char tmp[17];
	size_t len = 0;

	while (*p && len <= limit) {
		p += escape_unit(p, tmp);
		len += strlen(tmp);
	}
	return len;
}

const char *tool_escape(const char *s, char *buf, size_t size)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "(null)");
	size_t o = 0, t;
	char tmp[17];
	int n;

	if (!size)
		return buf;
	while (*p) {
		n = escape_unit(p, tmp);
		t = strlen(tmp);
		/* Near the end, keep room for "..." unless the rest fits whole. */
		if (o + t + 4 > size && (o + t + 1 > size || o + t + escape_len(p + n, size) + 1 > size)) {
			if (size >= 4) {
				if (o > size - 4)
					o = size - 4;
				memcpy(buf + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(buf + o, tmp, t);
		o += t;
		p += n;
	}
	buf[o < size ? o : size - 1] = '\0';
	return buf;
}

const char *esc(const char *s)
{
	static char slots[TOOL_ESC_SLOTS][ESC_SLOT_SIZE];
	static unsigned next;

	return tool_escape(s, slots[next++ % TOOL_ESC_SLOTS], ESC_SLOT_SIZE);
}
