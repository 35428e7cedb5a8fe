/*
 * fuzz_telemetry.c: a telemetry file read back (analysis/telemetry.c and
 * load.c): one JSON object per line, as VRAMPOOL_TELEMETRY appends them.
 *
 * Promises checked (dump.h): telemetry_load returns 0 with every point
 * read, or a negative errno with a one-line message; the points' strings
 * are terminated; telemetry_release frees them all (a leak is a finding).
 */
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct telemetry t = { NULL, 0 };
	char msg[1024];
	int err, i;

	memset(msg, 'x', sizeof(msg));
	err = telemetry_load(&t, fuzz_file(data, size, NULL), msg, sizeof(msg));
	if (err) {
		if (err > 0 || !msg[0] || !fuzz_terminated(msg, sizeof(msg)) || strchr(msg, '\n'))
			fuzz_fail("a refused telemetry file without a one-line message", data, size);
	} else {
		if (t.n < 0 || (t.n && !t.p))
			fuzz_fail("a loaded telemetry file without its points", data, size);
		for (i = 0; i < t.n; i++)
			if (!fuzz_terminated(t.p[i].rank, sizeof(t.p[i].rank)) ||
			    !fuzz_terminated(t.p[i].state, sizeof(t.p[i].state)) ||
			    t.p[i].t < 0 || t.p[i].elapsed_s < 0)
				fuzz_fail("a telemetry point with a bad string or a negative time", data, size);
	}
	telemetry_release(&t);
	return 0;
}
