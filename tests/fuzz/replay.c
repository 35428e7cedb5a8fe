/*
 * replay.c: the main of a fuzz target built as a plain program (fuzz.h):
 * runs the target once on each file named, and on each regular file of
 * each directory named (in name order), then says how many it ran. A
 * finding aborts (a broken promise or a sanitizer report) with the file
 * named on stderr first.
 *
 * usage: replay PATH...   exit 0 when every input ran clean, 2 on a usage
 * or read error.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs the target on the file at PATH; returns 0 or -1 (unreadable). */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, got;
	int err = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap ? cap * 2 : 4096);

			if (!nb) {
				err = -1;
				goto out;
			}
			buf = nb;
			cap = cap ? cap * 2 : 4096;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	if (ferror(f)) {
		perror(path);
		err = -1;
		goto out;
	}
	fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(buf, n);
out:
	free(buf);
	fclose(f);
	return err;
}

static int replay_name_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int i, k, n, ran = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		struct dirent **names;
		struct stat st;
		char path[4096];

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 2;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i]) < 0)
				return 2;
			ran++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, replay_name_cmp);
		if (n < 0) {
			perror(argv[i]);
			return 2;
		}
		for (k = 0; k < n; k++) {
			snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				if (replay_file(path) < 0)
					return 2;
				ran++;
			}
			free(names[k]);
		}
		free(names);
	}
	printf("replayed %d inputs\n", ran);
	return 0;
}
