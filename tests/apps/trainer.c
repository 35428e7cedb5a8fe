/*
 * trainer: a training-style data-loading program, the main test vehicle of
 * vrampool.
 *
 * It builds a seeded dataset of N random samples (R bytes of data, an
 * optional second tensor of M bytes such as a segmentation mask, and an
 * 8-byte label each, some of them byte-copies of others when --dup asks),
 * and for every epoch reshuffles it (Fisher-Yates), assembles batches of B
 * samples into a ring of D staging buffers (optionally perturbing each
 * sample with fresh random bytes, like host-side random crops), uploads
 * each batch with ONE host-to-device copy of its rows, one of its masks
 * and one of its labels into a ring of device buffers, and finally reads
 * every batch back and compares each byte with what was uploaded. It is
 * written in plain C11 against the documented CUDA runtime and driver APIs
 * only, so the same binary runs on the emulated device
 * (LD_LIBRARY_PATH=build/fakecuda), on a real GPU, and with libvrampool.so
 * preloaded into it. The upload takes one of the routes real programs
 * take (--copy-api): the runtime's cudaMemcpy[Async] or cudaMemcpy2D[Async],
 * the driver's cuMemcpyHtoD[Async]_v2 called directly, or the driver's
 * copy function taken at run time from cuGetProcAddress_v2 or
 * cudaGetDriverEntryPointByVersion. Device memory comes from cudaMalloc,
 * the driver's cuMemAlloc_v2, or virtual memory management (cuMemCreate +
 * cuMemMap, the way PyTorch's expandable segments grow).
 *
 * Ordering rules it relies on, all documented CUDA semantics:
 *  - a staging slot is refilled only after the event recorded behind the
 *    copies that read it has completed (a pinned source is read when the copy
 *    runs, not when it is issued);
 *  - a device slot is reused only after the batch it holds has been read back
 *    and its stream synchronised; the device ring is twice as deep as the
 *    staging ring, so the event wait above is really needed;
 *  - the readback is stream-ordered after the upload on the same stream
 *    (or, with --sync, both are cudaMemcpy on the default stream).
 *
 * Exit status: 0 every byte verified, 1 a mismatch, 2 a bad option,
 * 3 a CUDA error (the call and cudaGetErrorName are printed).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/loader.h"

#define TRAINER_LABEL 8

/* What a run can end with; the values are the process exit statuses. */
enum trainer_status {
	TRAINER_OK = 0,
	TRAINER_MISMATCH = 1,
	TRAINER_USAGE = 2,
	TRAINER_CUDA = 3,
};

/* The stream kinds a run can put its copies on (--stream's words, in order). */
enum trainer_stream_mode {
	TRAINER_STREAM_LEGACY,
	TRAINER_STREAM_PTDS,
	TRAINER_STREAM_NONBLOCKING,
	TRAINER_STREAM_MULTI,
	TRAINER_STREAM_THREADS,
};

/* Device allocation entry points (--alloc-api's words, in order). */
enum trainer_alloc_api {
	TRAINER_ALLOC_MALLOC,
	TRAINER_ALLOC_ASYNC,
	TRAINER_ALLOC_MANAGED,
	TRAINER_ALLOC_PITCH,
	TRAINER_ALLOC_DRIVER,
	TRAINER_ALLOC_VMM,
};

/* The entry point the host-to-device copies go through (--copy-api). */
enum trainer_copy_api {
	TRAINER_COPY_RUNTIME,     /* cudaMemcpy[Async] with t->h2d_kind */
	TRAINER_COPY_DRIVER,      /* cuMemcpyHtoDAsync_v2, linked */
	TRAINER_COPY_DRIVER_SYNC, /* cuMemcpyHtoD_v2, linked */
	TRAINER_COPY_GETPROC,     /* cuMemcpyHtoDAsync from cuGetProcAddress_v2 */
	TRAINER_COPY_ENTRYPOINT,  /* ... from cudaGetDriverEntryPointByVersion */
	TRAINER_COPY_2D,          /* cudaMemcpy2D[Async], pitches == width */
};

/* Where the device batch buffers live (--buffers's words, in order). */
enum trainer_buffers {
	TRAINER_BUFFERS_MALLOC,   /* cudaMalloc */
	TRAINER_BUFFERS_VMM,      /* one cuMemCreate + cuMemMap range each */
};

/* The driver's asynchronous host-to-device copy, as an entry point. */
typedef CUresult trainer_htod_fn(CUdeviceptr dst, const void *src, size_t n,
				 CUstream stream);

/*
 * A range of virtual memory: reserved, backed by one physical allocation
 * (cuMemCreate) per chunk, each mapped and made accessible.
 */
struct trainer_vmm {
	CUdeviceptr base;
	size_t size;
	size_t chunk;
	CUmemGenericAllocationHandle *handles;
	size_t created;
	size_t mapped;
};

/* One staging buffer on the host and the event behind the copies reading it. */
struct trainer_slot {
	unsigned char *data;
	unsigned char *masks;
	unsigned char *labels;
	cudaEvent_t copied;
	int used;
};

/*
 * One device batch buffer and the batch it holds until it is verified; with
 * --augment, also the bytes that were uploaded into it (the dataset no
 * longer says what they are).
 */
struct trainer_devslot {
	void *data;
	void *masks;
	void *labels;
	struct trainer_vmm vmm[3];
	unsigned char *expect_data;
	unsigned char *expect_masks;
	int augmented;
	cudaStream_t stream;
	size_t batch;
	size_t count;
	int pending;
};

struct trainer;

/*
 * A worker uploads and verifies a share of the batches: the only one in most
 * modes, one per host thread with --stream threads. It owns its rings, its
 * streams and its readback buffer; its counters are summed per epoch.
 */
struct trainer_worker {
	struct trainer *trainer;
	unsigned index;
	cudaStream_t *streams;
	unsigned nstreams;
	int owns_streams;
	struct trainer_slot *slots;
	struct trainer_devslot *devslots;
	unsigned char *check_data;
	unsigned char *check_masks;
	unsigned char *check_labels;
	uint64_t rng;
	size_t sequence;
	unsigned long long rows;
	unsigned long long bytes;
	unsigned long long copies;
	enum trainer_status status;
};

/* The whole run: options, dataset, the epoch's sample order and workers. */
struct trainer {
	/* Options: those of every loader, then the trainer's own. */
	struct loader_shape shape;
	enum trainer_stream_mode mode;
	unsigned nstreams;
	unsigned nthreads;
	int sync;
	int hostfn;
	int device_time;        /* --device-time: the emulated device's d2d_ns per epoch */
	enum cudaMemcpyKind h2d_kind;
	enum cudaMemcpyKind d2h_kind;
	unsigned dup_pct;
	int drop_last;
	size_t alloc_bytes;
	unsigned alloc_epoch;
	enum trainer_alloc_api alloc_api;
	enum trainer_copy_api copy_api;
	enum trainer_buffers buffers;
	size_t mask_row;
	long augment;
	int device;

	/* Dataset and per-epoch state. */
	uint64_t rng;
	unsigned char *data;
	unsigned char *masks;
	unsigned char *labels;
	size_t *order;
	size_t unique;
	size_t nbatches;
	unsigned epoch;
	void *alloc_ptr;
	struct trainer_vmm alloc_vmm;
	trainer_htod_fn *htod;
	struct trainer_worker *workers;
	unsigned nworkers;
	atomic_int stop;
	atomic_int corrupted;
	loader_counter_fn *counter;

