/*
 * drvloader: a data loader that reaches the CUDA driver the way a program
 * with a statically linked runtime does (nvcc's default): it is linked with
 * neither libcudart nor libcuda, opens libcuda.so.1 with dlopen, takes
 * cuGetProcAddress_v2 (or, with --legacy-getproc, the CUDA 11 4-argument
 * cuGetProcAddress) with dlsym on that handle, and every other entry point
 * through it. A preloaded library sees none of its calls unless it hooks
 * that route.
 *
 * Same shape as the trainer: a seeded dataset of N random rows of R bytes,
 * a reshuffle per epoch, batches of B rows assembled into a staging ring
 * (cuMemHostAlloc memory, or malloc with --pageable), ONE host-to-device
 * copy per batch (cuMemcpyHtoDAsync) into a ring of device buffers twice as
 * deep, and every batch read back (cuMemcpyDtoHAsync on the same stream)
 * and compared byte by byte before its device buffer is reused. A staging
 * slot is refilled only after the event recorded behind its copy has
 * completed.
 *
 * With --threads N, N threads share each epoch's batches, each with its own
 * stream and rings; they are released together by a barrier and make their
 * first calls (dlsym, every lookup, cuInit, the context) at once.
 *
 * Exit status: 0 every byte verified, 1 a mismatch, 2 a bad option,
 * 3 a CUDA error (the call and the error's name are printed).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/loader.h"

/* What a run can end with; the values are the process exit statuses. */
enum drv_status {
	DRV_OK = 0,
	DRV_MISMATCH = 1,
	DRV_USAGE = 2,
	DRV_CUDA = 3,
};

/* The two lookup functions a driver exports. */
typedef CUresult drv_getproc_fn(const char *symbol, void **pfn, int version,
				cuuint64_t flags,
				CUdriverProcAddressQueryResult *status);
typedef CUresult drv_getproc_legacy_fn(const char *symbol, void **pfn,
				       int version, cuuint64_t flags);

/*
 * The entry points the loader uses, all taken through the lookup function:
 * X(field, base name, type of the versioned function it returns).
 */
#define DRV_ENTRIES(X)                                                        \
	X(init, "cuInit", cuInit)                                            \
	X(device_get, "cuDeviceGet", cuDeviceGet)                            \
	X(ctx_retain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain)  \
	X(ctx_release, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2) \
	X(ctx_set, "cuCtxSetCurrent", cuCtxSetCurrent)                       \
	X(mem_alloc, "cuMemAlloc", cuMemAlloc_v2)                            \
	X(mem_free, "cuMemFree", cuMemFree_v2)                               \
	X(host_alloc, "cuMemHostAlloc", cuMemHostAlloc)                      \
	X(host_free, "cuMemFreeHost", cuMemFreeHost)                         \
	X(stream_create, "cuStreamCreate", cuStreamCreate)                   \
	X(stream_destroy, "cuStreamDestroy", cuStreamDestroy_v2)             \
	X(stream_sync, "cuStreamSynchronize", cuStreamSynchronize)           \
	X(event_create, "cuEventCreate", cuEventCreate)                      \
	X(event_destroy, "cuEventDestroy", cuEventDestroy_v2)                \
	X(event_record, "cuEventRecord", cuEventRecord)                      \
	X(event_sync, "cuEventSynchronize", cuEventSynchronize)              \
	X(htod, "cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2)                   \
	X(dtoh, "cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2)                   \
	X(error_name, "cuGetErrorName", cuGetErrorName)

#define DRV_FIELD(field, name, fn) __typeof__(fn) *field;
struct drv_api {
	DRV_ENTRIES(DRV_FIELD)
};
#undef DRV_FIELD

/* Options of the run: those of every loader, then the driver's own. */
struct drv_options {
	struct loader_shape shape;
	unsigned threads;
	int version;
	int per_thread;
	int legacy_getproc;
	int before_init;
	int default_stream;
};

struct drv_loader;

/* One thread's share of the work: its entry points, stream and rings. */
struct drv_worker {
	struct drv_loader *l;
	unsigned index;
	pthread_t thread;
	struct drv_api api;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	unsigned char **staging;
	CUevent *copied;
	int *used;
	CUdeviceptr *devbuf;
	size_t *dev_batch;
	size_t *dev_count;
	int *pending;
	unsigned char *check;
	size_t sequence;
	unsigned long long rows;
	unsigned long long copies;
	enum drv_status status;
};

