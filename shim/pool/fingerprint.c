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
 * Parallel jobs. A copy of at least FINGERPRINT_PARALLEL_MIN bytes with two
 * rows or more (or one tree row) is a job: tasks of whole rows (about
 * FP_TASK_BYTES each, fewer bytes when that would leave under
 * FP_TASKS_PER_THREAD tasks per thread, never under FP_TASK_MIN) or single
 * chunks of tree rows. One job runs at a time
 * (fp_job_lock, taken with trylock: a caller that finds it busy hashes
 * alone). The job's parameters live in fp_pool.job, and tasks are taken
 * from one atomic word, fp_pool.claim, the number of tasks not yet taken:
 * taking one is a compare-and-swap that decrements it while it is above 0.
 * The caller writes the parameters, then publishes claim = ntasks with a
 * release store; a worker reads the parameters only after a successful
 * claim, so it always sees those of the job it claimed from, and a worker
 * that wakes late (after the job) finds claim at 0 and takes nothing.
 * Each finished task increments fp_pool.finished. The caller takes tasks
 * like any worker; when none is left it waits until finished == ntasks,
 * which counts only tasks that were taken and are running: it never waits
 * for a worker that has not started, and if no worker took anything it
 * returns at once. It spins briefly (the running task is short), then
 * sleeps on done_cv, which the worker finishing the last task signals. A
 * worker that finds itself running on the CPU the caller published from
 * takes nothing: it could only hash in the caller's place, not beside it.
 *
 * Workers sleep on work_cv between jobs and are woken by invitation: the
 * caller bumps the generation and invites threads - 1 of them. They run
 * under SCHED_BATCH: the same share of the CPU as any thread, but a woken
 * worker does not preempt the thread running where it wakes, so on a busy
 * machine waking one does not take the CPU from the caller (which never
 * waits for a worker that has not started). Not SCHED_IDLE: a worker that
 * has taken a task must get the CPU to finish it, and an unprivileged
 * thread cannot leave SCHED_IDLE once it holds one. They block every
 * signal, are started at the first large copy (as many as the most
 * threads configured, less the caller; more are added if a later
 * fingerprint_init asks for more), and are forgotten by
 * fingerprint_atfork_child so that a forked child starts its own. If none
 * can start, the caller hashes alone and tries again FP_RETRY_JOBS large
 * copies later.
 *
 * Thread count. Chosen by fp_tune from the throughput of large copies
 * (bytes per nanosecond of the caller's wall clock, an average weighted 1/4
 * to the newest). Candidates: 1, 2, 4, ... and the maximum (the CPU count,
 * at most 8) for fingerprint_init(0); 1 and N for fingerprint_init(N). The
 * choice and its neighbours get FP_TUNE_SAMPLES copies each in turn (1, 2,
 * 1, 2 at the start), then a neighbour gets one copy in FP_PROBE_EVERY, and
 * the choice moves to a neighbour that is FP_TUNE_MARGIN faster. Each
 * configuration lately used keeps its own chooser (FP_TUNERS). The test
 * hook exact_threads bypasses the chooser.
 */
#include "pool/fingerprint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
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
#define FP_TASK_BYTES (128ull << 10)       /* bytes of whole rows per task */
#define FP_TASKS_PER_THREAD 4              /* at least this many tasks per thread */
#define FP_TASK_MIN (32ull << 10)          /* ... but no task below this */
#define FP_CHUNK (4ull << 20)              /* tree chunk; longer rows are trees */
#define FP_MAX_TASKS (1ull << 40)          /* a job with more runs serially */
#define FP_MAX_THREADS 64
#define FP_DEFAULT_MAX_THREADS 8
#define FP_WORKER_STACK (512u << 10)
#define FP_SPIN_NS 10000                   /* the caller spins this long for a running task */
#define FP_RETRY_JOBS 64                   /* large copies before starting workers again */
#define FP_TUNE_CANDS 8
#define FP_TUNE_SAMPLES 2
#define FP_PROBE_EVERY 32
#define FP_TUNE_MARGIN 1.05

/*
 * The parameters of the parallel job in progress. Written by its caller
 * before claim is published; read by a worker only after it has claimed a
 * task and before it reports the task finished.
 */