	/* Totals. */
	unsigned long long rows;
	unsigned long long bytes;
	unsigned long long copies;
	unsigned long long device_h2d;
};

static const char trainer_usage_line[] =
	"usage: trainer [--samples N] [--row R] [--batch B] [--epochs E]\n"
	"               [--pinned|--pageable] [--seed S] [--ring D]\n"
	"               [--stream legacy|ptds|nonblocking|multi|threads]\n"
	"               [--streams K] [--threads T] [--sync] [--hostfn]\n"
	"               [--copy-api explicit|memcpy-default|memcpy2d|driver|\n"
	"                           driver-sync|driver-getproc|driver-entrypoint]\n"
	"               [--dup PCT] [--mask-row BYTES] [--augment E]\n"
	"               [--partial|--drop-last] [--alloc-mid BYTES[@EPOCH]]\n"
	"               [--alloc-api malloc|async|managed|pitch|driver|vmm]\n"
	"               [--buffers malloc|vmm] [--device I] [--quiet] [--help]\n";

static const char trainer_help_text[] =
	"\n"
	"A training-style loader: per epoch a seeded reshuffle, batches assembled\n"
	"into a staging ring, one host-to-device copy of the rows (one of the masks)\n"
	"and one of the labels per batch, then every byte read back and verified.\n"
	"\n"
	"  --samples N     samples in the dataset (1000)\n"
	"  --row R         bytes of data per sample (3072); each also has 8 label bytes\n"
	"  --batch B       samples per batch (64)\n"
	"  --epochs E      epochs (3)\n"
	"  --pinned        dataset, staging and readback in cudaHostAlloc memory (default)\n"
	"  --pageable      ... in malloc memory\n"
	"  --seed S        seed of the dataset and the shuffles (1)\n"
	"  --ring D        staging ring depth (4); the device ring is 2*D deep\n"
	"  --stream MODE   legacy (stream 0), ptds (cudaStreamPerThread), nonblocking,\n"
	"                  multi (--streams K, round-robin), threads (--threads T host\n"
	"                  threads, each with a non-blocking stream)\n"
	"  --streams K     streams for --stream multi (2)\n"
	"  --threads T     host threads for --stream threads (2)\n"
	"  --sync          cudaMemcpy instead of cudaMemcpyAsync (modes legacy, ptds,\n"
	"                  threads; each worker then uses the default stream)\n"
	"  --hostfn        a host function (it does nothing) queued on the stream\n"
	"                  before each batch's uploads\n"
	"  --device-time   append 'device_d2d_ns N' to each epoch line: the emulated\n"
	"                  device's time on device-to-device copies and gathers in the\n"
	"                  epoch (its d2d_ns counter; nothing on a real device)\n"
	"  --copy-api A    how the host-to-device copies are made:\n"
	"                  explicit (default): cudaMemcpy[Async], explicit kinds\n"
	"                  memcpy-default: the same with cudaMemcpyDefault\n"
	"                  memcpy2d: cudaMemcpy2D[Async], pitches equal to the width\n"
	"                  driver: cuMemcpyHtoDAsync_v2 on the run's stream\n"
	"                  driver-sync: cuMemcpyHtoD_v2 (implies --sync's streams)\n"
	"                  driver-getproc: cuMemcpyHtoDAsync taken with\n"
	"                    cuGetProcAddress_v2 (per-thread flag and stream 0\n"
	"                    with --stream ptds, the legacy flag otherwise)\n"
	"                  driver-entrypoint: the same taken with\n"
	"                    cudaGetDriverEntryPointByVersion\n"
	"  --dup PCT       share of samples that are byte-copies of other samples (0)\n"
	"  --mask-row M    a second tensor of M bytes per sample (a mask), uploaded\n"
	"                  per batch as its own copy after the rows (0: none)\n"
	"  --augment E     in epochs 1..E (-1: every epoch, 0: none) each sample's\n"
	"                  rows and masks get fresh random bytes as they are\n"
	"                  assembled, so they never repeat (0)\n"
	"  --partial       keep the last partial batch when B does not divide N (default)\n"
	"  --drop-last     drop it instead\n"
	"  --alloc-mid BYTES[@EPOCH]  at the start of EPOCH (1-based, default 2)\n"
	"                  allocate BYTES of device memory, prove it usable, keep it\n"
	"  --alloc-api A   malloc (default), async, managed, pitch, driver\n"
	"                  (cuMemAlloc_v2) or vmm (reserve, then cuMemCreate +\n"
	"                  cuMemMap + cuMemSetAccess one granule at a time)\n"
	"  --buffers B     device batch buffers from malloc (cudaMalloc, default)\n"
	"                  or vmm (one cuMemCreate + cuMemMap range each)\n"
	"  --device I      cudaSetDevice(I) (0)\n"
	"  --quiet         no dataset and epoch lines\n"
	"\n"
	"stdout: 'epoch E rows R bytes B seconds S [device_h2d D [device_d2d_ns N]]' per epoch, then\n"
	"'total rows R bytes B copies C [device_h2d D]' and 'verified OK'.\n"
	"Exit: 0 verified, 1 mismatch, 2 bad option, 3 CUDA error.\n";

/* Returns seconds on the monotonic clock. */
static double trainer_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Reports a failed CUDA call on stderr. Returns TRAINER_OK when err is
 * cudaSuccess, else TRAINER_CUDA.
 */
static enum trainer_status trainer_cuda(cudaError_t err, const char *call)
{
	if (err == cudaSuccess)
		return TRAINER_OK;
	fprintf(stderr, "trainer: %s failed: %s (%s)\n", call,
		cudaGetErrorName(err), cudaGetErrorString(err));
	return TRAINER_CUDA;
}

/*
 * Reports a failed driver call on stderr. Returns TRAINER_OK when err is
 * CUDA_SUCCESS, else TRAINER_CUDA.
 */
static enum trainer_status trainer_cu(CUresult err, const char *call)
{
	const char *name = NULL;

	if (err == CUDA_SUCCESS)
		return TRAINER_OK;
	if (cuGetErrorName(err, &name) != CUDA_SUCCESS || !name)
		name = "unknown CUresult";
	fprintf(stderr, "trainer: %s failed: %s (%d)\n", call, name, (int)err);
	return TRAINER_CUDA;
}

/* Reports host memory exhaustion; the run then ends as a failed call (3). */
static enum trainer_status trainer_no_memory(const char *what)
{
	fprintf(stderr, "trainer: out of host memory (%s)\n", what);
	return TRAINER_CUDA;
}

