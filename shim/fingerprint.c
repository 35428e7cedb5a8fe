/*
 * fingerprint: keyed XXH3-128 of each row of a host buffer, in parallel for
 * large copies.
 *
 * Keying. Two secrets are drawn once per process from getrandom(2): the row
 * secret keys XXH3-128 of each row; the tree secret keys the top level of
 * rows longer than FP_CHUNK (below). A forked child keeps both, so a process
 * family agrees on fingerprints.
 *
 * Rows longer than FP_CHUNK bytes (whole:MIN layouts make rows of hundreds of
 * MiB) are hashed as a two-level tree: each FP_CHUNK-byte chunk is hashed with
 * the row secret, then the chunk digests followed by the row length (64 bits)
 * are hashed with the tree secret. Whether a row is a tree depends on its
 * length alone, so the serial and parallel paths, and fingerprint_one, agree.
 *
 * Parallelism. A copy of at least FP_PARALLEL_MIN bytes that has two rows or
 * more (or one tree row) is cut into tasks: runs of whole rows (about 8
 * tasks per thread, 64 KiB to 1 MiB each), or single chunks of tree rows. Up to threads-1 workers and
 * the caller take tasks from an atomic counter. One parallel job runs at a
 * time (job_lock); small copies never take a lock. Workers sleep on a
 * condition variable between jobs, block every signal, and are started on
 * the first parallel job; fingerprint_atfork_child forgets them so that a
 * forked child starts its own.
 */
#include "fingerprint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/*
 * On x86-64 built for the baseline (SSE2), also compile XXH3's AVX2 kernels
 * under a target attribute and choose them at run time when the CPU has
 * AVX2: about 2.5 times the SSE2 speed. The hash value does not depend on
 * the kernel (checked once at start).
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define FP_DISPATCH_AVX2 1
#define XXH_X86DISPATCH
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#include <immintrin.h>
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#define FP_SECRET_SIZE 192                 /* XXH3's default secret size */
#define FP_PARALLEL_MIN (1ull << 20)       /* copies below this: caller alone */
#define FP_TASK_MIN (64ull << 10)          /* bytes of whole rows per task: */
#define FP_TASK_MAX (1ull << 20)           /* about 8 tasks per thread, clamped */
#define FP_CHUNK (4ull << 20)              /* tree chunk; longer rows are trees */
#define FP_MAX_THREADS 64
#define FP_DEFAULT_MAX_THREADS 8
#define FP_WORKER_STACK (512u << 10)

/* One parallel fingerprint job; it lives on the caller's stack. */
struct fp_job {
	const unsigned char *src;
	uint64_t row;
	uint64_t nrows;
	struct fp *out;
	uint64_t rows_per_task;            /* row jobs */
	uint64_t nchunks;                  /* tree jobs: chunks per row, else 0 */
	struct fp *digests;                /* tree jobs: nrows * nchunks digests */
	uint64_t ntasks;
	atomic_uint_fast64_t next;         /* next task to take */
};

/* The worker pool: one parallel job at a time, published under lock. */
struct fp_workers {
	pthread_mutex_t lock;
	pthread_cond_t work_cv;            /* a new job or stop */
	pthread_cond_t done_cv;            /* the last worker left the job */
	pthread_t tids[FP_MAX_THREADS];
	unsigned started;                  /* workers running */
	unsigned wanted;                   /* workers asked for at the last start */
	uint64_t generation;               /* bumped for each job */
	uint64_t start_generation;         /* generation when the workers started */
	unsigned active;                   /* workers still on the current job */
	int stop;
	struct fp_job *job;
};

static unsigned char fp_row_secret[FP_SECRET_SIZE];
static unsigned char fp_tree_secret[FP_SECRET_SIZE];
static atomic_int fp_ready;                /* secrets generated */
static int fp_avx2;                        /* use the AVX2 kernels */
static atomic_uint fp_threads;             /* configured count, caller included */

static pthread_mutex_t fp_init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fp_job_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fp_workers fp_pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work_cv = PTHREAD_COND_INITIALIZER,
	.done_cv = PTHREAD_COND_INITIALIZER,
};

/* Returns CLOCK_MONOTONIC in nanoseconds. */
static uint64_t fp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Fills buf with n random bytes from getrandom(2) without blocking; if that
 * fails (too early in boot, or no such call), from /dev/urandom; if both
 * fail, from the clock, pid and an address (weak, but never fatal to the
 * host program).
 */
static void fp_random_bytes(unsigned char *buf, size_t n)
{
	size_t got = 0;
	uint64_t mix[3];
	int fd;

	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, GRND_NONBLOCK);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got == n)
		return;
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		while (got < n) {
			ssize_t r = read(fd, buf + got, n - got);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		close(fd);
	}
	if (got == n)
		return;
	mix[0] = fp_now_ns();
	mix[1] = (uint64_t)getpid();
	mix[2] = (uint64_t)(uintptr_t)&mix;
	for (size_t i = got; i < n; i++)
		buf[i] = (unsigned char)(XXH3_64bits_withSeed(mix, sizeof(mix), i) >> 24);
}