/* The whole run. */
struct drv_loader {
	struct drv_options o;
	void *handle;
	loader_counter_fn *counter;
	unsigned char *data;
	size_t *order;
	size_t nbatches;
	uint64_t rng;
	unsigned epoch;
	struct drv_worker *workers;
	pthread_barrier_t barrier;
	atomic_int failed;
	atomic_int corrupted;
	unsigned long long epoch_h2d_before;
	unsigned long long device_h2d;
	unsigned long long rows;
	unsigned long long copies;
};

static const char drv_usage_line[] =
	"usage: drvloader [--samples N] [--row R] [--batch B] [--epochs E]\n"
	"                 [--seed S] [--ring D] [--threads N] [--pinned|--pageable]\n"
	"                 [--per-thread] [--legacy-getproc] [--resolve-before-init]\n"
	"                 [--version V] [--stream created|default] [--quiet] [--help]\n";

static const char drv_help_text[] =
	"\n"
	"A data loader that reaches the driver only through dlopen(\"libcuda.so.1\")\n"
	"and the entry points cuGetProcAddress_v2 hands out (a statically linked\n"
	"runtime's route): per epoch a seeded reshuffle, one cuMemcpyHtoDAsync per\n"
	"batch, every byte read back and verified.\n"
	"\n"
	"  --samples N            rows in the dataset (1000)\n"
	"  --row R                bytes per row (3072)\n"
	"  --batch B              rows per batch (64)\n"
	"  --epochs E             epochs (3)\n"
	"  --seed S               seed of the dataset and the shuffles (1)\n"
	"  --ring D               staging ring depth per thread (4); device ring 2*D\n"
	"  --threads N            N threads share each epoch, and make their first\n"
	"                         calls at once (1)\n"
	"  --pinned               staging in cuMemHostAlloc memory (default)\n"
	"  --pageable             staging in malloc memory\n"
	"  --per-thread           entry points taken with\n"
	"                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM\n"
	"                         (else CU_GET_PROC_ADDRESS_LEGACY_STREAM)\n"
	"  --legacy-getproc       the CUDA 11 cuGetProcAddress (4 arguments)\n"
	"  --resolve-before-init  take every entry point before cuInit\n"
	"  --version V            the cudaVersion passed to the lookups (13000)\n"
	"  --stream S             created (cuStreamCreate per thread, default) or\n"
	"                         default (stream 0: the legacy stream, or the\n"
	"                         per-thread one with --per-thread)\n"
	"  --quiet                no dataset and epoch lines\n"
	"\n"
	"stdout: 'epoch E rows R bytes B [device_h2d D]' per epoch, then\n"
	"'total rows R bytes B copies C [device_h2d D]' and 'verified OK'.\n"
	"Exit: 0 verified, 1 mismatch, 2 bad option, 3 CUDA error.\n";

/*
 * Reports a failed driver call on stderr (with its name when cuGetErrorName
 * was found). Returns DRV_OK when err is CUDA_SUCCESS, else DRV_CUDA.
 */
static enum drv_status drv_check(const struct drv_worker *w, CUresult err,
				 const char *call)
{
	const char *name = NULL;

	if (err == CUDA_SUCCESS)
		return DRV_OK;
	if (!w->api.error_name || w->api.error_name(err, &name) != CUDA_SUCCESS || !name)
		name = "?";
	fprintf(stderr, "drvloader: thread %u: %s failed: %s (%d)\n", w->index,
		call, name, (int)err);
	return DRV_CUDA;
}