/* Evaluates a CUDA call; on failure reports it and jumps to label. */
#define TRAINER_CHECK(status, call, label)                                   \
	do {                                                                 \
		if (((status) = trainer_cuda((call), #call)) != TRAINER_OK) \
			goto label;                                          \
	} while (0)

/* Evaluates a driver call; on failure reports it and jumps to label. */
#define TRAINER_CU_CHECK(status, call, label)                              \
	do {                                                                 \
		if (((status) = trainer_cu((call), #call)) != TRAINER_OK)   \
			goto label;                                          \
	} while (0)

/*
 * Parses a byte size with an optional K, M, G or T suffix (powers of 1024),
 * ending at stop (or at the end of the string). Returns 0 or -EINVAL.
 */
static int trainer_parse_size(const char *s, const char **stop, size_t *out)
{
	char *end;
	unsigned long long v, mult = 1;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': mult = 1ULL << 10; end++; break;
	case 'M': case 'm': mult = 1ULL << 20; end++; break;
	case 'G': case 'g': mult = 1ULL << 30; end++; break;
	case 'T': case 't': mult = 1ULL << 40; end++; break;
	default: break;
	}
	if (v > SIZE_MAX / mult)
		return -EINVAL;
	*out = (size_t)(v * mult);
	*stop = end;
	return 0;
}

/* Codes of the trainer's own options, after those of every loader. */
enum trainer_option {
	OPT_STREAM = LOADER_OPT_NEXT, OPT_STREAMS, OPT_THREADS, OPT_SYNC,
	OPT_COPY_API, OPT_DUP, OPT_PARTIAL, OPT_DROP_LAST, OPT_ALLOC_MID,
	OPT_ALLOC_API, OPT_DEVICE, OPT_MASK_ROW, OPT_AUGMENT, OPT_BUFFERS, OPT_HOSTFN,
	OPT_DEVICE_TIME,
};

static const struct option trainer_options[] = {
	LOADER_SHAPE_OPTIONS,
	{ "stream", required_argument, NULL, OPT_STREAM },
	{ "streams", required_argument, NULL, OPT_STREAMS },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "sync", no_argument, NULL, OPT_SYNC },
	{ "hostfn", no_argument, NULL, OPT_HOSTFN },
	{ "device-time", no_argument, NULL, OPT_DEVICE_TIME },
	{ "copy-api", required_argument, NULL, OPT_COPY_API },
	{ "dup", required_argument, NULL, OPT_DUP },
	{ "mask-row", required_argument, NULL, OPT_MASK_ROW },
	{ "augment", required_argument, NULL, OPT_AUGMENT },
	{ "buffers", required_argument, NULL, OPT_BUFFERS },
	{ "partial", no_argument, NULL, OPT_PARTIAL },
	{ "drop-last", no_argument, NULL, OPT_DROP_LAST },
	{ "alloc-mid", required_argument, NULL, OPT_ALLOC_MID },
	{ "alloc-api", required_argument, NULL, OPT_ALLOC_API },
	{ "device", required_argument, NULL, OPT_DEVICE },
	{ NULL, 0, NULL, 0 },
};

/* Parses the --alloc-mid argument BYTES[@EPOCH]. Returns 0 or -EINVAL. */
static int trainer_parse_alloc_mid(struct trainer *t, const char *arg)
{
	const char *stop;
	uint64_t epoch = 2;

	if (trainer_parse_size(arg, &stop, &t->alloc_bytes) || t->alloc_bytes == 0)
		return -EINVAL;
	if (*stop == '@') {
		if (loader_parse_u64(stop + 1, 1000000, &epoch) || epoch == 0)
			return -EINVAL;
	} else if (*stop) {
		return -EINVAL;
	}
	t->alloc_epoch = (unsigned)epoch;
	return 0;
}

/* Parses the --copy-api argument. Returns 0 or 1 (not a known route). */
static int trainer_parse_copy_api(struct trainer *t, const char *arg)
{
	static const struct {
		const char *name;
		enum trainer_copy_api api;
	} apis[] = {
		{ "explicit", TRAINER_COPY_RUNTIME },
		{ "memcpy-default", TRAINER_COPY_RUNTIME },
		{ "memcpy2d", TRAINER_COPY_2D },
		{ "driver", TRAINER_COPY_DRIVER },
		{ "driver-sync", TRAINER_COPY_DRIVER_SYNC },
		{ "driver-getproc", TRAINER_COPY_GETPROC },
		{ "driver-entrypoint", TRAINER_COPY_ENTRYPOINT },
	};
	int isdefault = !strcmp(arg, "memcpy-default");

	for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++) {
		if (strcmp(arg, apis[i].name))
			continue;
		t->copy_api = apis[i].api;
		t->h2d_kind = isdefault ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
		t->d2h_kind = isdefault ? cudaMemcpyDefault : cudaMemcpyDeviceToHost;
		return 0;
	}
	return 1;
}

/*
 * Parses one option into the struct trainer at ctx. Returns 0, or
 * nonzero for a bad value.
 */
static int trainer_parse_option(void *ctx, int opt, const char *arg)
{
	static const char *const modes[] = {
		"legacy", "ptds", "nonblocking", "multi", "threads", NULL,
	};
	static const char *const allocs[] = {
		"malloc", "async", "managed", "pitch", "driver", "vmm", NULL,
	};
	static const char *const buffers[] = { "malloc", "vmm", NULL };
	struct trainer *t = ctx;
	const struct loader_field fields[] = {
		LOADER_SHAPE_FIELDS(&t->shape),
		LOADER_WORDS(OPT_STREAM, modes, t->mode),
		LOADER_NUMBER(OPT_STREAMS, 1, 256, t->nstreams),
		LOADER_NUMBER(OPT_THREADS, 1, 256, t->nthreads),
		LOADER_FLAG(OPT_SYNC, t->sync, 1),
		LOADER_FLAG(OPT_HOSTFN, t->hostfn, 1),
		LOADER_FLAG(OPT_DEVICE_TIME, t->device_time, 1),
		LOADER_NUMBER(OPT_MASK_ROW, 0, 1ULL << 32, t->mask_row),
		LOADER_NUMBER(OPT_AUGMENT, 0, 1000000, t->augment),
		LOADER_WORDS(OPT_BUFFERS, buffers, t->buffers),
		LOADER_NUMBER(OPT_DUP, 0, 100, t->dup_pct),
		LOADER_FLAG(OPT_PARTIAL, t->drop_last, 0),
		LOADER_FLAG(OPT_DROP_LAST, t->drop_last, 1),
		LOADER_WORDS(OPT_ALLOC_API, allocs, t->alloc_api),
		LOADER_NUMBER(OPT_DEVICE, 0, 1024, t->device),
	};

	if (opt == OPT_COPY_API)
		return trainer_parse_copy_api(t, arg);
	if (opt == OPT_ALLOC_MID)
		return trainer_parse_alloc_mid(t, arg) != 0;
	if (opt == OPT_AUGMENT && !strcmp(arg, "-1")) {
		t->augment = -1;
		return 0;
	}
	return loader_fields_parse(fields, LOADER_COUNT(fields), opt, arg) != 0;
}

/*
 * Parses the command line into t, after setting the defaults. Returns
 * TRAINER_OK, TRAINER_USAGE (usage printed on stderr), or -1 after --help.
 */
static int trainer_parse_args(struct trainer *t, int argc, char **argv)
{
	const struct loader_cli cli = {
		.prog = "trainer", .options = trainer_options,
		.usage = trainer_usage_line, .help = trainer_help_text,
		.parse = trainer_parse_option, .ctx = t,
	};
	int err;

	loader_shape_defaults(&t->shape);
	t->mode = TRAINER_STREAM_LEGACY;
	t->nstreams = 2;
	t->nthreads = 2;
	t->h2d_kind = cudaMemcpyHostToDevice;
	t->d2h_kind = cudaMemcpyDeviceToHost;
	t->alloc_epoch = 2;
	err = loader_cli_parse(&cli, argc, argv);
	if (err > 0)
		return -1;
	if (err)
		goto usage;
	if (t->sync && (t->copy_api == TRAINER_COPY_DRIVER ||
			t->copy_api == TRAINER_COPY_GETPROC ||
			t->copy_api == TRAINER_COPY_ENTRYPOINT)) {
		fprintf(stderr, "trainer: --sync with a driver route: use "
			"--copy-api driver-sync\n");
		goto usage;
	}
	if (t->copy_api == TRAINER_COPY_DRIVER_SYNC)
		t->sync = 1;
	if (t->sync && (t->mode == TRAINER_STREAM_NONBLOCKING ||
			t->mode == TRAINER_STREAM_MULTI)) {
		fprintf(stderr, "trainer: --sync and driver-sync work on the default "
			"stream: use them with --stream legacy, ptds or threads\n");
		goto usage;
	}
	if (t->alloc_bytes && t->alloc_epoch > t->shape.epochs) {
		fprintf(stderr, "trainer: --alloc-mid epoch %u is past --epochs %u\n",
			t->alloc_epoch, t->shape.epochs);
		goto usage;
	}
	if (!loader_shape_fits(&t->shape, t->shape.row) ||
	    !loader_shape_fits(&t->shape, t->mask_row)) {
		fprintf(stderr, "trainer: dataset too large\n");
		goto usage;
	}
	return TRAINER_OK;
usage:
	fputs(trainer_usage_line, stderr);
	return TRAINER_USAGE;
}

/* Allocates n bytes of host memory, pinned or pageable as the run asks. */
static enum trainer_status trainer_host_alloc(struct trainer *t, size_t n,
					      unsigned char **out)
{
	enum trainer_status status = TRAINER_OK;
	void *p = NULL;

	if (t->shape.pinned) {
		TRAINER_CHECK(status, cudaHostAlloc(&p, n, cudaHostAllocDefault), out);
	} else {
		p = malloc(n);
		if (!p) {
			status = trainer_no_memory("malloc");
			goto out;
		}
	}
	*out = p;
out:
	return status;
}

/* Frees host memory from trainer_host_alloc and resets the pointer. */
static void trainer_host_free(struct trainer *t, unsigned char **p)
{
	if (!*p)
		return;
	if (t->shape.pinned)
		cudaFreeHost(*p);
	else
		free(*p);
	*p = NULL;
}

/* Orders two sample indices by the bytes of their data rows (qsort_r). */
static int trainer_row_compare(const void *a, const void *b, void *arg)
{
	const struct trainer *t = arg;

	return memcmp(t->data + *(const size_t *)a * t->shape.row,
		      t->data + *(const size_t *)b * t->shape.row, t->shape.row);
}

/*
 * Counts the distinct data rows of the dataset (what a content-keyed pool
 * would hold), using t->order as scratch.
 */
static size_t trainer_count_unique(struct trainer *t)
{
	size_t unique = 1;

	loader_order_identity(t->order, t->shape.samples);
	qsort_r(t->order, t->shape.samples, sizeof(*t->order), trainer_row_compare, t);
	for (size_t i = 1; i < t->shape.samples; i++)
		if (trainer_row_compare(&t->order[i - 1], &t->order[i], t) != 0)
			unique++;
	return unique;
}

/*
 * Generates the dataset from the seed: random rows and labels, then dup_pct
 * percent of the samples (at random places) overwritten with a byte-copy of
 * a random original sample, data, mask and label. The masks come from a
 * generator of their own, so that every other byte of the run is the same
 * with and without --mask-row.
 */
static enum trainer_status trainer_dataset_init(struct trainer *t)
{
	enum trainer_status status;
	size_t ndup, noriginal;

	status = trainer_host_alloc(t, t->shape.samples * t->shape.row, &t->data);
	if (status)
		goto out;
	status = trainer_host_alloc(t, t->shape.samples * TRAINER_LABEL, &t->labels);
	if (status)
		goto out;
	if (t->mask_row &&
	    (status = trainer_host_alloc(t, t->shape.samples * t->mask_row, &t->masks)))
		goto out;
	t->order = calloc(t->shape.samples, sizeof(*t->order));
	if (!t->order) {
		status = trainer_no_memory("sample order");
		goto out;
	}
	t->rng = t->shape.seed;
	loader_rng_fill(&t->rng, t->data, t->shape.samples * t->shape.row);
	loader_rng_fill(&t->rng, t->labels, t->shape.samples * TRAINER_LABEL);
	if (t->mask_row) {
		uint64_t mask_rng = t->shape.seed ^ 0x6d61736b6d61736bULL;

		loader_rng_fill(&mask_rng, t->masks, t->shape.samples * t->mask_row);
	}

	ndup = t->shape.samples * t->dup_pct / 100;
	if (ndup >= t->shape.samples)
		ndup = t->shape.samples - 1;
	noriginal = t->shape.samples - ndup;
	loader_order_identity(t->order, t->shape.samples);
	loader_rng_shuffle(&t->rng, t->order, t->shape.samples);
	for (size_t i = noriginal; i < t->shape.samples; i++) {
		size_t dst = t->order[i];
		size_t src = t->order[loader_rng_below(&t->rng, noriginal)];

		memcpy(t->data + dst * t->shape.row, t->data + src * t->shape.row, t->shape.row);
		memcpy(t->labels + dst * TRAINER_LABEL,
		       t->labels + src * TRAINER_LABEL, TRAINER_LABEL);
		if (t->mask_row)
			memcpy(t->masks + dst * t->mask_row,
			       t->masks + src * t->mask_row, t->mask_row);
	}
	t->unique = trainer_count_unique(t);
	loader_order_identity(t->order, t->shape.samples);
	t->nbatches = t->shape.samples / t->shape.batch;
	if (!t->drop_last && t->shape.samples % t->shape.batch)
		t->nbatches++;
	if (!t->shape.quiet)
		printf("dataset samples %zu row %zu batch %zu batches %zu duplicates %zu unique %zu\n",
		       t->shape.samples, t->shape.row, t->shape.batch, t->nbatches, ndup, t->unique);
out:
	return status;
}

/* Frees the dataset. */
static void trainer_dataset_release(struct trainer *t)
{
	trainer_host_free(t, &t->data);
	trainer_host_free(t, &t->masks);
	trainer_host_free(t, &t->labels);
	free(t->order);
	t->order = NULL;
}

/*
 * Reserves n bytes (rounded up to the allocation granularity) of virtual
 * address space for the run's device and backs it with physical memory,
 * chunk bytes at a time (rounded up to the granularity; 0: all at once):
 * each chunk is created (cuMemCreate), mapped (cuMemMap) and made
 * read-write (cuMemSetAccess) in turn, the way PyTorch's expandable
 * segments grow. After a failure trainer_vmm_release undoes what was made.
 */
static enum trainer_status trainer_vmm_alloc(struct trainer *t,
					     struct trainer_vmm *v, size_t n,
					     size_t chunk)
{
	enum trainer_status status = TRAINER_OK;
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	size_t gran, count;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = t->device;
	memset(&access, 0, sizeof(access));
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	TRAINER_CU_CHECK(status, cuMemGetAllocationGranularity(&gran, &prop,
			CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), out);
	v->size = (n + gran - 1) / gran * gran;
	v->chunk = chunk ? (chunk + gran - 1) / gran * gran : v->size;
	if (v->chunk > v->size)
		v->chunk = v->size;
	count = (v->size + v->chunk - 1) / v->chunk;
	v->handles = calloc(count, sizeof(*v->handles));
	if (!v->handles) {
		status = trainer_no_memory("vmm handles");
		goto out;
	}
	TRAINER_CU_CHECK(status, cuMemAddressReserve(&v->base, v->size, 0, 0, 0), out);
	for (size_t i = 0; i < count; i++) {
		CUdeviceptr at = v->base + i * v->chunk;
		size_t k = v->size - i * v->chunk < v->chunk ?
			   v->size - i * v->chunk : v->chunk;

		TRAINER_CU_CHECK(status, cuMemCreate(&v->handles[i], k, &prop, 0), out);
		v->created++;
		TRAINER_CU_CHECK(status, cuMemMap(at, k, 0, v->handles[i], 0), out);
		v->mapped++;
		TRAINER_CU_CHECK(status, cuMemSetAccess(at, k, &access, 1), out);
	}
out:
	return status;
}

/* Unmaps, releases and frees what trainer_vmm_alloc made, then resets v. */
static void trainer_vmm_release(struct trainer_vmm *v)
{
	for (size_t i = 0; i < v->mapped; i++) {
		size_t k = v->size - i * v->chunk < v->chunk ?
			   v->size - i * v->chunk : v->chunk;

		cuMemUnmap(v->base + i * v->chunk, k);
	}
	for (size_t i = 0; i < v->created; i++)
		cuMemRelease(v->handles[i]);
	if (v->base)
		cuMemAddressFree(v->base, v->size);
	free(v->handles);
	memset(v, 0, sizeof(*v));
}

/* Allocates one device batch buffer of n bytes as --buffers says. */
static enum trainer_status trainer_buffer_alloc(struct trainer *t,
						struct trainer_vmm *v, size_t n,
						void **out)
{
	enum trainer_status status = TRAINER_OK;

	if (t->buffers == TRAINER_BUFFERS_VMM) {
		status = trainer_vmm_alloc(t, v, n, 0);
		if (!status)
			*out = (void *)(uintptr_t)v->base;
	} else {
		TRAINER_CHECK(status, cudaMalloc(out, n), out);
	}
out:
	return status;
}

/* Frees a buffer from trainer_buffer_alloc and resets the pointer. */
static void trainer_buffer_free(struct trainer *t, struct trainer_vmm *v,
				void **p)
{
	if (t->buffers == TRAINER_BUFFERS_VMM)
		trainer_vmm_release(v);
	else if (*p)
		cudaFree(*p);
	*p = NULL;
}

/*
 * Creates the worker's streams: the default stream (0) for legacy and
 * --sync, cudaStreamPerThread for ptds, K blocking streams for multi, one
 * non-blocking stream otherwise.
 */
static enum trainer_status trainer_worker_init_streams(struct trainer_worker *w)
{
	struct trainer *t = w->trainer;
	enum trainer_status status = TRAINER_OK;
	unsigned n = t->mode == TRAINER_STREAM_MULTI ? t->nstreams : 1;

	w->streams = calloc(n, sizeof(*w->streams));
	if (!w->streams) {
		status = trainer_no_memory("streams");
		goto out;
	}
	w->nstreams = n;
	if (t->mode == TRAINER_STREAM_PTDS) {
		w->streams[0] = cudaStreamPerThread;
	} else if (t->mode == TRAINER_STREAM_LEGACY || t->sync) {
		w->streams[0] = 0;
	} else if (t->mode == TRAINER_STREAM_MULTI) {
		w->owns_streams = 1;
		for (unsigned i = 0; i < n; i++)
			TRAINER_CHECK(status, cudaStreamCreate(&w->streams[i]), out);
	} else {
		w->owns_streams = 1;
		TRAINER_CHECK(status, cudaStreamCreateWithFlags(&w->streams[0],
				cudaStreamNonBlocking), out);
	}
out:
	return status;
}

/* Sets up a worker's streams, staging ring, device ring and readback buffer. */
static enum trainer_status trainer_worker_init(struct trainer_worker *w,
					       struct trainer *t, unsigned index)
{
	enum trainer_status status;
	size_t data_bytes = t->shape.batch * t->shape.row;
	size_t mask_bytes = t->shape.batch * t->mask_row;
	size_t label_bytes = t->shape.batch * TRAINER_LABEL;

	w->trainer = t;
	w->index = index;
	w->rng = t->shape.seed ^ (0x61756d656e74ULL * (index + 1));
	status = trainer_worker_init_streams(w);
	if (status)
		goto out;
	w->slots = calloc(t->shape.ring, sizeof(*w->slots));
	w->devslots = calloc(2 * (size_t)t->shape.ring, sizeof(*w->devslots));
	if (!w->slots || !w->devslots) {
		status = trainer_no_memory("rings");
		goto out;
	}
	for (unsigned i = 0; i < t->shape.ring; i++) {
		struct trainer_slot *s = &w->slots[i];

		if ((status = trainer_host_alloc(t, data_bytes, &s->data)) ||
		    (status = trainer_host_alloc(t, label_bytes, &s->labels)))
			goto out;
		if (mask_bytes &&
		    (status = trainer_host_alloc(t, mask_bytes, &s->masks)))
			goto out;
		TRAINER_CHECK(status, cudaEventCreateWithFlags(&s->copied,
				cudaEventDisableTiming), out);
	}
	for (unsigned i = 0; i < 2 * t->shape.ring; i++) {
		struct trainer_devslot *d = &w->devslots[i];

		if ((status = trainer_buffer_alloc(t, &d->vmm[0], data_bytes, &d->data)) ||
		    (status = trainer_buffer_alloc(t, &d->vmm[2], label_bytes, &d->labels)))
			goto out;
		if (mask_bytes &&
		    (status = trainer_buffer_alloc(t, &d->vmm[1], mask_bytes, &d->masks)))
			goto out;
		if (!t->augment)
			continue;
		d->expect_data = malloc(data_bytes);
		d->expect_masks = malloc(mask_bytes ? mask_bytes : 1);
		if (!d->expect_data || !d->expect_masks) {
			status = trainer_no_memory("expected bytes");
			goto out;
		}
	}
	if ((status = trainer_host_alloc(t, data_bytes, &w->check_data)) ||
	    (status = trainer_host_alloc(t, label_bytes, &w->check_labels)))
		goto out;
	if (mask_bytes &&
	    (status = trainer_host_alloc(t, mask_bytes, &w->check_masks)))
		goto out;
out:
	return status;
}

/* Frees everything trainer_worker_init made (also after a partial init). */
static void trainer_worker_release(struct trainer_worker *w)
{
	struct trainer *t = w->trainer;

	if (!t)
		return;
	if (w->slots) {
		for (unsigned i = 0; i < t->shape.ring; i++) {
			trainer_host_free(t, &w->slots[i].data);
			trainer_host_free(t, &w->slots[i].masks);
			trainer_host_free(t, &w->slots[i].labels);
			if (w->slots[i].copied)
				cudaEventDestroy(w->slots[i].copied);
		}
		free(w->slots);
		w->slots = NULL;
	}
	if (w->devslots) {
		for (unsigned i = 0; i < 2 * t->shape.ring; i++) {
			struct trainer_devslot *d = &w->devslots[i];

			trainer_buffer_free(t, &d->vmm[0], &d->data);
			trainer_buffer_free(t, &d->vmm[1], &d->masks);
			trainer_buffer_free(t, &d->vmm[2], &d->labels);
			free(d->expect_data);
			d->expect_data = NULL;
			free(d->expect_masks);
			d->expect_masks = NULL;
		}
		free(w->devslots);
		w->devslots = NULL;
	}
	trainer_host_free(t, &w->check_data);
	trainer_host_free(t, &w->check_masks);
	trainer_host_free(t, &w->check_labels);
	if (w->owns_streams)
		for (unsigned i = 0; i < w->nstreams; i++)
			if (w->streams[i])
				cudaStreamDestroy(w->streams[i]);
	free(w->streams);
	w->streams = NULL;
}

/* Issues one copy: cudaMemcpy with --sync, else cudaMemcpyAsync on stream. */
static enum trainer_status trainer_copy(struct trainer *t, void *dst,
					const void *src, size_t n,
					enum cudaMemcpyKind kind,
					cudaStream_t stream, const char *what)
{
	enum trainer_status status;
	char call[96];

	if (t->sync) {
		snprintf(call, sizeof(call), "cudaMemcpy(%s)", what);
		status = trainer_cuda(cudaMemcpy(dst, src, n, kind), call);
	} else {
		snprintf(call, sizeof(call), "cudaMemcpyAsync(%s)", what);
		status = trainer_cuda(cudaMemcpyAsync(dst, src, n, kind, stream), call);
	}
	return status;
}

/* --hostfn's host function: queued ahead of a batch's uploads, it does nothing. */
static void CUDART_CB trainer_nothing(void *arg)
{
	(void)arg;
}

/*
 * Issues one host-to-device copy of count samples of stride bytes each,
 * through the run's --copy-api route, on stream (the per-thread stream as
 * stream 0 for a per-thread entry point taken at run time).
 */
static enum trainer_status trainer_upload(struct trainer *t, void *dst,
					  const void *src, size_t stride,
					  size_t count, cudaStream_t stream,
					  const char *what)
{
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst;
	size_t n = stride * count;
	char call[96];

	switch (t->copy_api) {
	case TRAINER_COPY_2D:
		if (t->sync) {
			snprintf(call, sizeof(call), "cudaMemcpy2D(%s)", what);
			return trainer_cuda(cudaMemcpy2D(dst, stride, src, stride,
							 stride, count, t->h2d_kind), call);
		}
		snprintf(call, sizeof(call), "cudaMemcpy2DAsync(%s)", what);
		return trainer_cuda(cudaMemcpy2DAsync(dst, stride, src, stride, stride,
						      count, t->h2d_kind, stream), call);
	case TRAINER_COPY_DRIVER:
		snprintf(call, sizeof(call), "cuMemcpyHtoDAsync(%s)", what);
		return trainer_cu(cuMemcpyHtoDAsync(d, src, n, stream), call);
	case TRAINER_COPY_DRIVER_SYNC:
		snprintf(call, sizeof(call), "cuMemcpyHtoD(%s)", what);
		return trainer_cu(cuMemcpyHtoD(d, src, n), call);
	case TRAINER_COPY_GETPROC:
	case TRAINER_COPY_ENTRYPOINT:
		snprintf(call, sizeof(call), "cuMemcpyHtoDAsync entry point (%s)", what);
		if (t->mode == TRAINER_STREAM_PTDS)
			stream = NULL;
		return trainer_cu(t->htod(d, src, n, stream), call);
	case TRAINER_COPY_RUNTIME:
		break;
	}
	return trainer_copy(t, dst, src, n, t->h2d_kind, stream, what);
}

/*
 * Reads back the batch held by device slot d, waits for it on the slot's
 * stream, and checks every byte of its rows, masks and labels against the
 * uploaded bytes (augmented batches) or the dataset's samples.
 */
static enum trainer_status trainer_worker_verify(struct trainer_worker *w,
						 struct trainer_devslot *d)
{
	struct trainer *t = w->trainer;
	struct loader_batch batch = {
		.prog = "trainer", .epoch = t->epoch, .index = d->batch,
		.order = t->order + d->batch * t->shape.batch, .count = d->count,
	};
	enum trainer_status status;

	d->pending = 0;
	status = trainer_copy(t, w->check_data, d->data, d->count * t->shape.row,
			      t->d2h_kind, d->stream, "readback data");
	if (status)
		goto out;
	if (t->mask_row) {
		status = trainer_copy(t, w->check_masks, d->masks,
				      d->count * t->mask_row, t->d2h_kind,
				      d->stream, "readback masks");
		if (status)
			goto out;
	}
	status = trainer_copy(t, w->check_labels, d->labels,
			      d->count * TRAINER_LABEL, t->d2h_kind, d->stream,
			      "readback labels");
	if (status)
		goto out;
	TRAINER_CHECK(status, cudaStreamSynchronize(d->stream), out);
	if (t->shape.corrupt_check)
		loader_corrupt_once(&t->corrupted, w->check_data,
				    d->count * t->shape.row);
	batch.what = "data";
	if (loader_batch_differs(&batch, w->check_data, t->data,
				 d->augmented ? d->expect_data : NULL, t->shape.row))
		goto mismatch;
	batch.what = "masks";
	if (t->mask_row &&
	    loader_batch_differs(&batch, w->check_masks, t->masks,
				 d->augmented ? d->expect_masks : NULL, t->mask_row))
		goto mismatch;
	batch.what = "labels";
	if (loader_batch_differs(&batch, w->check_labels, t->labels, NULL,
				 TRAINER_LABEL))
		goto mismatch;
	goto out;
mismatch:
	status = TRAINER_MISMATCH;
out:
	return status;
}

/*
 * Overwrites the n bytes at p with fresh random bytes, as random crops,
 * flips and colour jitter on the host change every byte of a sample: no
 * part of it repeats, at any row size.
 */
static void trainer_perturb(uint64_t *rng, unsigned char *p, size_t n)
{
	loader_rng_fill(rng, p, n);
}

/* Returns whether --augment perturbs the samples of the current epoch. */
static int trainer_augmenting(const struct trainer *t)
{
	return t->augment < 0 || (t->augment > 0 && t->epoch <= (unsigned long)t->augment);
}

/*
 * Uploads one batch: waits until the staging slot's previous copies have
 * run, verifies the batch still held by the device slot, assembles the
 * samples into the staging slot (perturbed when augmenting, the uploaded
 * bytes then kept for verification), issues the host-to-device copies
 * (rows, masks, labels), and records the slot's event behind them.
 */
static enum trainer_status trainer_worker_batch(struct trainer_worker *w,
						size_t batch)
{
	struct trainer *t = w->trainer;
	enum trainer_status status = TRAINER_OK;
	struct trainer_slot *s = &w->slots[w->sequence % t->shape.ring];
	struct trainer_devslot *d = &w->devslots[w->sequence % (2 * t->shape.ring)];
	cudaStream_t stream = w->streams[w->sequence % w->nstreams];
	size_t first = batch * t->shape.batch;
	size_t count = loader_shape_batch_rows(&t->shape, first);

	if (s->used)
		TRAINER_CHECK(status, cudaEventSynchronize(s->copied), out);
	if (d->pending && (status = trainer_worker_verify(w, d)))
		goto out;
	d->augmented = trainer_augmenting(t);
	for (size_t j = 0; j < count; j++) {
		size_t sample = t->order[first + j];

		memcpy(s->data + j * t->shape.row, t->data + sample * t->shape.row, t->shape.row);
		if (t->mask_row)
			memcpy(s->masks + j * t->mask_row,
			       t->masks + sample * t->mask_row, t->mask_row);
		memcpy(s->labels + j * TRAINER_LABEL,
		       t->labels + sample * TRAINER_LABEL, TRAINER_LABEL);
		if (!d->augmented)
			continue;
		trainer_perturb(&w->rng, s->data + j * t->shape.row, t->shape.row);
		if (t->mask_row)
			trainer_perturb(&w->rng, s->masks + j * t->mask_row,
					t->mask_row);
	}
	if (d->augmented) {
		memcpy(d->expect_data, s->data, count * t->shape.row);
		if (t->mask_row)
			memcpy(d->expect_masks, s->masks, count * t->mask_row);
	}
	if (t->hostfn && !t->sync)
		TRAINER_CHECK(status, cudaLaunchHostFunc(stream, trainer_nothing, NULL), out);
	status = trainer_upload(t, d->data, s->data, t->shape.row, count, stream,
				"batch data");
	if (status)
		goto out;
	if (t->mask_row) {
		status = trainer_upload(t, d->masks, s->masks, t->mask_row, count,
					stream, "batch masks");
		if (status)
			goto out;
	}
	status = trainer_upload(t, d->labels, s->labels, TRAINER_LABEL, count,
				stream, "batch labels");
	if (status)
		goto out;
	TRAINER_CHECK(status, cudaEventRecord(s->copied, stream), out);
	s->used = 1;
	d->stream = stream;
	d->batch = batch;
	d->count = count;
	d->pending = 1;
	w->sequence++;
	w->rows += count;
	w->bytes += count * (t->shape.row + t->mask_row + TRAINER_LABEL);
	w->copies += t->mask_row ? 3 : 2;
out:
	return status;
}

/*
 * Runs the worker's share of one epoch (batches index, index + workers, ...)
 * and verifies every batch it uploaded before returning.
 */
static enum trainer_status trainer_worker_epoch(struct trainer_worker *w)
{
	struct trainer *t = w->trainer;
	enum trainer_status status = TRAINER_OK;
	unsigned ring = 2 * t->shape.ring;

	for (size_t b = w->index; b < t->nbatches; b += t->nworkers) {
		if (atomic_load(&t->stop))
			goto out;
		if ((status = trainer_worker_batch(w, b)))
			goto out;
	}
	for (unsigned i = 0; i < ring; i++) {
		struct trainer_devslot *d = &w->devslots[(w->sequence + i) % ring];

		if (d->pending && (status = trainer_worker_verify(w, d)))
			goto out;
	}
out:
	if (status)
		atomic_store(&t->stop, 1);
	w->status = status;
	return status;
}

/* Thread body for --stream threads: binds the device, runs the epoch. */
static void *trainer_worker_thread(void *arg)
{
	struct trainer_worker *w = arg;

	w->status = trainer_cuda(cudaSetDevice(w->trainer->device),
				 "cudaSetDevice (worker thread)");
	if (w->status)
		atomic_store(&w->trainer->stop, 1);
	else
		trainer_worker_epoch(w);
	return NULL;
}

/*
 * Allocates t->alloc_bytes of device memory with the chosen API, fills it
 * with a byte pattern (cudaMemset: no host-to-device bytes, so the copy
 * counters stay exact) and reads back its first, middle and last KiB.
 */
static enum trainer_status trainer_alloc_mid(struct trainer *t)
{
	enum trainer_status status = TRAINER_OK;
	const unsigned char pattern = 0xa5;
	unsigned char probe[1024];
	size_t n = t->alloc_bytes, span = n;
	size_t width, height, pitch;
	CUdeviceptr dptr;

	switch (t->alloc_api) {
	case TRAINER_ALLOC_MALLOC:
		TRAINER_CHECK(status, cudaMalloc(&t->alloc_ptr, n), out);
		break;
	case TRAINER_ALLOC_ASYNC:
		TRAINER_CHECK(status, cudaMallocAsync(&t->alloc_ptr, n, 0), out);
		TRAINER_CHECK(status, cudaStreamSynchronize(0), out);
		break;
	case TRAINER_ALLOC_MANAGED:
		TRAINER_CHECK(status, cudaMallocManaged(&t->alloc_ptr, n,
				cudaMemAttachGlobal), out);
		break;
	case TRAINER_ALLOC_PITCH:
		width = n < (1u << 20) ? n : (1u << 20);
		height = (n + width - 1) / width;
		TRAINER_CHECK(status, cudaMallocPitch(&t->alloc_ptr, &pitch,
				width, height), out);
		span = pitch * height;
		break;
	case TRAINER_ALLOC_DRIVER:
		TRAINER_CU_CHECK(status, cuMemAlloc(&dptr, n), out);
		t->alloc_ptr = (void *)(uintptr_t)dptr;
		break;
	case TRAINER_ALLOC_VMM:
		status = trainer_vmm_alloc(t, &t->alloc_vmm, n, 1);
		if (status)
			goto out;
		t->alloc_ptr = (void *)(uintptr_t)t->alloc_vmm.base;
		break;
	}
	TRAINER_CHECK(status, cudaMemset(t->alloc_ptr, pattern, span), out);
	for (int i = 0; i < 3; i++) {
		size_t k = span < sizeof(probe) ? span : sizeof(probe);
		size_t at = i == 0 ? 0 : i == 1 ? (span - k) / 2 : span - k;

		memset(probe, 0, sizeof(probe));
		TRAINER_CHECK(status, cudaMemcpy(probe,
				(unsigned char *)t->alloc_ptr + at, k,
				cudaMemcpyDeviceToHost), out);
		for (size_t x = 0; x < k; x++) {
			if (probe[x] == pattern)
				continue;
			fprintf(stderr, "trainer: MISMATCH in --alloc-mid memory at "
				"byte %zu: expected 0x%02x got 0x%02x\n", at + x,
				pattern, probe[x]);
			status = TRAINER_MISMATCH;
			goto out;
		}
	}
	if (!t->shape.quiet)
		printf("alloc-mid epoch %u bytes %zu ok\n", t->epoch, n);
out:
	return status;
}

/* Frees the --alloc-mid memory, if any, with the matching API. */
static void trainer_alloc_mid_release(struct trainer *t)
{
	trainer_vmm_release(&t->alloc_vmm);
	if (!t->alloc_ptr || t->alloc_api == TRAINER_ALLOC_VMM) {
		t->alloc_ptr = NULL;
		return;
	}
	if (t->alloc_api == TRAINER_ALLOC_DRIVER) {
		cuMemFree((CUdeviceptr)(uintptr_t)t->alloc_ptr);
	} else if (t->alloc_api == TRAINER_ALLOC_ASYNC) {
		cudaFreeAsync(t->alloc_ptr, 0);
		cudaStreamSynchronize(0);
	} else {
		cudaFree(t->alloc_ptr);
	}
	t->alloc_ptr = NULL;
}

/*
 * Runs one epoch: the --alloc-mid allocation when it is due, a reshuffle,
 * the workers (inline, or one host thread each), then the epoch line.
 */
static enum trainer_status trainer_epoch(struct trainer *t)
{
	enum trainer_status status = TRAINER_OK;
	unsigned long long rows = 0, bytes = 0, copies = 0, device_before, d2d_before;
	pthread_t *threads = NULL;
	unsigned started = 0;
	double start;

	if (t->alloc_bytes && t->epoch == t->alloc_epoch &&
	    (status = trainer_alloc_mid(t)))
		goto out;
	loader_rng_shuffle(&t->rng, t->order, t->shape.samples);
	for (unsigned i = 0; i < t->nworkers; i++)
		t->workers[i].status = TRAINER_OK;
	device_before = loader_counter_h2d(t->counter);
	d2d_before = t->counter ? t->counter("d2d_ns") : 0;
	start = trainer_now();
	if (t->mode == TRAINER_STREAM_THREADS) {
		threads = calloc(t->nworkers, sizeof(*threads));
		if (!threads) {
			status = trainer_no_memory("threads");
			goto out;
		}
		for (; started < t->nworkers; started++) {
			if (pthread_create(&threads[started], NULL,
					   trainer_worker_thread,
					   &t->workers[started])) {
				fprintf(stderr, "trainer: pthread_create failed\n");
				atomic_store(&t->stop, 1);
				status = TRAINER_CUDA;
				break;
			}
		}
		for (unsigned i = 0; i < started; i++)
			pthread_join(threads[i], NULL);
	} else {
		trainer_worker_epoch(&t->workers[0]);
	}
	for (unsigned i = 0; i < t->nworkers; i++) {
		struct trainer_worker *w = &t->workers[i];

		if (!status)
			status = w->status;
		rows += w->rows;
		bytes += w->bytes;
		copies += w->copies;
		w->rows = w->bytes = w->copies = 0;
	}
	if (status)
		goto out;
	t->rows += rows;
	t->bytes += bytes;
	t->copies += copies;
	if (!t->shape.quiet) {
		double seconds = trainer_now() - start;
		unsigned long long h2d = loader_counter_h2d(t->counter) - device_before;

		int timed = t->device_time && t->counter;
		unsigned long long d2d = timed ? t->counter("d2d_ns") - d2d_before : 0;

		loader_print_epoch(t->epoch, rows, bytes, &seconds, t->counter ? &h2d : NULL,
				   timed ? &d2d : NULL);
	}
out:
	free(threads);
	return status;
}

/*
 * Takes the driver's cuMemcpyHtoDAsync at run time for driver-getproc
 * (cuGetProcAddress_v2) and driver-entrypoint
 * (cudaGetDriverEntryPointByVersion), asking for the per-thread entry
 * point with --stream ptds and the legacy one otherwise.
 */
static enum trainer_status trainer_resolve_copy(struct trainer *t)
{
	enum trainer_status status = TRAINER_OK;
	int per_thread = t->mode == TRAINER_STREAM_PTDS;
	CUdriverProcAddressQueryResult cu_found = CU_GET_PROC_ADDRESS_SUCCESS;
	enum cudaDriverEntryPointQueryResult rt_found = cudaDriverEntryPointSuccess;
	void *fn = NULL;

	if (t->copy_api == TRAINER_COPY_GETPROC) {
		TRAINER_CU_CHECK(status, cuGetProcAddress("cuMemcpyHtoDAsync", &fn,
				CUDA_VERSION, per_thread ?
				CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM :
				CU_GET_PROC_ADDRESS_LEGACY_STREAM, &cu_found), out);
	} else if (t->copy_api == TRAINER_COPY_ENTRYPOINT) {
		TRAINER_CHECK(status, cudaGetDriverEntryPointByVersion(
				"cuMemcpyHtoDAsync", &fn, CUDA_VERSION, per_thread ?
				cudaEnablePerThreadDefaultStream :
				cudaEnableLegacyStream, &rt_found), out);
	} else {
		goto out;
	}
	if (!fn || cu_found != CU_GET_PROC_ADDRESS_SUCCESS ||
	    rt_found != cudaDriverEntryPointSuccess) {
		fprintf(stderr, "trainer: cuMemcpyHtoDAsync not found (status %d, %d)\n",
			(int)cu_found, (int)rt_found);
		status = TRAINER_CUDA;
		goto out;
	}
	memcpy(&t->htod, &fn, sizeof(fn));
out:
	return status;
}

/* Sets up the device, the dataset and the workers for the run. */
static enum trainer_status trainer_init(struct trainer *t)
{
	enum trainer_status status;

	t->counter = loader_counter_find(NULL);
	TRAINER_CHECK(status, cudaSetDevice(t->device), out);
	if ((status = trainer_resolve_copy(t)))
		goto out;
	if ((status = trainer_dataset_init(t)))
		goto out;
	t->nworkers = t->mode == TRAINER_STREAM_THREADS ? t->nthreads : 1;
	t->workers = calloc(t->nworkers, sizeof(*t->workers));
	if (!t->workers) {
		status = trainer_no_memory("workers");
		goto out;
	}
	for (unsigned i = 0; i < t->nworkers; i++)
		if ((status = trainer_worker_init(&t->workers[i], t, i)))
			goto out;
out:
	return status;
}

/* Frees what trainer_init and the epochs made, after the device is idle. */
static void trainer_release(struct trainer *t)
{
	cudaDeviceSynchronize();
	if (t->workers) {
		for (unsigned i = 0; i < t->nworkers; i++)
			trainer_worker_release(&t->workers[i]);
		free(t->workers);
		t->workers = NULL;
	}
	trainer_alloc_mid_release(t);
	trainer_dataset_release(t);
}

int main(int argc, char **argv)
{
	static struct trainer t;
	int status;

	status = trainer_parse_args(&t, argc, argv);
	if (status < 0) {
		status = TRAINER_OK;
		goto out;
	}
	if (status)
		goto out;
	t.device_h2d = 0;
	if ((status = trainer_init(&t)))
		goto out_release;
	for (t.epoch = 1; t.epoch <= t.shape.epochs; t.epoch++) {
		unsigned long long before = loader_counter_h2d(t.counter);

		if ((status = trainer_epoch(&t)))
			goto out_release;
		t.device_h2d += loader_counter_h2d(t.counter) - before;
	}
	loader_print_total(t.rows, t.bytes, t.copies,
			   t.counter ? &t.device_h2d : NULL);
out_release:
	trainer_release(&t);
	if (status == TRAINER_MISMATCH)
		printf("verification FAILED\n");
out:
	fflush(stdout);
	return status;
}