struct fp_job {
	const unsigned char *src;
	uint64_t row;
	uint64_t nrows;
	struct fp *out;
	uint64_t rows_per_task;            /* row jobs */
	uint64_t nchunks;                  /* tree jobs: chunks per row, else 0 */
	struct fp *digests;                /* tree jobs: nrows * nchunks digests */
	uint64_t ntasks;
};

/* The workers and the job they share. */
struct fp_workers {
	pthread_mutex_t lock;              /* guards the fields up to job */
	pthread_cond_t work_cv;            /* workers: a new job or stop */
	pthread_cond_t done_cv;            /* the caller: the last running task finished */
	pthread_t tids[FP_MAX_THREADS];
	unsigned started;                  /* workers running */
	unsigned sleeping;                 /* workers waiting on work_cv */
	unsigned invites;                  /* workers still asked to join the current job */
	uint64_t generation;               /* bumped for each job */
	uint64_t start_generation;         /* generation when workers were last started */
	int stop;
	int caller_waiting;                /* the caller sleeps on done_cv */
	/* Read by every task: a line of its own, away from the counters. */
	_Alignas(64) struct fp_job job;
	atomic_int caller_cpu;             /* the CPU the caller published from, or -1 */
	_Alignas(64) atomic_uint_fast64_t claim;   /* tasks of the job not yet taken */
	atomic_uint_fast64_t finished;     /* tasks of the job finished */
	_Alignas(64) atomic_uint_fast64_t worker_tasks;   /* stats */
};

/* The thread-count chooser; guarded by fp_job_lock. */
struct fp_tuner {
	unsigned cfg;                      /* the fp_cfg it was set up for, 0: none */
	unsigned ncand;
	unsigned cand[FP_TUNE_CANDS];      /* thread counts, ascending */
	unsigned cur;                      /* index of the choice */
	unsigned n[FP_TUNE_CANDS];         /* copies measured */
	double rate[FP_TUNE_CANDS];        /* bytes per ns, weighted average */
	unsigned dir;                      /* the next probe goes up (1) or down (0) */
	uint64_t jobs;                     /* large copies it chose for */
};

static unsigned char fp_row_secret[FP_SECRET_SIZE];
static unsigned char fp_tree_secret[FP_SECRET_SIZE];
static atomic_int fp_ready;                /* secrets generated */
static int fp_avx2;                        /* use the AVX2 kernels */

/*
 * The configuration: adaptive << 8 | the most threads (caller included);
 * 0 before fingerprint_init.
 */
static atomic_uint fp_cfg;
static uint64_t fp_large_jobs;             /* large copies; guarded by fp_job_lock */
static uint64_t fp_retry_at;               /* no workers: fp_large_jobs when to try again */
static const struct fp_test_hooks *_Atomic fp_hooks;

