/*
 * fuzz_escape.c: what the `vrampool` command prints from outside
 * (analysis/text.c): strings from dumps, ELF files and paths escaped for
 * the terminal, and byte counts for humans.
 *
 * Promises checked (vrampool.h): at every buffer size the result is
 * terminated inside the buffer, valid UTF-8, and holds no C0 or C1
 * control character, DEL or bidirectional control; a string that needs
 * no escaping comes back unchanged when it fits; a shorter buffer gives a
 * prefix of the full result followed by "..."; tool_format_bytes writes a
 * terminated figure with a unit.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "vrampool.h"

/* The code point of the UTF-8 sequence at s and its length, or 0 when invalid. */
static int fuzz_utf8(const unsigned char *s, uint32_t *cp)
{
	int n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
		s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	uint32_t c = n == 1 ? s[0] : n == 2 ? s[0] & 0x1fu : n == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
	int i;

	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3fu);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* Whether out is valid UTF-8 free of anything a terminal would act on. */
static bool fuzz_safe(const char *out)
{
	const unsigned char *p = (const unsigned char *)out;
	uint32_t c;
	int n;

	for (; *p; p += n) {
		n = fuzz_utf8(p, &c);
		if (!n || c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) ||
		    (c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f || c == 0x061c)
			return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = { 1, 2, 3, 4, 5, 7, 8, 16, 33, 100 };
	char *text = fuzz_string(data, size), *full, *out, num[32];
	size_t fsize = 4 * size + 8, i, len, n;
	bool plain = true;
	uint64_t v = 0;

	full = malloc(fsize);
	out = malloc(128);
	if (!full || !out)
		abort();
	tool_escape(text, full, fsize);
	len = strlen(full);
	if (len >= fsize || !fuzz_safe(full))
		fuzz_fail("an escaped string is unsafe or overruns its buffer", data, size);
	for (i = 0; text[i]; i++)
		plain = plain && (unsigned char)text[i] >= 0x20 && (unsigned char)text[i] < 0x7f;
	if (plain && strcmp(full, text) != 0)
		fuzz_fail("a printable ASCII string did not come back unchanged", data, size);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(out, 'z', 128);
		tool_escape(text, out, sizes[i]);
		if (!fuzz_terminated(out, sizes[i]) || !fuzz_safe(out))
			fuzz_fail("an escaped string cut to a small buffer is unsafe or unterminated", data, size);
		n = strlen(out);
		if (n == len ? strcmp(out, full) != 0 :
		    n < 3 ? sizes[i] >= 4 : strcmp(out + n - 3, "...") != 0 || strncmp(out, full, n - 3) != 0)
			fuzz_fail("a cut escaped string is not a prefix of the whole followed by ...", data, size);
	}
	memcpy(&v, data, size < sizeof(v) ? size : sizeof(v));
	tool_format_bytes(v, num, sizeof(num));
	if (!fuzz_terminated(num, sizeof(num)) || !strchr(num, 'B'))
		fuzz_fail("a byte count without its unit", data, size);
	free(out);
	free(full);
	free(text);
	return 0;
}