/* Evaluates a driver call; on failure reports it and jumps to label. */
#define DRV_CHECK(w, status, call, label)                                    \
	do {                                                                 \
		if (((status) = drv_check((w), (call), #call)) != DRV_OK)   \
			goto label;                                          \
	} while (0)

/* Looks one base name up through the lookup function the run uses. */
static CUresult drv_lookup(struct drv_worker *w, void *getproc,
			   const char *name, void **out)
{
	const struct drv_options *o = &w->l->o;
	cuuint64_t flags = o->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM :
					   CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
	drv_getproc_legacy_fn *legacy;
	drv_getproc_fn *current;
	CUresult err;

	*out = NULL;
	if (o->legacy_getproc) {
		memcpy(&legacy, &getproc, sizeof(getproc));
		err = legacy(name, out, o->version, flags);
	} else {
		memcpy(&current, &getproc, sizeof(getproc));
		err = current(name, out, o->version, flags, &found);
	}
	if (err == CUDA_SUCCESS && (found != CU_GET_PROC_ADDRESS_SUCCESS || !*out)) {
		fprintf(stderr, "drvloader: %s: lookup status %d, pointer %p\n", name,
			(int)found, *out);
		err = CUDA_ERROR_NOT_FOUND;
	}
	return err;
}

/*
 * Takes cuGetProcAddress[_v2] from the library handle with dlsym, then the
 * entry points: every one before cuInit with --resolve-before-init, else
 * cuInit first, calling it, then the others. Binds the device's primary
 * context to the calling thread.
 */
static enum drv_status drv_worker_resolve(struct drv_worker *w)
{
	const char *gpa_name = w->l->o.legacy_getproc ? "cuGetProcAddress" :
							"cuGetProcAddress_v2";
	enum drv_status status = DRV_OK;
	void *getproc = dlsym(w->l->handle, gpa_name);
	void *fn;

#define DRV_NAME(field, name, type) name,
	static const char *const names[] = { DRV_ENTRIES(DRV_NAME) };
#undef DRV_NAME
	void **fields[] = {
#define DRV_SLOT(field, name, type) (void **)&w->api.field,
		DRV_ENTRIES(DRV_SLOT)
#undef DRV_SLOT
	};

	if (!getproc) {
		fprintf(stderr, "drvloader: dlsym(libcuda.so.1, %s): %s\n", gpa_name,
			dlerror());
		status = DRV_CUDA;
		goto out;
	}
	if (!w->l->o.before_init) {
		DRV_CHECK(w, status, drv_lookup(w, getproc, "cuInit", &fn), out);
		memcpy(&w->api.init, &fn, sizeof(fn));
		DRV_CHECK(w, status, w->api.init(0), out);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char call[96];

		snprintf(call, sizeof(call), "%s(%s)", gpa_name, names[i]);
		if ((status = drv_check(w, drv_lookup(w, getproc, names[i], &fn), call)))
			goto out;
		memcpy(fields[i], &fn, sizeof(fn));
	}
	if (w->l->o.before_init)
		DRV_CHECK(w, status, w->api.init(0), out);
	DRV_CHECK(w, status, w->api.device_get(&w->dev, 0), out);
	DRV_CHECK(w, status, w->api.ctx_retain(&w->ctx, w->dev), out);
	DRV_CHECK(w, status, w->api.ctx_set(w->ctx), out);
out:
	return status;
}

/* Allocates the worker's stream, staging ring, device ring and readback buffer. */
static enum drv_status drv_worker_init(struct drv_worker *w)
{
	const struct drv_options *o = &w->l->o;
	size_t bytes = o->shape.batch * o->shape.row;
	enum drv_status status = DRV_OK;

	w->staging = calloc(o->shape.ring, sizeof(*w->staging));
	w->copied = calloc(o->shape.ring, sizeof(*w->copied));
	w->used = calloc(o->shape.ring, sizeof(*w->used));
	w->devbuf = calloc(2 * (size_t)o->shape.ring, sizeof(*w->devbuf));
	w->dev_batch = calloc(2 * (size_t)o->shape.ring, sizeof(*w->dev_batch));
	w->dev_count = calloc(2 * (size_t)o->shape.ring, sizeof(*w->dev_count));
	w->pending = calloc(2 * (size_t)o->shape.ring, sizeof(*w->pending));
	if (!w->staging || !w->copied || !w->used || !w->devbuf ||
	    !w->dev_batch || !w->dev_count || !w->pending) {
		fprintf(stderr, "drvloader: out of host memory\n");
		status = DRV_CUDA;
		goto out;
	}
	if (!o->default_stream)
		DRV_CHECK(w, status, w->api.stream_create(&w->stream, CU_STREAM_DEFAULT), out);
	for (unsigned i = 0; i < o->shape.ring; i++) {
		if (o->shape.pinned) {
			DRV_CHECK(w, status, w->api.host_alloc((void **)&w->staging[i],
					bytes, 0), out);
		} else if (!(w->staging[i] = malloc(bytes))) {
			fprintf(stderr, "drvloader: out of host memory\n");
			status = DRV_CUDA;
			goto out;
		}
		DRV_CHECK(w, status, w->api.event_create(&w->copied[i],
				CU_EVENT_DISABLE_TIMING), out);
	}
	for (unsigned i = 0; i < 2 * o->shape.ring; i++)
		DRV_CHECK(w, status, w->api.mem_alloc(&w->devbuf[i], bytes), out);
	if (o->shape.pinned)
		DRV_CHECK(w, status, w->api.host_alloc((void **)&w->check, bytes, 0), out);
	else if (!(w->check = malloc(bytes))) {
		fprintf(stderr, "drvloader: out of host memory\n");
		status = DRV_CUDA;
	}
out:
	return status;
}

/* Frees what drv_worker_init made, after the worker's stream is idle. */
static void drv_worker_release(struct drv_worker *w)
{
	const struct loader_shape *shape = &w->l->o.shape;

	if (!w->ctx)
		goto out;
	w->api.stream_sync(w->stream);
	for (unsigned i = 0; w->staging && i < shape->ring; i++) {
		if (w->staging[i])
			shape->pinned ? (void)w->api.host_free(w->staging[i]) : free(w->staging[i]);
		if (w->copied[i])
			w->api.event_destroy(w->copied[i]);
	}
	for (unsigned i = 0; w->devbuf && i < 2 * shape->ring; i++)
		if (w->devbuf[i])
			w->api.mem_free(w->devbuf[i]);
	if (w->check)
		shape->pinned ? (void)w->api.host_free(w->check) : free(w->check);
	if (w->stream)
		w->api.stream_destroy(w->stream);
	if (w->ctx)
		w->api.ctx_release(w->dev);
out:
	free(w->staging);
	free(w->copied);
	free(w->used);
	free(w->devbuf);
	free(w->dev_batch);
	free(w->dev_count);
	free(w->pending);
	w->staging = NULL;
	w->copied = NULL;
	w->used = NULL;
	w->devbuf = NULL;
	w->dev_batch = NULL;
	w->dev_count = NULL;
	w->pending = NULL;
	w->check = NULL;
}

/*
 * Reads device slot i back on the worker's stream, waits for it and
 * compares every byte with the rows the epoch's order put there.
 */
static enum drv_status drv_worker_verify(struct drv_worker *w, unsigned i)
{
	struct drv_loader *l = w->l;
	const struct loader_shape *s = &l->o.shape;
	const struct loader_batch batch = {
		.prog = "drvloader", .epoch = l->epoch, .index = w->dev_batch[i],
		.order = l->order + w->dev_batch[i] * s->batch,
		.count = w->dev_count[i],
	};
	enum drv_status status;

	w->pending[i] = 0;
	DRV_CHECK(w, status, w->api.dtoh(w->check, w->devbuf[i],
			w->dev_count[i] * s->row, w->stream), out);
	DRV_CHECK(w, status, w->api.stream_sync(w->stream), out);
	if (s->corrupt_check)
		loader_corrupt_once(&l->corrupted, w->check, w->dev_count[i] * s->row);
	if (loader_batch_differs(&batch, w->check, l->data, NULL, s->row))
		status = DRV_MISMATCH;
out:
	return status;
}

/*
 * Uploads batch b: waits for the staging slot's previous copy, verifies
 * the batch the device slot still holds, assembles the rows, issues the
 * copy and records the slot's event behind it.
 */
static enum drv_status drv_worker_batch(struct drv_worker *w, size_t b)
{
	struct drv_loader *l = w->l;
	const struct loader_shape *shape = &l->o.shape;
	unsigned s = (unsigned)(w->sequence % shape->ring);
	unsigned d = (unsigned)(w->sequence % (2 * shape->ring));
	size_t first = b * shape->batch;
	size_t count = loader_shape_batch_rows(shape, first);
	enum drv_status status = DRV_OK;

	if (w->used[s])
		DRV_CHECK(w, status, w->api.event_sync(w->copied[s]), out);
	if (w->pending[d] && (status = drv_worker_verify(w, d)))
		goto out;
	for (size_t j = 0; j < count; j++)
		memcpy(w->staging[s] + j * shape->row,
		       l->data + l->order[first + j] * shape->row, shape->row);
	DRV_CHECK(w, status, w->api.htod(w->devbuf[d], w->staging[s],
			count * shape->row, w->stream), out);
	DRV_CHECK(w, status, w->api.event_record(w->copied[s], w->stream), out);
	w->used[s] = 1;
	w->dev_batch[d] = b;
	w->dev_count[d] = count;
	w->pending[d] = 1;
	w->sequence++;
	w->rows += count;
	w->copies++;
out:
	return status;
}

/* Runs the worker's share of the current epoch and verifies all of it. */
static enum drv_status drv_worker_epoch(struct drv_worker *w)
{
	struct drv_loader *l = w->l;
	unsigned ring = 2 * l->o.shape.ring;
	enum drv_status status = DRV_OK;

	for (size_t b = w->index; b < l->nbatches; b += l->o.threads) {
		if (atomic_load(&l->failed))
			goto out;
		if ((status = drv_worker_batch(w, b)))
			goto out;
	}
	for (unsigned i = 0; i < ring; i++) {
		unsigned d = (unsigned)((w->sequence + i) % ring);

		if (w->pending[d] && (status = drv_worker_verify(w, d)))
			goto out;
	}
out:
	return status;
}

/*
 * Between two barriers, one thread (the barrier's serial one) does what
 * belongs to the whole run: the epoch line of the finished epoch, then the
 * next epoch's shuffle.
 */
static void drv_between_epochs(struct drv_loader *l, unsigned done)
{
	if (done) {
		unsigned long long rows = 0, copies = 0;
		unsigned long long h2d = loader_counter_h2d(l->counter) - l->epoch_h2d_before;

		for (unsigned i = 0; i < l->o.threads; i++) {
			rows += l->workers[i].rows;
			copies += l->workers[i].copies;
			l->workers[i].rows = l->workers[i].copies = 0;
		}
		l->rows += rows;
		l->copies += copies;
		l->device_h2d += h2d;
		if (!l->o.shape.quiet && !atomic_load(&l->failed))
			loader_print_epoch(done, rows, rows * l->o.shape.row, NULL,
					   l->counter ? &h2d : NULL, NULL);
	}
	if (done < l->o.shape.epochs) {
		l->epoch = done + 1;
		loader_rng_shuffle(&l->rng, l->order, l->o.shape.samples);
		l->epoch_h2d_before = loader_counter_h2d(l->counter);
	}
}

/*
 * Waits at the run's barrier with every thread; one of them then closes
 * epoch done (0: none yet) and prepares the next, while the others wait.
 */
static void drv_barrier(struct drv_loader *l, unsigned done)
{
	if (pthread_barrier_wait(&l->barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
		drv_between_epochs(l, done);
	pthread_barrier_wait(&l->barrier);
}

/*
 * A worker thread: released with the others at once, takes its entry
 * points and context, sets up, then runs every epoch between barriers. A
 * failure stops the work of every thread, but each keeps meeting the
 * barriers so that none waits forever.
 */
static void *drv_worker_main(void *arg)
{
	struct drv_worker *w = arg;
	struct drv_loader *l = w->l;

	pthread_barrier_wait(&l->barrier);
	w->status = drv_worker_resolve(w);
	if (!w->status)
		w->status = drv_worker_init(w);
	if (w->status)
		atomic_store(&l->failed, 1);
	drv_barrier(l, 0);
	for (unsigned e = 1; e <= l->o.shape.epochs; e++) {
		if (!atomic_load(&l->failed)) {
			w->status = drv_worker_epoch(w);
			if (w->status)
				atomic_store(&l->failed, 1);
		}
		drv_barrier(l, e);
	}
	drv_worker_release(w);
	return NULL;
}

enum drv_option {
	OPT_THREADS = LOADER_OPT_NEXT, OPT_PER_THREAD, OPT_LEGACY,
	OPT_BEFORE_INIT, OPT_VERSION, OPT_STREAM,
};

static const struct option drv_options_table[] = {
	LOADER_SHAPE_OPTIONS,
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
	{ "legacy-getproc", no_argument, NULL, OPT_LEGACY },
	{ "resolve-before-init", no_argument, NULL, OPT_BEFORE_INIT },
	{ "version", required_argument, NULL, OPT_VERSION },
	{ "stream", required_argument, NULL, OPT_STREAM },
	{ NULL, 0, NULL, 0 },
};

/*
 * Parses one option into the struct drv_options at ctx. Returns 0, or
 * nonzero for a bad value.
 */
static int drv_parse_option(void *ctx, int opt, const char *arg)
{
	static const char *const streams[] = { "created", "default", NULL };
	struct drv_options *o = ctx;
	const struct loader_field fields[] = {
		LOADER_SHAPE_FIELDS(&o->shape),
		LOADER_NUMBER(OPT_THREADS, 1, 256, o->threads),
		LOADER_FLAG(OPT_PER_THREAD, o->per_thread, 1),
		LOADER_FLAG(OPT_LEGACY, o->legacy_getproc, 1),
		LOADER_FLAG(OPT_BEFORE_INIT, o->before_init, 1),
		LOADER_NUMBER(OPT_VERSION, 0, INT32_MAX, o->version),
		LOADER_WORDS(OPT_STREAM, streams, o->default_stream),
	};

	return loader_fields_parse(fields, LOADER_COUNT(fields), opt, arg) != 0;
}

/*
 * Parses the command line into o after setting the defaults. Returns
 * DRV_OK, DRV_USAGE (usage printed on stderr), or -1 after --help.
 */
static int drv_parse_args(struct drv_options *o, int argc, char **argv)
{
	const struct loader_cli cli = {
		.prog = "drvloader", .options = drv_options_table,
		.usage = drv_usage_line, .help = drv_help_text,
		.parse = drv_parse_option, .ctx = o,
	};
	int err;

	loader_shape_defaults(&o->shape);
	o->threads = 1;
	o->version = CUDA_VERSION;
	err = loader_cli_parse(&cli, argc, argv);
	if (err > 0)
		return -1;
	if (err)
		goto usage;
	if (!loader_shape_fits(&o->shape, o->shape.row)) {
		fprintf(stderr, "drvloader: dataset too large\n");
		goto usage;
	}
	return DRV_OK;
usage:
	fputs(drv_usage_line, stderr);
	return DRV_USAGE;
}

/* Generates the dataset and the identity order from the seed. */
static enum drv_status drv_dataset_init(struct drv_loader *l)
{
	const struct drv_options *o = &l->o;
	const struct loader_shape *s = &o->shape;

	l->data = malloc(s->samples * s->row);
	l->order = calloc(s->samples, sizeof(*l->order));
	if (!l->data || !l->order) {
		fprintf(stderr, "drvloader: out of host memory (dataset)\n");
		return DRV_CUDA;
	}
	l->rng = s->seed;
	loader_rng_fill(&l->rng, l->data, s->samples * s->row);
	loader_order_identity(l->order, s->samples);
	l->nbatches = (s->samples + s->batch - 1) / s->batch;
	if (!s->quiet)
		printf("dataset samples %zu row %zu batch %zu batches %zu threads %u\n",
		       s->samples, s->row, s->batch, l->nbatches, o->threads);
	return DRV_OK;
}

int main(int argc, char **argv)
{
	static struct drv_loader l;
	unsigned started = 0;
	int status;

	status = drv_parse_args(&l.o, argc, argv);
	if (status < 0) {
		status = DRV_OK;
		goto out;
	}
	if (status)
		goto out;
	if ((status = drv_dataset_init(&l)))
		goto out_free;
	l.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!l.handle) {
		fprintf(stderr, "drvloader: dlopen(libcuda.so.1): %s\n", dlerror());
		status = DRV_CUDA;
		goto out_free;
	}
	l.counter = loader_counter_find(l.handle);
	l.workers = calloc(l.o.threads, sizeof(*l.workers));
	if (!l.workers || pthread_barrier_init(&l.barrier, NULL, l.o.threads)) {
		fprintf(stderr, "drvloader: out of host memory (threads)\n");
		status = DRV_CUDA;
		goto out_close;
	}
	for (; started < l.o.threads; started++) {
		struct drv_worker *w = &l.workers[started];

		w->l = &l;
		w->index = started;
		if (pthread_create(&w->thread, NULL, drv_worker_main, w)) {
			fprintf(stderr, "drvloader: pthread_create failed\n");
			status = DRV_CUDA;
			break;
		}
	}
	if (started < l.o.threads) {
		/* The barrier counts every thread: the run cannot go on. */
		fflush(stdout);
		_Exit(DRV_CUDA);
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(l.workers[i].thread, NULL);
		if (!status)
			status = l.workers[i].status;
	}
	pthread_barrier_destroy(&l.barrier);
	if (!status) {
		loader_print_total(l.rows, l.rows * l.o.shape.row, l.copies,
				   l.counter ? &l.device_h2d : NULL);
	} else if (status == DRV_MISMATCH) {
		printf("verification FAILED\n");
	}
	free(l.workers);
out_close:
	dlclose(l.handle);
out_free:
	free(l.data);
	free(l.order);
out:
	fflush(stdout);
	return status;
}