/* Derives both secrets from seed material of len bytes. */
static void fp_secrets_from(const unsigned char *material, size_t len)
{
	XXH3_generateSecret(fp_row_secret, sizeof(fp_row_secret), material, len / 2);
	XXH3_generateSecret(fp_tree_secret, sizeof(fp_tree_secret),
			    material + len / 2, len - len / 2);
}

/* Returns the default thread count: online CPUs, at most 8. */
static unsigned fp_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	if (n > FP_DEFAULT_MAX_THREADS)
		n = FP_DEFAULT_MAX_THREADS;
	return (unsigned)n;
}

/* Stores an XXH128 digest as a struct fp. */
static struct fp fp_from_xxh(XXH128_hash_t h)
{
	struct fp f = { .lo = h.low64, .hi = h.high64 };

	return f;
}

#ifdef FP_DISPATCH_AVX2
/* XXH3-128's long-input loop (over 240 bytes) with the AVX2 kernels. */
static XXH_TARGET_AVX2 XXH128_hash_t fp_long_avx2(const void *XXH_RESTRICT p, size_t len,
						  XXH64_hash_t seed,
						  const void *XXH_RESTRICT secret,
						  size_t secret_len)
{
	(void)seed;
	return XXH3_hashLong_128b_internal(p, len, secret, secret_len,
					   XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}
#endif

/* XXH3-128 of p with secret, with the kernels chosen at start. */
static XXH128_hash_t fp_xxh128(const void *p, size_t len, const unsigned char *secret)
{
#ifdef FP_DISPATCH_AVX2
	if (fp_avx2)
		return XXH3_128bits_internal(p, len, 0, secret, FP_SECRET_SIZE, fp_long_avx2);
#endif
	return XXH3_128bits_withSecret(p, len, secret, FP_SECRET_SIZE);
}

/*
 * Chooses the AVX2 kernels when the CPU has them and they agree with the
 * baseline on a test input. Called under fp_init_lock with the secrets set.
 */
static void fp_pick_kernels(void)
{
#ifdef FP_DISPATCH_AVX2
	unsigned char probe[4096];
	XXH128_hash_t a, b;

	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2"))
		return;
	for (size_t i = 0; i < sizeof(probe); i++)
		probe[i] = (unsigned char)(i * 131 + (i >> 8));
	a = XXH3_128bits_withSecret(probe, sizeof(probe), fp_row_secret, FP_SECRET_SIZE);
	b = XXH3_128bits_internal(probe, sizeof(probe), 0, fp_row_secret, FP_SECRET_SIZE,
				  fp_long_avx2);
	fp_avx2 = XXH128_isEqual(a, b);
#endif
}

/* Hashes one chunk of a tree row, or one whole short row, with the row secret. */
static struct fp fp_hash_flat(const unsigned char *p, uint64_t len)
{
	return fp_from_xxh(fp_xxh128(p, (size_t)len, fp_row_secret));
}

/* Generates the process secrets once; safe to call from any thread. */
static void fp_ensure_secret(void)
{
	unsigned char material[64];

	if (atomic_load_explicit(&fp_ready, memory_order_acquire))
		return;
	pthread_mutex_lock(&fp_init_lock);
	if (!atomic_load_explicit(&fp_ready, memory_order_relaxed)) {
		fp_random_bytes(material, sizeof(material));
		fp_secrets_from(material, sizeof(material));
		fp_pick_kernels();
		atomic_store_explicit(&fp_ready, 1, memory_order_release);
	}
	pthread_mutex_unlock(&fp_init_lock);
}

/* Number of FP_CHUNK chunks of a tree row of len bytes. */
static uint64_t fp_chunks(uint64_t len)
{
	return (len + FP_CHUNK - 1) / FP_CHUNK;
}

/* The top level of a tree row: its chunk digests, then its length. */
static struct fp fp_tree_top(const struct fp *digests, uint64_t nchunks, uint64_t len)
{
	XXH3_state_t st;

	XXH3_128bits_reset_withSecret(&st, fp_tree_secret, sizeof(fp_tree_secret));
	XXH3_128bits_update(&st, digests, (size_t)(nchunks * sizeof(*digests)));
	XXH3_128bits_update(&st, &len, sizeof(len));
	return fp_from_xxh(XXH3_128bits_digest(&st));
}

/* Fingerprints one row on the calling thread (tree rows chunk by chunk). */
static struct fp fp_hash_row(const unsigned char *p, uint64_t len)
{
	XXH3_state_t st;

	if (len <= FP_CHUNK)
		return fp_hash_flat(p, len);
	XXH3_128bits_reset_withSecret(&st, fp_tree_secret, sizeof(fp_tree_secret));
	for (uint64_t off = 0; off < len; off += FP_CHUNK) {
		uint64_t n = len - off < FP_CHUNK ? len - off : FP_CHUNK;
		struct fp d = fp_hash_flat(p + off, n);

		XXH3_128bits_update(&st, &d, sizeof(d));
	}
	XXH3_128bits_update(&st, &len, sizeof(len));
	return fp_from_xxh(XXH3_128bits_digest(&st));
}

/* Runs task t of job: a run of whole rows, or one chunk of a tree row. */
static void fp_job_task(struct fp_job *job, uint64_t t)
{
	if (job->nchunks) {
		uint64_t r = t / job->nchunks, c = t % job->nchunks;
		uint64_t off = c * FP_CHUNK;
		uint64_t n = job->row - off < FP_CHUNK ? job->row - off : FP_CHUNK;

		job->digests[t] = fp_hash_flat(job->src + r * job->row + off, n);
		return;
	}
	uint64_t first = t * job->rows_per_task;
	uint64_t last = first + job->rows_per_task;

	if (last > job->nrows)
		last = job->nrows;
	for (uint64_t r = first; r < last; r++)
		job->out[r] = fp_hash_flat(job->src + r * job->row, job->row);
}

/* Takes tasks from job until none is left. */
static void fp_job_run(struct fp_job *job)
{
	for (;;) {
		uint64_t t = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);

		if (t >= job->ntasks)
			break;
		fp_job_task(job, t);
	}
}

