/*
 * loader.h: what the data-loading test programs share (trainer.c,
 * drvloader.c, reload.c and, through reload_work.h, reloadlib.c): the
 * seeded generator that makes their datasets and shuffles, the command-line
 * loop and the options every loader has, the byte-by-byte verification of
 * a batch read back and its message, the epoch and total lines on stdout,
 * and the emulated device's counter.
 *
 * Pure C and static inline functions only: no CUDA call, no CUDA header,
 * so that drvloader (linked with neither libcudart nor libcuda) and
 * reload (which loads the runtime itself) can include it like the trainer.
 * The output formats and exit statuses here are what the end-to-end tests
 * parse (tests/e2e/trainer.sh, reach.sh, pool.sh and others): a change to
 * them is a change to every program that prints them.
 */
#ifndef LOADER_H
#define LOADER_H

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the seeded generator (splitmix64) ----------------------------------- */

/* Advances the splitmix64 generator at *state and returns its next value. */
static inline uint64_t loader_rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Returns a uniform value below bound (bound > 0), without modulo bias. */
static inline uint64_t loader_rng_below(uint64_t *state, uint64_t bound)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
	uint64_t v;

	do
		v = loader_rng_next(state);
	while (v >= limit);
	return v % bound;
}

/* Fills n bytes at p from the generator, eight bytes a value. */
static inline void loader_rng_fill(uint64_t *state, unsigned char *p, size_t n)
{
	while (n > 0) {
		uint64_t v = loader_rng_next(state);
		size_t k = n < sizeof(v) ? n : sizeof(v);

		memcpy(p, &v, k);
		p += k;
		n -= k;
	}
}

/* Shuffles the n entries of a in place (Fisher-Yates). */
static inline void loader_rng_shuffle(uint64_t *state, size_t *a, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)loader_rng_below(state, i);
		size_t tmp = a[i - 1];

		a[i - 1] = a[j];
		a[j] = tmp;
	}
}

/* Sets order to the identity: order[i] = i for the n entries. */
static inline void loader_order_identity(size_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		order[i] = i;
}

/* ---- the command line ---------------------------------------------------- */

/*
 * Option codes of the options every loader has (struct loader_shape, and
 * --help); a program numbers its own from LOADER_OPT_NEXT on.
 */
enum loader_option {
	LOADER_OPT_SAMPLES = 256, LOADER_OPT_ROW, LOADER_OPT_BATCH,
	LOADER_OPT_EPOCHS, LOADER_OPT_SEED, LOADER_OPT_RING, LOADER_OPT_PINNED,
	LOADER_OPT_PAGEABLE, LOADER_OPT_QUIET, LOADER_OPT_CORRUPT_CHECK,
	LOADER_OPT_HELP, LOADER_OPT_NEXT,
};

/* The long options of struct loader_shape, to open a program's table. */
#define LOADER_SHAPE_OPTIONS                                                  \
	{ "samples", required_argument, NULL, LOADER_OPT_SAMPLES },          \
	{ "row", required_argument, NULL, LOADER_OPT_ROW },                  \
	{ "batch", required_argument, NULL, LOADER_OPT_BATCH },              \
	{ "epochs", required_argument, NULL, LOADER_OPT_EPOCHS },            \
	{ "seed", required_argument, NULL, LOADER_OPT_SEED },                \
	{ "ring", required_argument, NULL, LOADER_OPT_RING },                \
	{ "pinned", no_argument, NULL, LOADER_OPT_PINNED },                  \
	{ "pageable", no_argument, NULL, LOADER_OPT_PAGEABLE },              \
	{ "quiet", no_argument, NULL, LOADER_OPT_QUIET },                    \
	{ "help", no_argument, NULL, LOADER_OPT_HELP },                      \
	/* Hidden: flips one byte of one readback, to prove verification works. */ \
	{ "corrupt-check", no_argument, NULL, LOADER_OPT_CORRUPT_CHECK }

/*
 * The run every loader is asked for: a dataset of samples rows of row
 * bytes made from seed, batches of batch rows, epochs, a staging ring of
 * ring slots (pinned or pageable), the dataset and epoch lines unless
 * quiet, and corrupt_check to flip one byte of one readback.
 */
struct loader_shape {
	size_t samples;
	size_t row;
	size_t batch;
	unsigned epochs;
	uint64_t seed;
	unsigned ring;
	int pinned;
	int quiet;
	int corrupt_check;
};

/*
 * Sets s to the defaults: 1000 rows of 3072 bytes, seed 1, batches of 64,
 * 3 epochs, a ring of 4 pinned slots.
 */
static inline void loader_shape_defaults(struct loader_shape *s)
{
	memset(s, 0, sizeof(*s));
	s->samples = 1000;
	s->row = 3072;
	s->batch = 64;
	s->epochs = 3;
	s->seed = 1;
	s->ring = 4;
	s->pinned = 1;
}

