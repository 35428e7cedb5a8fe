/*
 * reload: loads, uses and unloads the CUDA runtime round after round, the
 * way a plugin host or a Python process that imports and drops an
 * extension does. The program itself is linked with neither libcudart nor
 * libcuda, so when the last handle goes the runtime can really be unloaded
 * and the next round loads it again, possibly at another address.
 *
 * Default: each round dlopen()s libreload.so (tests/apps/lib/reloadlib.c,
 * linked with libcudart; found beside this program, or --lib PATH) with
 * RTLD_LOCAL | RTLD_NOW, calls its reload_lib_run (cudaMalloc, batches of
 * cudaMemcpyAsync, readback, verification: tests/apps/lib/reload_work.h),
 * and dlclose()s it. --direct: each round the program dlopen()s
 * libcudart.so.13 RTLD_LOCAL itself, takes every function with dlsym, does
 * the same work through those pointers, and dlclose()s it.
 *
 * stdout: 'round R rows N runtime unloaded|kept' per round (kept: something
 * else, such as a preloaded library, still holds the runtime), then
 * 'verified OK'. Exit: 0 every byte verified, 1 a mismatch, 2 a bad
 * option, 3 a CUDA or loader error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/loader.h"
#include "lib/reload_work.h"

#define RELOAD_USAGE 2
#define RELOAD_RUNTIME "libcudart.so.13"

typedef int reload_lib_fn(struct reload_round *r);

struct reload_options {
	unsigned rounds;
	size_t samples;
	size_t row;
	size_t batch;
	uint64_t seed;
	int direct;
	const char *lib;
};

static const char reload_usage_line[] =
	"usage: reload [--rounds N] [--samples N] [--row R] [--batch B] [--seed S]\n"
	"              [--direct] [--lib PATH] [--help]\n";

/* Returns whether the runtime is no longer loaded in the process. */
static int reload_runtime_unloaded(void)
{
	void *h = dlopen(RELOAD_RUNTIME, RTLD_LAZY | RTLD_NOLOAD);

	if (!h)
		return 1;
	dlclose(h);
	return 0;
}

