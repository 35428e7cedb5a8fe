/*
 * fuzz.c: the helpers every fuzz target shares (fuzz.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

char *fuzz_string(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

const char *fuzz_file(const uint8_t *data, size_t size, int *fd)
{
	static int mfd = -1;
	static char path[64];
	size_t done = 0;

	if (mfd < 0) {
		mfd = memfd_create("vrampool-fuzz", 0);
		if (mfd < 0) {
			perror("fuzz: memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	}
	if (ftruncate(mfd, 0) < 0)
		abort();
	while (done < size) {
		ssize_t n = pwrite(mfd, data + done, size - done, (off_t)done);

		if (n <= 0 && errno != EINTR)
			abort();
		if (n > 0)
			done += (size_t)n;
	}
	if (lseek(mfd, 0, SEEK_SET) < 0)
		abort();
	if (fd)
		*fd = mfd;
	return path;
}

void *fuzz_devnull(void)
{
	static FILE *f;

	if (!f)
		f = fopen("/dev/null", "w");
	if (!f)
		abort();
	return f;
}

void fuzz_fail(const char *what, const uint8_t *data, size_t size)
{
	size_t i;

	fprintf(stderr, "fuzz: broken promise: %s\nfuzz: input (%zu bytes):", what, size);
	for (i = 0; i < size && i < 64; i++)
		fprintf(stderr, " %02x", data[i]);
	fprintf(stderr, "%s\n", size > 64 ? " ..." : "");
	abort();
}

int fuzz_terminated(const char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}