/* Parses an unsigned decimal number into *out. Returns 0 or -EINVAL. */
static inline int loader_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * An option that sets one unsigned integer or enum field of 4 or 8 bytes
 * (to, size): an option with a value to a decimal number from min to max,
 * or, when words is not NULL, to the index of the value in that
 * NULL-terminated list; an option without a value to min (== max). Made
 * with LOADER_NUMBER, LOADER_WORDS and LOADER_FLAG, which refuse a field
 * of another size at compile time.
 */
struct loader_field {
	int opt;
	uint64_t min;
	uint64_t max;
	const char *const *words;
	void *to;
	size_t size;
};

#define LOADER_FIELD_SIZE(field)                                              \
	(sizeof(field) + 0 * sizeof(struct {                                  \
		int size_4_or_8 : (sizeof(field) == 4 || sizeof(field) == 8) ? 1 : -1; \
	}))
#define LOADER_NUMBER(opt, min, max, field)                                   \
	{ (opt), (min), (max), NULL, &(field), LOADER_FIELD_SIZE(field) }
#define LOADER_WORDS(opt, words, field)                                       \
	{ (opt), 0, 0, (words), &(field), LOADER_FIELD_SIZE(field) }
#define LOADER_FLAG(opt, field, value)                                        \
	{ (opt), (value), (value), NULL, &(field), LOADER_FIELD_SIZE(field) }
#define LOADER_COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* The fields of the struct loader_shape at s, to open a program's list. */
#define LOADER_SHAPE_FIELDS(s)                                                \
	LOADER_NUMBER(LOADER_OPT_SAMPLES, 1, 1ULL << 32, (s)->samples),       \
	LOADER_NUMBER(LOADER_OPT_ROW, 1, 1ULL << 32, (s)->row),               \
	LOADER_NUMBER(LOADER_OPT_BATCH, 1, 1ULL << 24, (s)->batch),           \
	LOADER_NUMBER(LOADER_OPT_EPOCHS, 1, 1000000, (s)->epochs),            \
	LOADER_NUMBER(LOADER_OPT_SEED, 0, UINT64_MAX, (s)->seed),             \
	LOADER_NUMBER(LOADER_OPT_RING, 1, 1024, (s)->ring),                   \
	LOADER_FLAG(LOADER_OPT_PINNED, (s)->pinned, 1),                       \
	LOADER_FLAG(LOADER_OPT_PAGEABLE, (s)->pinned, 0),                     \
	LOADER_FLAG(LOADER_OPT_QUIET, (s)->quiet, 1),                         \
	LOADER_FLAG(LOADER_OPT_CORRUPT_CHECK, (s)->corrupt_check, 1)

/*
 * Sets the field of the option opt among the n fields from arg (NULL for
 * an option without a value). Returns 0, 1 for a bad value (the caller
 * names it), or -ENOENT when opt is none of them.
 */
static inline int loader_fields_parse(const struct loader_field *fields,
				      size_t n, int opt, const char *arg)
{
	for (size_t i = 0; i < n; i++) {
		const struct loader_field *f = &fields[i];
		uint64_t v = f->min;
		uint32_t v32;

		if (f->opt != opt)
			continue;
		if (arg && f->words) {
			for (v = 0; f->words[v] && strcmp(arg, f->words[v]); v++)
				;
			if (!f->words[v])
				return 1;
		} else if (arg && (loader_parse_u64(arg, f->max, &v) || v < f->min)) {
			return 1;
		}
		v32 = (uint32_t)v;
		if (f->size == sizeof(v))
			memcpy(f->to, &v, sizeof(v));
		else
			memcpy(f->to, &v32, sizeof(v32));
		return 0;
	}
	return -ENOENT;
}

/*
 * Returns whether a per-sample tensor of row bytes fits s: the dataset of
 * it and a batch of it, twice over, are counted in a size_t.
 */
static inline int loader_shape_fits(const struct loader_shape *s, size_t row)
{
	return row <= SIZE_MAX / s->samples && row <= SIZE_MAX / s->batch / 2;
}

/*
 * Returns how many rows the batch that starts at row first holds: the
 * batch size, or what is left for the last one.
 */
static inline size_t loader_shape_batch_rows(const struct loader_shape *s,
					     size_t first)
{
	return s->samples - first < s->batch ? s->samples - first : s->batch;
}

/*
 * A program's command line: its name (the first word of its messages),
 * its option table (LOADER_OPT_HELP for --help), its usage line and the
 * text --help prints after it (or NULL), the function that parses each
 * other option into ctx (0, or nonzero for a bad value), and terse: a bad
 * value or an argument that is not an option is then not named, the
 * usage line alone says so.
 */
struct loader_cli {
	const char *prog;
	const struct option *options;
	const char *usage;
	const char *help;
	int (*parse)(void *ctx, int opt, const char *arg);
	void *ctx;
	int terse;
};

/*
 * Parses argv's options with getopt_long (no short options, getopt's own
 * messages off). Returns 0 when every argument was a good option, 1 after
 * --help (the usage and help text printed on stdout), or -EINVAL after
 * an unknown option, a missing value, a bad value or an argument that is
 * not an option (named on stderr, but for the last two when terse): the
 * caller then prints its usage on stderr.
 */