/* Writes the path of libreload.so beside this program into buf. */
static int reload_default_lib(char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	if ((size_t)snprintf(buf, size, "%s/libreload.so", exe) >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* One round through the library: load, call, unload. */
static int reload_round_lib(const struct reload_options *o, struct reload_round *r)
{
	void *h = dlopen(o->lib, RTLD_LOCAL | RTLD_NOW);
	reload_lib_fn *run;
	int status;

	if (!h) {
		fprintf(stderr, "reload: dlopen(%s): %s\n", o->lib, dlerror());
		return RELOAD_CUDA;
	}
	*(void **)&run = dlsym(h, "reload_lib_run");
	if (!run) {
		fprintf(stderr, "reload: dlsym(reload_lib_run): %s\n", dlerror());
		status = RELOAD_CUDA;
	} else {
		status = run(r);
	}
	if (dlclose(h)) {
		fprintf(stderr, "reload: dlclose(%s): %s\n", o->lib, dlerror());
		status = status ? status : RELOAD_CUDA;
	}
	return status;
}

/* One round through the runtime loaded by the program: load, look up, use, unload. */
static int reload_round_direct(struct reload_round *r)
{
	void *h = dlopen(RELOAD_RUNTIME, RTLD_LOCAL | RTLD_NOW);
	struct reload_api api;
	int status = RELOAD_OK;

	if (!h) {
		fprintf(stderr, "reload: dlopen(%s): %s\n", RELOAD_RUNTIME, dlerror());
		return RELOAD_CUDA;
	}
#define RELOAD_LOOKUP(f)                                                     \
	if (status == RELOAD_OK && !(*(void **)&api.f = dlsym(h, #f))) {     \
		fprintf(stderr, "reload: dlsym(%s): %s\n", #f, dlerror());   \
		status = RELOAD_CUDA;                                        \
	}
	RELOAD_ENTRIES(RELOAD_LOOKUP)
#undef RELOAD_LOOKUP
	if (status == RELOAD_OK)
		status = reload_work(&api, r);
	if (dlclose(h)) {
		fprintf(stderr, "reload: dlclose(%s): %s\n", RELOAD_RUNTIME, dlerror());
		status = status ? status : RELOAD_CUDA;
	}
	return status;
}

enum { OPT_ROUNDS = LOADER_OPT_NEXT, OPT_SAMPLES, OPT_ROW, OPT_BATCH,
       OPT_SEED, OPT_DIRECT, OPT_LIB };

static const struct option reload_options_table[] = {
	{ "rounds", required_argument, NULL, OPT_ROUNDS },
	{ "samples", required_argument, NULL, OPT_SAMPLES },
	{ "row", required_argument, NULL, OPT_ROW },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "direct", no_argument, NULL, OPT_DIRECT },
	{ "lib", required_argument, NULL, OPT_LIB },
	{ "help", no_argument, NULL, LOADER_OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/*
 * Parses one option into the struct reload_options at ctx. Returns 0, or
 * nonzero for a bad value.
 */
static int reload_parse_option(void *ctx, int opt, const char *arg)
{
	struct reload_options *o = ctx;
	const struct loader_field fields[] = {
		LOADER_NUMBER(OPT_ROUNDS, 1, 100000, o->rounds),
		LOADER_NUMBER(OPT_SAMPLES, 1, 1ULL << 24, o->samples),
		LOADER_NUMBER(OPT_ROW, 1, 1ULL << 24, o->row),
		LOADER_NUMBER(OPT_BATCH, 1, 1ULL << 16, o->batch),
		LOADER_NUMBER(OPT_SEED, 0, UINT64_MAX, o->seed),
		LOADER_FLAG(OPT_DIRECT, o->direct, 1),
	};

	if (opt == OPT_LIB) {
		o->lib = arg;
		return 0;
	}
	return loader_fields_parse(fields, LOADER_COUNT(fields), opt, arg) != 0;
}

/* Parses the command line into o. Returns 0, RELOAD_USAGE, or -1 after --help. */
static int reload_parse_args(struct reload_options *o, int argc, char **argv)
{
	const struct loader_cli cli = {
		.prog = "reload", .options = reload_options_table,
		.usage = reload_usage_line, .parse = reload_parse_option, .ctx = o,
		.terse = 1,
	};
	int err;

	o->rounds = 4;
	o->samples = 256;
	o->row = 3072;
	o->batch = 32;
	o->seed = 1;
	err = loader_cli_parse(&cli, argc, argv);
	if (err > 0)
		return -1;
	if (err)
		goto usage;
	return 0;
usage:
	fputs(reload_usage_line, stderr);
	return RELOAD_USAGE;
}

int main(int argc, char **argv)
{
	static char lib[PATH_MAX];
	struct reload_options o = { 0 };
	int status;

	status = reload_parse_args(&o, argc, argv);
	if (status < 0) {
		status = 0;
		goto out;
	}
	if (status)
		goto out;
	if (!o.lib && !o.direct) {
		if (reload_default_lib(lib, sizeof(lib))) {
			fprintf(stderr, "reload: cannot find libreload.so: use --lib\n");
			status = RELOAD_USAGE;
			goto out;
		}
		o.lib = lib;
	}
	for (unsigned i = 1; i <= o.rounds; i++) {
		struct reload_round r = {
			.round = i, .samples = o.samples, .row = o.row,
			.batch = o.batch, .seed = o.seed,
		};

		status = o.direct ? reload_round_direct(&r) : reload_round_lib(&o, &r);
		if (status)
			goto out;
		printf("round %u rows %llu runtime %s\n", i, r.rows,
		       reload_runtime_unloaded() ? "unloaded" : "kept");
		fflush(stdout);
	}
	printf("verified OK\n");
out:
	if (status == RELOAD_MISMATCH)
		printf("verification FAILED\n");
	fflush(stdout);
	return status;
}