static pthread_mutex_t fp_init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fp_job_lock = PTHREAD_MUTEX_INITIALIZER;
/* One chooser per configuration lately used (tests and benchmarks switch). */
#define FP_TUNERS 4
static struct fp_tuner fp_tuners[FP_TUNERS];
static unsigned fp_tuner_next;            /* the slot to reuse next */
static struct fp_stats fp_counts;          /* guarded by fp_job_lock */
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
	XXH128_hash_t h;

	(void)seed;
	h = XXH3_hashLong_128b_internal(p, len, secret, secret_len,
					XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
	/* Leave the upper halves of the YMM registers clean: GCC does not
	 * here, and SSE code after a dirty AVX state runs up to twice as slow
	 * (measured: 3 KiB rows at half speed when the result was stored
	 * with an SSE move), in this module and in the host program alike. */
	_mm256_zeroupper();
	return h;
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

/* The most threads of a configuration word. */
static unsigned fp_cfg_max(unsigned cfg)
{
	return (unsigned)(cfg & 0xFF);
}

/* Whether a configuration word lets the module choose the count. */
static int fp_cfg_adaptive(unsigned cfg)
{
	return (cfg >> 8) & 1;
}

/* The installed test hooks, or NULL. */
static const struct fp_test_hooks *fp_hooks_get(void)
{
	return atomic_load_explicit(&fp_hooks, memory_order_acquire);
}

/* A pause in a spin loop. */
static void fp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Runs task t of the job: a run of whole rows, or one chunk of a tree row. */
static void fp_job_task(const struct fp_job *job, uint64_t t)
{
	const unsigned char *src = job->src;
	uint64_t row = job->row;

	if (job->nchunks) {
		uint64_t r = t / job->nchunks, c = t % job->nchunks;
		uint64_t off = c * FP_CHUNK;
		uint64_t n = row - off < FP_CHUNK ? row - off : FP_CHUNK;

		job->digests[t] = fp_hash_flat(src + r * row + off, n);
		return;
	}
	uint64_t first = t * job->rows_per_task;
	uint64_t last = first + job->rows_per_task;
	struct fp *out = job->out;

	if (last > job->nrows)
		last = job->nrows;
	for (uint64_t r = first; r < last; r++)
		out[r] = fp_hash_flat(src + r * row, row);
}

/* Wakes the caller if it sleeps on done_cv (the last task has finished). */
static void fp_wake_caller(struct fp_workers *w)
{
	pthread_mutex_lock(&w->lock);
	if (w->caller_waiting)
		pthread_cond_signal(&w->done_cv);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Takes and runs tasks of the current job until none is left; by_worker
 * says who runs them. Returns how many it ran. After reporting a task
 * finished, it no longer touches the job: the caller may return then.
 */
static uint64_t fp_claim_run(struct fp_workers *w, int by_worker)
{
	const struct fp_test_hooks *hooks = fp_hooks_get();
	uint64_t ran = 0;

	for (;;) {
		uint_fast64_t left = atomic_load_explicit(&w->claim, memory_order_relaxed);

		/* A worker that runs on the caller's CPU has taken it from the
		 * caller: it gives it back rather than hash in its place. */
		if (by_worker && left && !(hooks && hooks->workers_anywhere) &&
		    sched_getcpu() == atomic_load_explicit(&w->caller_cpu, memory_order_relaxed))
			return ran;
		do {
			if (left == 0)
				return ran;
		} while (!atomic_compare_exchange_weak_explicit(&w->claim, &left, left - 1,
								memory_order_acquire,
								memory_order_relaxed));
		uint64_t ntasks = w->job.ntasks;

		if (hooks && hooks->task_claimed)
			hooks->task_claimed(by_worker);
		fp_job_task(&w->job, ntasks - left);
		ran++;
		if (by_worker)     /* counted before the caller can see the task done */
			atomic_fetch_add_explicit(&w->worker_tasks, 1, memory_order_relaxed);
		if (atomic_fetch_add_explicit(&w->finished, 1, memory_order_release) + 1 == ntasks &&
		    by_worker)
			fp_wake_caller(w);
	}
}

/* A worker: sleeps until invited to a job (or stopped), takes its tasks. */
static void *fp_worker_main(void *arg)
{
	struct fp_workers *w = arg;
	uint64_t seen;
#ifdef SCHED_BATCH
	struct sched_param batch = { 0 };

	/* A woken worker does not preempt the caller (see the file comment). */
	pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
#endif

	pthread_mutex_lock(&w->lock);
	seen = w->start_generation;     /* not generation: a job may already be out */
	for (;;) {
		while (!w->stop && (w->invites == 0 || w->generation == seen)) {
			w->sleeping++;
			pthread_cond_wait(&w->work_cv, &w->lock);
			w->sleeping--;
		}
		if (w->stop)
			break;
		seen = w->generation;
		w->invites--;
		pthread_mutex_unlock(&w->lock);

		const struct fp_test_hooks *hooks = fp_hooks_get();

		if (hooks && hooks->worker_joined)
			hooks->worker_joined();
		fp_claim_run(w, 1);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/*
 * Starts workers until n run, with every signal blocked (the host program's
 * handlers must not run on them). Called under fp_job_lock, between jobs.
 * Returns how many run.
 */
static unsigned fp_workers_start(unsigned n)
{
	const struct fp_test_hooks *hooks = fp_hooks_get();
	struct fp_workers *w = &fp_pool;
	sigset_t all, old;
	pthread_attr_t attr;
	unsigned i;

	if (n > FP_MAX_THREADS)
		n = FP_MAX_THREADS;
	if (hooks && hooks->no_workers)
		return w->started;
	pthread_mutex_lock(&w->lock);
	w->start_generation = w->generation;
	pthread_mutex_unlock(&w->lock);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FP_WORKER_STACK);
	for (i = w->started; i < n; i++)
		if (pthread_create(&w->tids[i], &attr, fp_worker_main, w) != 0)
			break;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	w->started = i;
	return i;
}

/* Stops and joins the workers. Called under fp_job_lock, between jobs. */
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
	w->invites = 0;
	pthread_mutex_unlock(&w->lock);
}

/*
 * Sets up the chooser for configuration cfg: candidates 1, 2, 4, ... and
 * the most threads when adaptive, 1 and the forced count otherwise. Called
 * under fp_job_lock.
 */
static void fp_tune_reset(struct fp_tuner *t, unsigned cfg)
{
	unsigned max = fp_cfg_max(cfg);

	memset(t, 0, sizeof(*t));
	t->cfg = cfg;
	for (unsigned c = 1; c < max && t->ncand < FP_TUNE_CANDS - 1;
	     c = fp_cfg_adaptive(cfg) ? c * 2 : max)
		t->cand[t->ncand++] = c;
	t->cand[t->ncand++] = max;
}

/*
 * Chooses the candidate (an index) for the next large copy: the choice and
 * its neighbours are measured FP_TUNE_SAMPLES times each first, the least
 * measured next (the choice on a tie); then a neighbour, up and down in
 * turn, on one copy in FP_PROBE_EVERY.
 */
static unsigned fp_tune_pick(struct fp_tuner *t)
{
	unsigned c = t->cur, lo = c ? c - 1 : c, hi = c + 1 < t->ncand ? c + 1 : c;
	unsigned least = c;

	t->jobs++;
	if (t->n[lo] < t->n[least])
		least = lo;
	if (t->n[hi] < t->n[least])
		least = hi;
	if (t->n[least] < FP_TUNE_SAMPLES)
		return least;
	if (t->jobs % FP_PROBE_EVERY == 0) {
		t->dir ^= 1;
		if (t->dir ? hi == c : lo == c)
			t->dir ^= 1;           /* at an end of the list: the other way */
		return t->dir ? hi : lo;
	}
	return c;
}

/*
 * Records the throughput of a large copy hashed with candidate i, then
 * moves the choice to a neighbour that is FP_TUNE_MARGIN faster.
 */
static void fp_tune_record(struct fp_tuner *t, unsigned i, double rate)
{
	const struct fp_test_hooks *hooks = fp_hooks_get();
	unsigned c = t->cur, best = c;

	if (hooks && hooks->rate)
		rate = hooks->rate(t->cand[i], rate);
	t->rate[i] = t->n[i] ? t->rate[i] + (rate - t->rate[i]) / 4 : rate;
	t->n[i]++;
	for (unsigned j = c ? c - 1 : c; j <= c + 1 && j < t->ncand; j++)
		if (j != c && t->n[j] && t->rate[j] > t->rate[c] * FP_TUNE_MARGIN &&
		    t->rate[j] > t->rate[best])
			best = j;
	t->cur = best;
}

/* The chooser of configuration cfg, set up afresh if none is kept. */
static struct fp_tuner *fp_tuner_for(unsigned cfg)
{
	struct fp_tuner *t;

	for (unsigned i = 0; i < FP_TUNERS; i++)
		if (fp_tuners[i].cfg == cfg)
			return &fp_tuners[i];
	t = &fp_tuners[fp_tuner_next++ % FP_TUNERS];
	fp_tune_reset(t, cfg);
	return t;
}

/* Invites n sleeping workers to the job just published. */
static void fp_invite(struct fp_workers *w, unsigned n)
{
	pthread_mutex_lock(&w->lock);
	w->generation++;
	w->invites = n;
	if (w->sleeping && n >= w->sleeping)
		pthread_cond_broadcast(&w->work_cv);
	else
		for (unsigned i = 0; i < n && i < w->sleeping; i++)
			pthread_cond_signal(&w->work_cv);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Waits until all ntasks tasks of the job have finished: only tasks that
 * workers have taken and are running can be left. Spins up to FP_SPIN_NS
 * (yielding now and then, in case the worker shares this CPU), then sleeps.
 * Returns the nanoseconds it waited.
 */
static uint64_t fp_wait_done(struct fp_workers *w, uint64_t ntasks)
{
	uint64_t t0, dt;

	if (atomic_load_explicit(&w->finished, memory_order_acquire) == ntasks)
		return 0;
	t0 = fp_now_ns();
	for (unsigned i = 1; atomic_load_explicit(&w->finished, memory_order_acquire) != ntasks; i++) {
		if (i % 64 == 0) {
			if (fp_now_ns() - t0 > FP_SPIN_NS)
				break;
			sched_yield();
		}
		fp_cpu_relax();
	}
	pthread_mutex_lock(&w->lock);
	w->caller_waiting = 1;
	while (atomic_load_explicit(&w->finished, memory_order_acquire) != ntasks)
		pthread_cond_wait(&w->done_cv, &w->lock);
	w->caller_waiting = 0;
	pthread_mutex_unlock(&w->lock);
	dt = fp_now_ns() - t0;
	fp_counts.waits++;
	fp_counts.wait_ns += dt;
	return dt;
}

/* Hashes nrows rows serially on the calling thread. */
static void fp_rows_serial(const unsigned char *src, uint64_t row, uint64_t nrows,
			   struct fp *out)
{
	for (uint64_t r = 0; r < nrows; r++)
		out[r] = fp_hash_row(src + r * row, row);
}

/*
 * Runs one job on the caller and threads - 1 invited workers. Called under
 * fp_job_lock with workers running. Returns 0, or -ENOMEM when it could not
 * run (nothing was written then).
 */
static int fp_job_run(const unsigned char *src, uint64_t row, uint64_t nrows, struct fp *out,
		      unsigned threads)
{
	struct fp_workers *w = &fp_pool;
	struct fp_job *job = &w->job;
	uint64_t ran;

	memset(job, 0, sizeof(*job));
	job->src = src;
	job->row = row;
	job->nrows = nrows;
	job->out = out;
	if (row > FP_CHUNK) {
		job->nchunks = fp_chunks(row);
		if (nrows > SIZE_MAX / sizeof(struct fp) / job->nchunks)
			return -ENOMEM;
		job->ntasks = nrows * job->nchunks;
		job->digests = malloc((size_t)job->ntasks * sizeof(struct fp));
		if (!job->digests)
			return -ENOMEM;
	} else {
		uint64_t task = FP_TASK_BYTES, total = row * nrows;

		if (task > total / (FP_TASKS_PER_THREAD * threads))
			task = total / (FP_TASKS_PER_THREAD * threads);
		if (task < FP_TASK_MIN)
			task = FP_TASK_MIN;
		job->rows_per_task = task / row ? task / row : 1;
		job->ntasks = (nrows + job->rows_per_task - 1) / job->rows_per_task;
	}
	if (job->ntasks > FP_MAX_TASKS) {
		free(job->digests);
		job->digests = NULL;
		return -ENOMEM;
	}
	atomic_store_explicit(&w->finished, 0, memory_order_relaxed);
	atomic_store_explicit(&w->caller_cpu, sched_getcpu(), memory_order_relaxed);
	atomic_store_explicit(&w->claim, job->ntasks, memory_order_release);
	fp_invite(w, threads - 1);
	ran = fp_claim_run(w, 0);
	fp_wait_done(w, job->ntasks);
	fp_counts.parallel_jobs++;
	fp_counts.caller_tasks += ran;
	for (uint64_t r = 0; job->nchunks && r < nrows; r++)
		out[r] = fp_tree_top(job->digests + r * job->nchunks, job->nchunks, row);
	free(job->digests);
	job->digests = NULL;
	return 0;
}

/*
 * Hashes a large copy with the count the chooser picks (or the forced one).
 * Returns 0, or a negative errno when it did not hash it (the job lock was
 * busy, or no memory for a tree job's digests): the caller hashes alone.
 */
static int fp_rows_large(const unsigned char *src, uint64_t row, uint64_t nrows, struct fp *out,
			 unsigned cfg)
{
	const struct fp_test_hooks *hooks = fp_hooks_get();
	struct fp_tuner *t = NULL;
	unsigned i = 0, threads = fp_cfg_max(cfg);
	uint64_t t0, dt;
	int err = 0;

	if (pthread_mutex_trylock(&fp_job_lock) != 0)
		return -EBUSY;
	fp_large_jobs++;
	if (fp_pool.started + 1 < threads && fp_large_jobs >= fp_retry_at &&
	    fp_workers_start(threads - 1) == 0)
		fp_retry_at = fp_large_jobs + FP_RETRY_JOBS;
	if (!(hooks && hooks->exact_threads)) {
		t = fp_tuner_for(cfg);
		i = fp_tune_pick(t);
		threads = t->cand[i];
	}
	if (threads > fp_pool.started + 1)
		threads = fp_pool.started + 1;
	t0 = fp_now_ns();
	if (threads > 1)
		err = fp_job_run(src, row, nrows, out, threads);
	else
		fp_rows_serial(src, row, nrows, out);
	dt = fp_now_ns() - t0;
	if (!err && t && threads == t->cand[i])
		fp_tune_record(t, i, (double)(row * nrows) / (double)(dt ? dt : 1));
	pthread_mutex_unlock(&fp_job_lock);
	return err;
}

int fingerprint_init(unsigned threads)
{
	int adaptive = threads == 0;

	fp_ensure_secret();
	if (adaptive)
		threads = fp_default_threads();
	if (threads > FP_MAX_THREADS + 1)
		threads = FP_MAX_THREADS + 1;
	/* More workers start, and the chooser is set up, at the next large copy. */
	atomic_store(&fp_cfg, (unsigned)adaptive << 8 | threads);
	return 0;
}

uint64_t fingerprint_rows(const void *src, uint64_t row, uint64_t nrows, struct fp *out)
{
	const struct fp_test_hooks *hooks = fp_hooks_get();
	uint64_t t0 = fp_now_ns();
	uint64_t total, min;
	unsigned cfg;

	fp_ensure_secret();
	cfg = atomic_load_explicit(&fp_cfg, memory_order_relaxed);
	if (cfg == 0) {
		fingerprint_init(0);
		cfg = atomic_load_explicit(&fp_cfg, memory_order_relaxed);
	}
	min = hooks && hooks->parallel_min ? hooks->parallel_min : FINGERPRINT_PARALLEL_MIN;
	if (__builtin_mul_overflow(row, nrows, &total))
		total = UINT64_MAX;
	if (fp_cfg_max(cfg) < 2 || total < min || (nrows < 2 && row <= FP_CHUNK) ||
	    fp_rows_large(src, row, nrows, out, cfg) != 0)
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
 * forget the workers and the parent's counters; the secrets, the
 * configuration and the chooser's measurements are kept.
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
	w->sleeping = 0;
	w->invites = 0;
	w->generation = 0;
	w->start_generation = 0;
	w->stop = 0;
	w->caller_waiting = 0;
	w->job.digests = NULL;
	atomic_store(&w->claim, 0);
	atomic_store(&w->finished, 0);
	atomic_store(&w->worker_tasks, 0);
	memset(&fp_counts, 0, sizeof(fp_counts));
	fp_retry_at = 0;
}

void fingerprint_shutdown(void)
{
	pthread_mutex_lock(&fp_job_lock);
	if (fp_pool.started)
		fp_workers_stop();
	memset(fp_tuners, 0, sizeof(fp_tuners));
	fp_retry_at = 0;
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

void fingerprint_get_stats(struct fp_stats *st)
{
	unsigned cfg = atomic_load(&fp_cfg);

	pthread_mutex_lock(&fp_job_lock);
	*st = fp_counts;
	st->worker_tasks = atomic_load(&fp_pool.worker_tasks);
	st->threads_max = fp_cfg_max(cfg);
	st->adaptive = fp_cfg_adaptive(cfg);
	st->threads = 1;
	for (unsigned i = 0; i < FP_TUNERS; i++)
		if (fp_tuners[i].cfg == cfg)
			st->threads = fp_tuners[i].cand[fp_tuners[i].cur];
	st->workers = fp_pool.started;
	pthread_mutex_unlock(&fp_job_lock);
}

void fingerprint_set_test_hooks(const struct fp_test_hooks *hooks)
{
	atomic_store_explicit(&fp_hooks, hooks, memory_order_release);
}
