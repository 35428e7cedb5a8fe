/*
 * fuzz_size.c: sizes as the VRAMPOOL_* variables write them
 * (shim/core/size.c).
 *
 * Promises checked (size.h): each parser returns 0, -EINVAL or -ERANGE
 * and leaves *out untouched on an error; whatever size_parse_uint takes,
 * size_parse takes with the same value; a value written back in decimal
 * parses to itself; a size with a suffix is the digits times its power of
 * 1024 (-ERANGE exactly when that passes 64 bits).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/size.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const sfx = "KMGT";
	char *text = fuzz_string(data, size);
	uint64_t a = 7, b = 7, c = 7;
	char buf[32];
	int ra, rb, rc, i;

	ra = size_parse(text, &a);
	rb = size_parse_uint(text, &b);
	if ((ra != 0 && ra != -EINVAL && ra != -ERANGE) || (rb != 0 && rb != -EINVAL && rb != -ERANGE))
		fuzz_fail("a parser returned a code other than 0, -EINVAL, -ERANGE", data, size);
	if ((ra && a != 7) || (rb && b != 7))
		fuzz_fail("a failed parse wrote its result", data, size);
	if (rb == 0 && (ra != 0 || a != b))
		fuzz_fail("size_parse disagrees with size_parse_uint on plain digits", data, size);
	if (ra == 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)a);
		if (size_parse_uint(buf, &c) != 0 || c != a || size_parse(buf, &c) != 0 || c != a)
			fuzz_fail("a size written back in decimal does not parse to itself", data, size);
	}
	if (rb == 0) {
		for (i = 0; i < 4; i++) {
			unsigned shift = 10u * (unsigned)(i + 1);
			int over = shift < 64 && (b >> (64 - shift)) != 0;

			snprintf(buf, sizeof(buf), "%llu%c", (unsigned long long)b, sfx[i]);
			rc = size_parse(buf, &c);
			if (over ? rc != -ERANGE : (rc != 0 || c != b << shift))
				fuzz_fail("a suffix is not its power of 1024", data, size);
		}
	}
	free(text);
	return 0;
}