static inline int loader_cli_parse(const struct loader_cli *c, int argc,
				   char **argv)
{
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", c->options, NULL)) != -1) {
		if (opt == LOADER_OPT_HELP) {
			fputs(c->usage, stdout);
			if (c->help)
				fputs(c->help, stdout);
			return 1;
		}
		if (opt == '?') {
			fprintf(stderr, "%s: unknown option or missing value: %s\n",
				c->prog, argv[optind - 1]);
			return -EINVAL;
		}
		if (c->parse(c->ctx, opt, optarg)) {
			if (optarg && !c->terse)
				fprintf(stderr, "%s: bad value '%s' for an option\n",
					c->prog, optarg);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		if (!c->terse)
			fprintf(stderr, "%s: unexpected argument '%s'\n", c->prog,
				argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* ---- verification -------------------------------------------------------- */

/*
 * A batch read back, for loader_batch_differs: the program, the epoch, the
 * batch's number, the tensor's name in the message (NULL: none), and the
 * count samples the batch holds, in order.
 */
struct loader_batch {
	const char *prog;
	unsigned epoch;
	size_t index;
	const char *what;
	const size_t *order;
	size_t count;
};

/*
 * Compares the batch's rows of stride bytes read back at got with the
 * expected ones: the uploaded bytes at expect when it is not NULL, else
 * the samples of base in the batch's order. Returns 0 when every byte is
 * the same, else 1 after printing the first difference on stderr: epoch,
 * batch, byte offset within the copy, row, sample, offset, expected, got.
 */
static inline int loader_batch_differs(const struct loader_batch *b,
				       const unsigned char *got,
				       const unsigned char *base,
				       const unsigned char *expect, size_t stride)
{
	for (size_t j = 0; j < b->count; j++) {
		size_t sample = b->order[j];
		const unsigned char *want = expect ? expect + j * stride :
					    base + sample * stride;
		const unsigned char *have = got + j * stride;

		if (!memcmp(want, have, stride))
			continue;
		for (size_t x = 0; x < stride; x++) {
			if (want[x] == have[x])
				continue;
			fprintf(stderr,
				"%s: MISMATCH epoch %u batch %zu %s%sbyte %zu "
				"(row %zu of the batch, sample %zu, offset %zu): "
				"expected 0x%02x got 0x%02x\n",
				b->prog, b->epoch, b->index, b->what ? b->what : "",
				b->what ? " " : "", j * stride + x, j, sample, x,
				want[x], have[x]);
			break;
		}
		return 1;
	}
	return 0;
}

/*
 * For --corrupt-check: flips the middle byte of the n bytes at p, the
 * first time any thread calls it (*done then set), so that the run's
 * verification must catch it.
 */
static inline void loader_corrupt_once(atomic_int *done, unsigned char *p,
				       size_t n)
{
	int expected = 0;

	if (atomic_compare_exchange_strong(done, &expected, 1))
		p[n / 2] ^= 0x5a;
}

/* ---- output -------------------------------------------------------------- */

/*
 * Prints 'epoch E rows R bytes B', then ' seconds S', ' device_h2d D' and
 * ' device_d2d_ns N' for those given (not NULL), ends the line and
 * flushes stdout.
 */
static inline void loader_print_epoch(unsigned epoch, unsigned long long rows,
				      unsigned long long bytes,
				      const double *seconds,
				      const unsigned long long *device_h2d,
				      const unsigned long long *device_d2d_ns)
{
	printf("epoch %u rows %llu bytes %llu", epoch, rows, bytes);
	if (seconds)
		printf(" seconds %.3f", *seconds);
	if (device_h2d)
		printf(" device_h2d %llu", *device_h2d);
	if (device_d2d_ns)
		printf(" device_d2d_ns %llu", *device_d2d_ns);
	printf("\n");
	fflush(stdout);
}

/*
 * Prints 'total rows R bytes B copies C', ' device_h2d D' when given (not
 * NULL), and the line 'verified OK'.
 */
static inline void loader_print_total(unsigned long long rows,
				      unsigned long long bytes,
				      unsigned long long copies,
				      const unsigned long long *device_h2d)
{
	printf("total rows %llu bytes %llu copies %llu", rows, bytes, copies);
	if (device_h2d)
		printf(" device_h2d %llu", *device_h2d);
	printf("\nverified OK\n");
}

/* ---- the emulated device's counters -------------------------------------- */

/* fakecuda_counter: the emulated device's counter of that name. */
typedef unsigned long long loader_counter_fn(const char *name);

/*
 * Returns the emulated device's fakecuda_counter, looked up in the global
 * scope and then, when handle is not NULL, in that library; NULL on a real
 * device.
 */
static inline loader_counter_fn *loader_counter_find(void *handle)
{
	loader_counter_fn *fn;

	*(void **)&fn = dlsym(RTLD_DEFAULT, "fakecuda_counter");
	if (!fn && handle)
		*(void **)&fn = dlsym(handle, "fakecuda_counter");
	return fn;
}

/* Returns the device's count of host-to-device bytes, or 0 without fn. */
static inline unsigned long long loader_counter_h2d(loader_counter_fn *fn)
{
	return fn ? fn("h2d_bytes") : 0;
}

#endif
