/*
 * fingerprint: the parallel path of fingerprint_rows and the module's
 * set-up (fingerprint.h is the contract). The hashing itself, keys, kernels
 * and the tree of long rows, is fingerprint_hash.c's; the choice of the
 * thread count is fingerprint_tune.c's. This file calls both, neither calls
 * it.
 *
 * Parallel jobs. A copy of at least FINGERPRINT_PARALLEL_MIN bytes with two
 * rows or more (or one tree row) is a job: tasks of whole rows (about
 * FP_TASK_BYTES each, fewer bytes when that would leave under
 * FP_TASKS_PER_THREAD tasks per thread, never under FP_TASK_MIN) or single
 * chunks of tree rows. One job runs at a time (fp_job_lock, taken with
 * trylock: a caller that finds it busy hashes alone). The job's parameters live in fp_pool.job, and tasks are taken
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
 * Thread count. Chosen by fingerprint_tune.c from the throughput of large
 * copies (fingerprint_tune.h says how), unless the test hook exact_threads
 * asks for the configured count.
 */
#include "pool/fingerprint.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "pool/fingerprint_hash.h"
#include "pool/fingerprint_tune.h"

#define FP_TASK_BYTES (128ull << 10)       /* bytes of whole rows per task */
#define FP_TASKS_PER_THREAD 4              /* at least this many tasks per thread */
#define FP_TASK_MIN (32ull << 10)          /* ... but no task below this */
#define FP_MAX_TASKS (1ull << 40)          /* a job with more runs serially */
#define FP_MAX_THREADS 64
#define FP_DEFAULT_MAX_THREADS 8
#define FP_WORKER_STACK (512u << 10)
#define FP_SPIN_NS 10000                   /* the caller spins this long for a running task */
#define FP_RETRY_JOBS 64                   /* large copies before starting workers again */

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

/*
 * The configuration: adaptive << 8 | the most threads (caller included);
 * 0 before fingerprint_init.
 */
static atomic_uint fp_cfg;
static uint64_t fp_large_jobs;             /* large copies; guarded by fp_job_lock */
static uint64_t fp_retry_at;               /* no workers: fp_large_jobs when to try again */
static const struct fp_test_hooks *_Atomic fp_hooks;

static pthread_mutex_t fp_job_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fp_stats fp_counts;          /* guarded by fp_job_lock */
static struct fp_workers fp_pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work_cv = PTHREAD_COND_INITIALIZER,
	.done_cv = PTHREAD_COND_INITIALIZER,
};

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

		job->digests[t] = fp_hash_chunk(src + r * row + off, n);
		return;
	}
	uint64_t first = t * job->rows_per_task;
	uint64_t last = first + job->rows_per_task;
	struct fp *out = job->out;

	if (last > job->nrows)
		last = job->nrows;
	fp_hash_rows(src + first * row, row, last - first, out + first);
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
	t0 = clock_now_ns();
	for (unsigned i = 1; atomic_load_explicit(&w->finished, memory_order_acquire) != ntasks; i++) {
		if (i % 64 == 0) {
			if (clock_now_ns() - t0 > FP_SPIN_NS)
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
	dt = clock_now_ns() - t0;
	fp_counts.waits++;
	fp_counts.wait_ns += dt;
	return dt;
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
		out[r] = fp_hash_tree_top(job->digests + r * job->nchunks, job->nchunks, row);
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
	t0 = clock_now_ns();
	if (threads > 1)
		err = fp_job_run(src, row, nrows, out, threads);
	else
		fp_hash_rows(src, row, nrows, out);
	dt = clock_now_ns() - t0;
	if (!err && t && threads == t->cand[i]) {
		double rate = (double)(row * nrows) / (double)(dt ? dt : 1);

		if (hooks && hooks->rate)
			rate = hooks->rate(t->cand[i], rate);
		fp_tune_record(t, i, rate);
	}
	pthread_mutex_unlock(&fp_job_lock);
	return err;
}

int fingerprint_init(unsigned threads)
{
	int adaptive = threads == 0;

	fp_hash_prepare();
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
	uint64_t t0 = clock_now_ns();
	uint64_t total, min;
	unsigned cfg;

	fp_hash_prepare();
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
		fp_hash_rows(src, row, nrows, out);
	if (hooks && hooks->rows_hashed)
		hooks->rows_hashed(src, row, nrows, out);
	return clock_now_ns() - t0;
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

	fp_hash_atfork_child();
	pthread_mutex_init(&fp_job_lock, NULL);
	/* All zero is the state of no workers and no job (no digests to free). */
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work_cv, NULL);
	pthread_cond_init(&w->done_cv, NULL);
	memset(&fp_counts, 0, sizeof(fp_counts));
	fp_retry_at = 0;
}

void fingerprint_shutdown(void)
{
	pthread_mutex_lock(&fp_job_lock);
	if (fp_pool.started)
		fp_workers_stop();
	fp_tune_forget();
	fp_retry_at = 0;
	pthread_mutex_unlock(&fp_job_lock);
}

void fingerprint_get_stats(struct fp_stats *st)
{
	unsigned cfg = atomic_load(&fp_cfg);

	pthread_mutex_lock(&fp_job_lock);
	*st = fp_counts;
	st->worker_tasks = atomic_load(&fp_pool.worker_tasks);
	st->threads_max = fp_cfg_max(cfg);
	st->adaptive = fp_cfg_adaptive(cfg);
	st->threads = fp_tune_threads(cfg);
	st->workers = fp_pool.started;
	pthread_mutex_unlock(&fp_job_lock);
}

void fingerprint_set_test_hooks(const struct fp_test_hooks *hooks)
{
	atomic_store_explicit(&fp_hooks, hooks, memory_order_release);
}