/* A worker: sleeps until a new job (or stop), helps with it, reports done. */
static void *fp_worker_main(void *arg)
{
	struct fp_workers *w = arg;
	uint64_t seen;

	pthread_mutex_lock(&w->lock);
	seen = w->start_generation;     /* not generation: a job may already be out */
	for (;;) {
		while (!w->stop && w->generation == seen)
			pthread_cond_wait(&w->work_cv, &w->lock);
		if (w->stop)
			break;
		seen = w->generation;
		struct fp_job *job = w->job;

		pthread_mutex_unlock(&w->lock);
		fp_job_run(job);
		pthread_mutex_lock(&w->lock);
		if (--w->active == 0)
			pthread_cond_signal(&w->done_cv);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/*
 * Starts up to n workers with every signal blocked (the host program's
 * handlers must not run on them). Called under fp_job_lock. Returns how many
 * started.
 */
static unsigned fp_workers_start(unsigned n)
{
	struct fp_workers *w = &fp_pool;
	sigset_t all, old;
	pthread_attr_t attr;
	unsigned i;

	if (n > FP_MAX_THREADS)
		n = FP_MAX_THREADS;
	pthread_mutex_lock(&w->lock);
	w->start_generation = w->generation;
	pthread_mutex_unlock(&w->lock);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FP_WORKER_STACK);
	for (i = 0; i < n; i++)
		if (pthread_create(&w->tids[i], &attr, fp_worker_main, w) != 0)
			break;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	w->started = i;
	w->wanted = n;
	return i;
}

/* Stops and joins the workers. Called under fp_job_lock. */
static void fp_workers_stop(void)
{
	struct fp_workers *w = &fp_pool;
	unsigned n = w->started;

	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_broadcast(&w->work_cv);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(w->tids[i], NULL);
	pthread_mutex_lock(&w->lock);
	w->stop = 0;
	w->started = 0;
	w->wanted = 0;
	pthread_mutex_unlock(&w->lock);
}

/*
 * Runs job on the workers and the caller. Returns 0, or -EAGAIN when no
 * worker could be started (the caller then hashes alone).
 */
static int fp_job_parallel(struct fp_job *job)
{
	struct fp_workers *w = &fp_pool;
	unsigned want;
	int err = 0;

	pthread_mutex_lock(&fp_job_lock);
	want = atomic_load(&fp_threads);
	want = want > 1 ? want - 1 : 0;
	if (want > FP_MAX_THREADS)
		want = FP_MAX_THREADS;
	if (w->wanted != want || w->started == 0) {
		if (w->started)
			fp_workers_stop();
		if (fp_workers_start(want) == 0) {
			err = -EAGAIN;
			goto out_unlock;
		}
	}
	pthread_mutex_lock(&w->lock);
	w->job = job;
	w->active = w->started;
	w->generation++;
	pthread_cond_broadcast(&w->work_cv);
	pthread_mutex_unlock(&w->lock);

	fp_job_run(job);

	pthread_mutex_lock(&w->lock);
	while (w->active)
		pthread_cond_wait(&w->done_cv, &w->lock);
	w->job = NULL;
	pthread_mutex_unlock(&w->lock);
out_unlock:
	pthread_mutex_unlock(&fp_job_lock);
	return err;
}

/* Hashes nrows rows serially on the calling thread. */
static void fp_rows_serial(const unsigned char *src, uint64_t row, uint64_t nrows,
			   struct fp *out)
{
	for (uint64_t r = 0; r < nrows; r++)
		out[r] = fp_hash_row(src + r * row, row);
}

/*
 * Hashes nrows rows with the workers. Returns 0, or a negative errno when
 * the job could not run in parallel (nothing was written then).
 */
static int fp_rows_parallel(const unsigned char *src, uint64_t row, uint64_t nrows,
			    struct fp *out)
{
	struct fp_job job = {
		.src = src, .row = row, .nrows = nrows, .out = out,
	};
	int err;

	atomic_init(&job.next, 0);
	if (row > FP_CHUNK) {
		job.nchunks = fp_chunks(row);
		if (nrows > SIZE_MAX / sizeof(struct fp) / job.nchunks)
			return -ENOMEM;
		job.ntasks = nrows * job.nchunks;
		job.digests = malloc((size_t)job.ntasks * sizeof(struct fp));
		if (!job.digests)
			return -ENOMEM;
	} else {
		uint64_t task = row * nrows / (8ull * atomic_load(&fp_threads) + 1);

		task = task < FP_TASK_MIN ? FP_TASK_MIN : task > FP_TASK_MAX ? FP_TASK_MAX : task;
		job.rows_per_task = task / row;
		if (job.rows_per_task == 0)
			job.rows_per_task = 1;
		job.ntasks = (nrows + job.rows_per_task - 1) / job.rows_per_task;
	}
	err = fp_job_parallel(&job);
	if (err)
		goto out_free_digests;
	for (uint64_t r = 0; job.nchunks && r < nrows; r++)
		out[r] = fp_tree_top(job.digests + r * job.nchunks, job.nchunks, row);
out_free_digests:
	free(job.digests);
	job.digests = NULL;
	return err;
}

int fingerprint_init(unsigned threads)
{
	fp_ensure_secret();
	if (threads == 0)
		threads = fp_default_threads();
	if (threads > FP_MAX_THREADS + 1)
		threads = FP_MAX_THREADS + 1;
	/* Workers are (re)started at the next parallel job with this count. */
	atomic_store(&fp_threads, threads);
	return 0;
}

uint64_t fingerprint_rows(const void *src, uint64_t row, uint64_t nrows, struct fp *out)
{
	uint64_t t0 = fp_now_ns();
	uint64_t total;
	unsigned threads;

	fp_ensure_secret();
	threads = atomic_load_explicit(&fp_threads, memory_order_relaxed);
	if (threads == 0) {
		fingerprint_init(0);
		threads = atomic_load_explicit(&fp_threads, memory_order_relaxed);
	}
	if (__builtin_mul_overflow(row, nrows, &total))
		total = UINT64_MAX;
	if (threads < 2 || total < FP_PARALLEL_MIN || (nrows < 2 && row <= FP_CHUNK) ||
	    fp_rows_parallel(src, row, nrows, out) != 0)
		fp_rows_serial(src, row, nrows, out);
	return fp_now_ns() - t0;
}

struct fp fingerprint_one(const void *src, uint64_t len)
{
	fp_ensure_secret();
	return fp_hash_row(src, len);
}

/*
 * In a forked child only the forking thread exists: the workers are gone and
 * any lock another parent thread held is stuck. Re-create the locks and
 * forget the workers; the secrets and the thread count are kept.
 */
void fingerprint_atfork_child(void)
{
	struct fp_workers *w = &fp_pool;

	pthread_mutex_init(&fp_init_lock, NULL);
	pthread_mutex_init(&fp_job_lock, NULL);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work_cv, NULL);
	pthread_cond_init(&w->done_cv, NULL);
	w->started = 0;
	w->wanted = 0;
	w->generation = 0;
	w->active = 0;
	w->stop = 0;
	w->job = NULL;
}

void fingerprint_shutdown(void)
{
	pthread_mutex_lock(&fp_job_lock);
	if (fp_pool.started)
		fp_workers_stop();
	pthread_mutex_unlock(&fp_job_lock);
}

void fingerprint_set_seed_for_tests(uint64_t seed)
{
	unsigned char material[64];

	for (size_t i = 0; i < sizeof(material); i += 8) {
		uint64_t v = XXH64(&seed, sizeof(seed), i);

		memcpy(material + i, &v, sizeof(v));
	}
	pthread_mutex_lock(&fp_init_lock);
	fp_secrets_from(material, sizeof(material));
	fp_pick_kernels();
	atomic_store_explicit(&fp_ready, 1, memory_order_release);
	pthread_mutex_unlock(&fp_init_lock);
}
