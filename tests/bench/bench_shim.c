/*
 * Benchmark of the shim's whole copy path, pool_copy, over the emulated
 * device: the hit epochs of a training-style run measured on their own, in
 * one process, against baselines measured in the same process on the same
 * batches.
 *
 * A seeded dataset of N distinct rows of R bytes is uploaded E times, each
 * epoch reshuffled, in batches of B rows assembled into a ring of D
 * pageable staging buffers and copied into a ring of D device buffers with
 * pool_copy (the function pool/calls.c hands every matched copy to; the
 * program's own host-to-device copy is the driver's cuMemcpyHtoDAsync_v2 on
 * the chosen stream). Epoch 1 fills the pool (the budget holds the
 * dataset); epochs 2..E are all hits. The stats counters (time_ns.shim,
 * bytes.served_from_pool, pool.device_ops, ...) are read after epoch 1
 * and after epoch E of the same run, so the hit-epoch figures come from one
 * run, never from two runs subtracted. After each epoch every device
 * buffer of the ring is read back and compared with its staging buffer.
 *
 * Each repetition runs the configuration once for every thread count of
 * --threads (VRAMPOOL_THREADS, in alternating order from one repetition to
 * the next, so that the pairs see the same machine state), then measures
 * the baselines over one epoch of the same batches, each batch assembled
 * again before each of them (as warm in cache as when pool_copy sees it):
 *   hash    fingerprint_rows of the batch with one thread (the hash time of
 *           its rows: the shim's own fingerprint)
 *   xxh3    keyed XXH3-128 of the batch as one buffer, one thread
 *           (fingerprint_one: the AVX2 kernels where the CPU has them)
 *   memcpy  memcpy of the batch into another host buffer
 *
 * Usage: bench_shim [--row R] [--batch B] [--samples N] [--epochs E]
 *                   [--reps K] [--threads T1,T2,...] [--ring D]
 *                   [--stream legacy|ptds|nonblocking|blocking] [--whole]
 * (defaults 3072, 256, 20000, 4, 5, "1,2", 4, nonblocking). --whole
 * matches with the layout whole:R (each copy one row; give --batch 1)
 * instead of R.
 *
 * Prints `name value unit` lines (# lines are comments); each figure is a
 * per-repetition value, given as _min and _median over the repetitions.
 * For each thread count T:
 *   tT_hit_ns_per_row         time_ns.shim / rows seen, hit epochs
 *   tT_hit_minus_hash_ns      that less the hash time per row (same repetition)
 *   tT_hit_fp_ns_per_row      time_ns.fingerprint / rows seen, hit epochs (the
 *                             part of time_ns.shim spent in fingerprint_rows)
 *   tT_hit_rest_ns_per_row    time_ns.shim less time_ns.fingerprint, per row
 *   tT_served_gbps            bytes.served_from_pool / time_ns.shim, hit epochs
 *   tT_served_per_xxh3        that / xxh3_gbps (same repetition)
 *   tT_served_per_memcpy      that / memcpy_gbps (same repetition)
 *   tT_ops_per_copy           pool.device_ops / copies, hit epochs
 *   tT_hit_share              rows.hits / rows.seen, hit epochs
 *   tT_run_ns_per_row         time_ns.shim / rows seen, the whole run
 * and the same measured in the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID
 * around each pool_copy; baselines likewise), which the load of other
 * processes on the machine does not inflate (fingerprint workers of T > 1
 * are not in it):
 *   tT_hit_cpu_ns_per_row, tT_hit_cpu_minus_hash_ns, tT_served_cpu_per_xxh3,
 *   tT_served_cpu_per_memcpy
 * and the per-row costs of issue 16, in the calling thread's CPU time with
 * the device's time excluded (the time inside the pool's byte-moving device
 * calls, device_gather and device_copy_dtod_many, which the benchmark is
 * linked to wrap (-Wl,--wrap), and inside the program's own host-to-device
 * copies, its callbacks) and less the clock reads themselves (a thread CPU
 * clock read is a system call, about 0.6 us on a KVM guest: the cost of
 * one is measured in the same repetition and taken off once for each read
 * inside a copy), against hash_cpu_ns_per_row (single-thread keyed
 * XXH3-128 of each row of the same batches, measured in the same
 * repetition):
 *   tT_capture_cpu_ns_per_row     epoch 1 (every row a capture), per row
 *   tT_capture_cpu_minus_hash_ns  that less the hash (target <= 60 ns)
 *   tT_hit_host_cpu_ns_per_row    epochs 2..E (every row a hit), per row
 *   tT_hit_host_cpu_minus_hash_ns that less the hash (target <= 40 ns)
 *   tT_device_cpu_ns_per_row      the device's time left out, hit epochs, per row
 *   tT_whatif_bytes_per_row       the what-if's table and histogram per distinct row after the run
 *                                 (its captures kept out of the table: the histogram alone)
 * then hash_ns_per_row, xxh3_gbps, memcpy_gbps, hash_cpu_ns_per_row,
 * whatif_cpu_ns_per_row (whatif_observe of every row of one epoch of the
 * same batches as misses, fingerprinted beforehand, batch by batch; each
 * batch's fingerprints are read just before, as the shim's come from its
 * hash in cache, and that reading alone, timed over the epoch, is taken
 * off; target <= 5 ns at 10^6 rows; captures, which the pool keeps out of
 * the what-if's table, cost less), whatif_later_cpu_ns_per_row (a second
 * epoch of the same rows: the table built, the rate settled),
 * whatif_observed_bytes_per_row (the what-if's table and histogram per
 * distinct row after those epochs; target <= 2 at 10^6 rows), clock_cpu_ns
 * (one thread CPU clock read)
 * and, when the list holds
 * 1 and 2, t2_per_t1 (t2_served_gbps / t1_served_gbps, paired), and
 * finally "verified ok N" (N batches read back) or "verified FAILED N".
 * Exit status: 0 verified, 1 a mismatch, 2 bad usage, 3 a device failure.
 *
 * Run it with LD_LIBRARY_PATH=build/fakecuda; the emulated device's cost
 * model variables (FAKECUDA_*_GBPS) apply, but no figure here needs them.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "device/device.h"
#include "pool/fingerprint.h"
#include "pool/pool.h"
#include "pool/whatif.h"
#include "core/stats.h"

#define MAX_REPS 32
#define MAX_THREADS 4

/* The driver entry points the benchmark uses for the program's side. */
static __typeof__(cuMemcpyHtoDAsync_v2) *b_htod;
static __typeof__(cuMemcpyHtoD_v2) *b_htod_sync;
static __typeof__(cuMemcpyDtoH_v2) *b_dtoh;
static __typeof__(cuMemAlloc_v2) *b_alloc;
static __typeof__(cuMemFree_v2) *b_free;
static __typeof__(cuStreamSynchronize) *b_sync;
static __typeof__(cuStreamCreate) *b_stream_create;
static __typeof__(cuStreamDestroy_v2) *b_stream_destroy;

/* One configuration and its buffers. */
struct bench {
	uint64_t row, batch, samples, epochs, reps, ring;
	unsigned threads[MAX_THREADS];
	unsigned nthreads;
	const char *stream_kind;
	int whole;
	unsigned char *data;            /* samples * row */
	unsigned char **staging;        /* ring buffers of batch * row */
	unsigned char *scratch;         /* memcpy destination, back-reads */
	CUdeviceptr *dev;
	uint64_t *used;                 /* bytes of the batch each ring slot holds */
	uint32_t *order;
	struct fp *fps;
	CUstream stream;
	uint64_t verified, mismatches;
};

/* What one run with one thread count measured. */
struct bench_run {
	double hit_ns_per_row, served_gbps, ops_per_copy, hit_share, run_ns_per_row;
	double hit_cpu_ns_per_row, served_cpu_gbps, hit_fp_ns_per_row;
	double capture_cpu_ns_per_row, hit_host_cpu_ns_per_row, device_cpu_ns_per_row;
	double whatif_bytes_per_row;
	uint64_t capture_clocks, hit_clocks;    /* clock reads inside the copies timed */
};

/* The baselines of one repetition. */
struct bench_base {
	double hash_ns_per_row, xxh3_gbps, memcpy_gbps;
	double hash_cpu_ns_per_row, xxh3_cpu_gbps, memcpy_cpu_gbps;
	double whatif_cpu_ns_per_row, whatif_later_cpu_ns_per_row, whatif_observed_bytes_per_row, clock_cpu_ns;
};

/* The program's own copy, as the interposer would forward it. */
struct bench_h2d {
	CUdeviceptr dst;
	const unsigned char *src;
	CUstream stream;
};

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time in nanoseconds. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The splitmix64 generator. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Prints name_min and name_median of n values (sorted in place). */
static void print_figure(const char *name, double *v, uint64_t n, const char *unit)
{
	qsort(v, n, sizeof(*v), cmp_double);
	printf("%s_min %.3f %s\n", name, v[0], unit);
	printf("%s_median %.3f %s\n", name, n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, unit);
}

/*
 * The device's time on the calling thread: inside the program's own copies
 * (the callbacks below) and the pool's byte-moving device calls (wrapped:
 * the Makefile links this benchmark with -Wl,--wrap for them); and the
 * clock reads those take (two each).
 */
static uint64_t dev_cpu, dev_clocks;

int __real_device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
			 dev_stream s);
int __wrap_device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
			 dev_stream s);
int __real_device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
				 dev_stream s);
int __wrap_device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
				 dev_stream s);

/* Counts the device's time since c0 (two clock reads) and passes ret on. */
static int dev_spent(uint64_t c0, int ret)
{
	dev_cpu += cpu_ns() - c0;
	dev_clocks += 2;
	return ret;
}

int __wrap_device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
			 dev_stream s)
{
	uint64_t c0 = cpu_ns();

	return dev_spent(c0, __real_device_gather(dev, dst, row, e, n, s));
}

int __wrap_device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
				 dev_stream s)
{
	uint64_t c0 = cpu_ns();

	return dev_spent(c0, __real_device_copy_dtod_many(dev, dsts, srcs, sizes, count, s));
}

static int bench_h2d_cb(void *arg, uint64_t off, uint64_t len)
{
	struct bench_h2d *h = arg;
	uint64_t c0 = cpu_ns();
	CUresult r = b_htod(h->dst + off, h->src + off, len, h->stream);

	return dev_spent(c0, r == CUDA_SUCCESS ? 0 : (int)r);
}

static int bench_h2d_sync_cb(void *arg, uint64_t off, uint64_t len)
{
	struct bench_h2d *h = arg;
	uint64_t c0 = cpu_ns();
	CUresult r = b_htod_sync(h->dst + off, h->src + off, len);

	return dev_spent(c0, r == CUDA_SUCCESS ? 0 : (int)r);
}

/* Fisher-Yates over order[0..n) with the generator at *s. */
static void shuffle(uint32_t *order, uint64_t n, uint64_t *s)
{
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = rng_next(s) % (i + 1);
		uint32_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
}

/* Gathers batch number k of the current order into buf; returns its rows. */
static uint64_t assemble(struct bench *b, uint64_t k, unsigned char *buf)
{
	uint64_t first = k * b->batch, n = b->samples - first < b->batch ? b->samples - first : b->batch;

	for (uint64_t i = 0; i < n; i++)
		memcpy(buf + i * b->row, b->data + (uint64_t)b->order[first + i] * b->row, b->row);
	return n;
}

/* Reads every ring slot back and compares it with its staging buffer. */
static int verify_ring(struct bench *b)
{
	if (b_sync(b->stream) != CUDA_SUCCESS)
		return -1;
	for (uint64_t s = 0; s < b->ring; s++) {
		if (!b->used[s])
			continue;
		if (b_dtoh(b->scratch, b->dev[s], b->used[s]) != CUDA_SUCCESS)
			return -1;
		b->verified++;
		if (memcmp(b->scratch, b->staging[s], b->used[s]) != 0)
			b->mismatches++;
		b->used[s] = 0;
	}
	return 0;
}

/* Reads the counters a run's figures come from. */
static void snapshot(uint64_t v[7])
{
	v[0] = stats_get(ST_TIME_SHIM_NS);
	v[1] = stats_get(ST_ROWS_SEEN);
	v[2] = stats_get(ST_ROWS_HITS);
	v[3] = stats_get(ST_BYTES_SERVED);
	v[4] = stats_get(ST_DEVICE_OPS);
	v[5] = stats_get(ST_MATCHED_CALLS);
	v[6] = stats_get(ST_TIME_FINGERPRINT_NS);
}

static const char *bench_env[8][2];

static const char *bench_getenv(const char *name)
{
	for (int i = 0; i < 8 && bench_env[i][0]; i++)
		if (strcmp(bench_env[i][0], name) == 0)
			return bench_env[i][1];
	return NULL;
}

/*
 * One run with threads fingerprint threads: a fresh pool, epoch 1 to fill
 * it, epochs 2..E of hits. Returns 0, or -1 after a device failure.
 */
static int bench_run(struct bench *b, unsigned threads, uint64_t seed, struct bench_run *out)
{
	char layout[64], budget[32], nthreads[16];
	uint64_t v0[7], v1[7], v2[7], slot = 0, s = seed;
	uint64_t nbatches = (b->samples + b->batch - 1) / b->batch, cpu = 0, cpu0 = 0, dev0 = 0, dev = 0;
	uint64_t clocks0 = 0, clocks = 0;
	static struct config cfg;

	snprintf(layout, sizeof(layout), "%s%llu", b->whole ? "whole:" : "", (unsigned long long)b->row);
	snprintf(budget, sizeof(budget), "%llu",
		 (unsigned long long)(b->samples * b->row + (b->samples * b->row) / 4 + (1u << 20)));
	snprintf(nthreads, sizeof(nthreads), "%u", threads);
	memset(bench_env, 0, sizeof(bench_env));
	bench_env[0][0] = "VRAMPOOL_LAYOUT";
	bench_env[0][1] = layout;
	bench_env[1][0] = "VRAMPOOL_BUDGET";
	bench_env[1][1] = budget;
	bench_env[2][0] = "VRAMPOOL_THREADS";
	bench_env[2][1] = nthreads;
	bench_env[3][0] = "VRAMPOOL_QUIET";
	bench_env[3][1] = "1";
	/* every row of epoch 1 a capture and of epochs 2..E a hit, even where the ledger would stand aside */
	bench_env[4][0] = "VRAMPOOL_LEDGER";
	bench_env[4][1] = "force";
	if (config_load(&cfg, bench_getenv)) {
		fprintf(stderr, "bench_shim: configuration refused (layout %s)\n", layout);
		return -1;
	}
	pool_shutdown();
	pool_setup(&cfg);
	stats_reset(1, cfg.layout.text);
	whatif_setup(cfg.whatif_mem);
	fingerprint_init(threads);

	for (uint64_t e = 0; e < b->epochs; e++) {
		if (e == 1)
			snapshot(v1);
		else if (e == 0)
			snapshot(v0);
		shuffle(b->order, b->samples, &s);
		for (uint64_t k = 0; k < nbatches; k++) {
			struct bench_h2d h;
			struct pool_request r;
			uint64_t n, c0, d0, k0;
			int err;

			if (b->used[slot] && verify_ring(b))
				return -1;
			n = assemble(b, k, b->staging[slot]) * b->row;
			h = (struct bench_h2d){ .dst = b->dev[slot], .src = b->staging[slot], .stream = b->stream };
			r = (struct pool_request){ .dst = b->dev[slot], .src = b->staging[slot], .n = n,
						   .row = b->whole ? n : b->row, .stream = b->stream,
						   .h2d = bench_h2d_cb, .h2d_sync = bench_h2d_sync_cb, .arg = &h };
			k0 = dev_clocks;
			c0 = cpu_ns();
			d0 = dev_cpu;
			err = pool_copy(pool_get(0, 0), &r);
			c0 = cpu_ns() - c0;
			*(e ? &cpu : &cpu0) += c0;
			*(e ? &dev : &dev0) += dev_cpu - d0;
			/* the two reads around the copy count one; each pair inside, one more */
			*(e ? &clocks : &clocks0) += 1 + (dev_clocks - k0) / 2;
			if (err) {
				fprintf(stderr, "bench_shim: the copy failed (%d)\n", err);
				return -1;
			}
			b->used[slot] = n;
			slot = (slot + 1) % b->ring;
		}
		if (verify_ring(b))
			return -1;
	}
	snapshot(v2);
	{
		double rows = (double)(v2[1] - v1[1]), copies = (double)(v2[5] - v1[5]);
		double shim = (double)(v2[0] - v1[0]);

		out->hit_ns_per_row = rows ? shim / rows : 0;
		out->served_gbps = shim ? (double)(v2[3] - v1[3]) / shim : 0;
		out->hit_cpu_ns_per_row = rows ? (double)cpu / rows : 0;
		out->hit_fp_ns_per_row = rows ? (double)(v2[6] - v1[6]) / rows : 0;
		out->served_cpu_gbps = cpu ? (double)(v2[3] - v1[3]) / (double)cpu : 0;
		out->ops_per_copy = copies ? (double)(v2[4] - v1[4]) / copies : 0;
		out->hit_share = rows ? (double)(v2[2] - v1[2]) / rows : 0;
		out->run_ns_per_row = v2[1] - v0[1] ? (double)(v2[0] - v0[0]) / (double)(v2[1] - v0[1]) : 0;
		out->capture_cpu_ns_per_row = (double)(cpu0 - dev0) / (double)(v1[1] - v0[1]);
		out->hit_host_cpu_ns_per_row = rows ? (double)(cpu - dev) / rows : 0;
		out->device_cpu_ns_per_row = rows ? (double)dev / rows : 0;
		out->capture_clocks = clocks0;
		out->hit_clocks = clocks;
	}
	{
		struct whatif_snapshot w;

		whatif_snapshot(&w, 0);
		out->whatif_bytes_per_row = (double)w.table_bytes / (double)b->samples;
	}
	return 0;
}

/*
 * CPU ns per row of reading the fingerprints in all batch by batch, and
 * when observe is set, of whatif_observe of each batch right after.
 */
static double whatif_epoch_ns(const struct bench *b, const struct fp *all, uint64_t rows, uint64_t *pos,
			      uint64_t *sink, int observe)
{
	uint64_t c0 = cpu_ns();

	for (uint64_t i = 0; i < rows; i += b->batch) {
		uint64_t n = rows - i < b->batch ? rows - i : b->batch, t = 0;

		/* the copy's fingerprints are in cache when the shim observes them */
		for (uint64_t j = 0; j < n; j++)
			t += all[i + j].lo ^ all[i + j].hi;
		*sink += t;
		if (observe) {
			whatif_observe(all + i, NULL, n, b->row, pos);
			*sink += pos[n - 1];
		}
	}
	return (double)(cpu_ns() - c0) / (double)rows;
}

/*
 * The what-if's cost per row: every row of one epoch of the same batches,
 * fingerprinted beforehand, observed batch by batch (as the capture epoch
 * feeds it), timed as a whole; and the cost of one clock read.
 */
static void bench_baseline_whatif(struct bench *b, uint64_t seed, struct bench_base *out)
{
	uint64_t nbatches = (b->samples + b->batch - 1) / b->batch, s = seed, rows = 0, c0, sink = 0;
	struct fp *all = malloc(b->samples * sizeof(*all));
	uint64_t *pos = malloc(b->batch * sizeof(*pos));

	out->whatif_cpu_ns_per_row = out->whatif_later_cpu_ns_per_row = 0;
	if (all && pos) {
		shuffle(b->order, b->samples, &s);
		for (uint64_t k = 0; k < nbatches; k++) {
			uint64_t n = assemble(b, k, b->staging[0]);

			fingerprint_rows(b->staging[0], b->row, b->whole ? 1 : n, all + rows);
			rows += b->whole ? 1 : n;
		}
		double touch;

		/* The fingerprints of a whole epoch stream from memory here, where the
		 * shim's come straight from its hash: that pass alone is taken off. */
		touch = whatif_epoch_ns(b, all, rows, pos, &sink, 0);
		whatif_reset();
		out->whatif_cpu_ns_per_row = whatif_epoch_ns(b, all, rows, pos, &sink, 1) - touch;
		/* a later epoch of the same rows: the table built, the rate settled */
		out->whatif_later_cpu_ns_per_row = whatif_epoch_ns(b, all, rows, pos, &sink, 1) - touch;
		{
			struct whatif_snapshot w;

			whatif_snapshot(&w, 0);
			out->whatif_observed_bytes_per_row = (double)w.table_bytes / (double)rows;
		}
		whatif_reset();
	}
	free(all);
	free(pos);
	c0 = cpu_ns();
	for (int i = 0; i < 1000; i++)
		sink += cpu_ns();
	out->clock_cpu_ns = (double)(cpu_ns() - c0) / 1001;
	__asm__ __volatile__("" : : "r"(sink));
}

/* The baselines over one epoch of the same batches, each freshly assembled. */
static void bench_baseline(struct bench *b, uint64_t seed, struct bench_base *out)
{
	uint64_t nbatches = (b->samples + b->batch - 1) / b->batch, s = seed;
	uint64_t wall[3] = { 0 }, cpu[3] = { 0 }, bytes = 0, rows = 0, sink = 0;

	fingerprint_init(1);
	shuffle(b->order, b->samples, &s);
	for (uint64_t k = 0; k < nbatches; k++) {
		uint64_t n = 0, t0, c0;
		struct fp x = { 0, 0 };

		/* Each measurement sees the batch just assembled, as pool_copy does. */
		for (int i = 0; i < 3; i++) {
			n = assemble(b, k, b->staging[0]);
			t0 = now_ns();
			c0 = cpu_ns();
			if (i == 0) {
				fingerprint_rows(b->staging[0], b->row, b->whole ? 1 : n, b->fps);
			} else if (i == 1) {
				x = fingerprint_one(b->staging[0], n * b->row);
			} else {
				memcpy(b->scratch, b->staging[0], n * b->row);
				__asm__ __volatile__("" : : "r"(b->scratch) : "memory");
			}
			wall[i] += now_ns() - t0;
			cpu[i] += cpu_ns() - c0;
		}
		sink += x.lo + b->fps[0].lo + b->scratch[n * b->row - 1];
		bytes += n * b->row;
		rows += b->whole ? 1 : n;
	}
	__asm__ __volatile__("" : : "r"(sink));
	out->hash_ns_per_row = (double)wall[0] / (double)rows;
	out->xxh3_gbps = (double)bytes / (double)wall[1];
	out->memcpy_gbps = (double)bytes / (double)wall[2];
	out->hash_cpu_ns_per_row = (double)cpu[0] / (double)rows;
	out->xxh3_cpu_gbps = (double)bytes / (double)cpu[1];
	out->memcpy_cpu_gbps = (double)bytes / (double)cpu[2];
	bench_baseline_whatif(b, seed, out);
}

/* Parses "1,2" into b->threads. Returns 0 or -1. */
static int parse_threads(struct bench *b, const char *s)
{
	char *end;

	b->nthreads = 0;
	do {
		unsigned long t = strtoul(s, &end, 10);

		if (end == s || t < 1 || t > 64 || b->nthreads == MAX_THREADS)
			return -1;
		b->threads[b->nthreads++] = (unsigned)t;
		s = end + (*end == ',');
	} while (*end == ',');
	return *end ? -1 : 0;
}

static const char usage[] =
	"usage: bench_shim [--row R] [--batch B] [--samples N] [--epochs E] [--reps K]\n"
	"                  [--threads T1,T2,...] [--ring D]\n"
	"                  [--stream legacy|ptds|nonblocking|blocking] [--whole]\n";

/* Parses the command line into b. Returns 0 or -1 (usage printed). */
static int parse_args(struct bench *b, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "row", required_argument, NULL, 'r' },
		{ "batch", required_argument, NULL, 'b' },
		{ "samples", required_argument, NULL, 'n' },
		{ "epochs", required_argument, NULL, 'e' },
		{ "reps", required_argument, NULL, 'k' },
		{ "threads", required_argument, NULL, 't' },
		{ "ring", required_argument, NULL, 'd' },
		{ "stream", required_argument, NULL, 's' },
		{ "whole", no_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*b = (struct bench){ .row = 3072, .batch = 256, .samples = 20000, .epochs = 4, .reps = 5,
			     .threads = { 1, 2 }, .nthreads = 2, .ring = 4, .stream_kind = "nonblocking" };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': b->row = strtoull(optarg, NULL, 0); break;
		case 'b': b->batch = strtoull(optarg, NULL, 0); break;
		case 'n': b->samples = strtoull(optarg, NULL, 0); break;
		case 'e': b->epochs = strtoull(optarg, NULL, 0); break;
		case 'k': b->reps = strtoull(optarg, NULL, 0); break;
		case 'd': b->ring = strtoull(optarg, NULL, 0); break;
		case 's': b->stream_kind = optarg; break;
		case 'w': b->whole = 1; break;
		case 't':
			if (parse_threads(b, optarg))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || !b->row || !b->batch || b->samples < b->batch || b->samples > UINT32_MAX ||
	    b->epochs < 2 || !b->reps || b->reps > MAX_REPS || !b->ring || (b->whole && b->batch != 1))
		goto usage;
	if (strcmp(b->stream_kind, "legacy") && strcmp(b->stream_kind, "ptds") &&
	    strcmp(b->stream_kind, "nonblocking") && strcmp(b->stream_kind, "blocking"))
		goto usage;
	return 0;
usage:
	fputs(usage, stderr);
	return -1;
}

/* Loads the driver's entry points and makes the primary context current. */
static int open_device(void)
{
	__typeof__(cuInit) *init;
	__typeof__(cuDevicePrimaryCtxRetain) *retain;
	__typeof__(cuCtxSetCurrent) *setctx;
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUcontext ctx;

	if (!h)
		return -1;
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&b_htod = dlsym(h, "cuMemcpyHtoDAsync_v2");
	*(void **)&b_htod_sync = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&b_dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&b_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&b_free = dlsym(h, "cuMemFree_v2");
	*(void **)&b_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&b_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&b_stream_destroy = dlsym(h, "cuStreamDestroy_v2");
	if (!init || !retain || !setctx || !b_htod || !b_htod_sync || !b_dtoh || !b_alloc || !b_free ||
	    !b_sync || !b_stream_create || !b_stream_destroy)
		return -1;
	if (init(0) || retain(&ctx, 0) || setctx(ctx) || device_open())
		return -1;
	return 0;
}

/* Allocates the dataset (seeded, every row distinct), the rings and the stream. */
static int bench_init(struct bench *b)
{
	uint64_t s = 0x5eed, bytes = b->batch * b->row;

	b->data = malloc(b->samples * b->row);
	b->staging = calloc(b->ring, sizeof(*b->staging));
	b->dev = calloc(b->ring, sizeof(*b->dev));
	b->used = calloc(b->ring, sizeof(*b->used));
	b->scratch = malloc(bytes);
	b->order = malloc(b->samples * sizeof(*b->order));
	b->fps = malloc(b->batch * sizeof(*b->fps));
	if (!b->data || !b->staging || !b->dev || !b->used || !b->scratch || !b->order || !b->fps)
		return -1;
	for (uint64_t i = 0; i < b->samples * b->row; i += 8) {
		uint64_t v = rng_next(&s), left = b->samples * b->row - i;

		memcpy(b->data + i, &v, left < 8 ? left : 8);
	}
	for (uint64_t i = 0; i < b->samples; i++) {
		uint32_t id = (uint32_t)i;

		b->order[i] = id;
		memcpy(b->data + i * b->row, &id, b->row < sizeof(id) ? b->row : sizeof(id));
	}
	for (uint64_t i = 0; i < b->ring; i++) {
		b->staging[i] = malloc(bytes);
		if (!b->staging[i] || b_alloc(&b->dev[i], bytes) != CUDA_SUCCESS)
			return -1;
	}
	if (!strcmp(b->stream_kind, "legacy"))
		b->stream = NULL;
	else if (!strcmp(b->stream_kind, "ptds"))
		b->stream = CU_STREAM_PER_THREAD;
	else if (b_stream_create(&b->stream, strcmp(b->stream_kind, "nonblocking") ? 0 : CU_STREAM_NON_BLOCKING))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench_run runs[MAX_THREADS][MAX_REPS];
	static struct bench_base base[MAX_REPS];
	struct bench b;
	double v[MAX_REPS];
	char name[64];
	int t1 = -1, t2 = -1;

	if (parse_args(&b, argc, argv))
		return 2;
	if (open_device() || bench_init(&b)) {
		fprintf(stderr, "bench_shim: no emulated device or no memory (LD_LIBRARY_PATH=build/fakecuda?)\n");
		return 3;
	}
	printf("# bench_shim: %llu rows of %llu B (%s), batch %llu, %llu epochs, %llu repetitions, "
	       "stream %s, pageable staging ring of %llu\n",
	       (unsigned long long)b.samples, (unsigned long long)b.row, b.whole ? "whole" : "rows",
	       (unsigned long long)b.batch, (unsigned long long)b.epochs, (unsigned long long)b.reps,
	       b.stream_kind, (unsigned long long)b.ring);
	for (uint64_t r = 0; r < b.reps; r++) {
		for (unsigned i = 0; i < b.nthreads; i++) {
			unsigned k = r % 2 ? b.nthreads - 1 - i : i;

			if (bench_run(&b, b.threads[k], 1000 + r, &runs[k][r])) {
				fprintf(stderr, "bench_shim: a device call failed\n");
				return 3;
			}
		}
		bench_baseline(&b, 1000 + r, &base[r]);
	}
	for (unsigned i = 0; i < b.nthreads; i++) {
		unsigned t = b.threads[i];

		if (t == 1)
			t1 = (int)i;
		if (t == 2)
			t2 = (int)i;
#define FIGURE(what, unit, expr)						\
		do {								\
			for (uint64_t r = 0; r < b.reps; r++) {			\
				const struct bench_run *x = &runs[i][r];	\
				const struct bench_base *y = &base[r];		\
				v[r] = (expr);					\
				(void)x;					\
				(void)y;					\
			}							\
			snprintf(name, sizeof(name), "t%u_%s", t, what);	\
			print_figure(name, v, b.reps, unit);			\
		} while (0)
		FIGURE("hit_ns_per_row", "ns", x->hit_ns_per_row);
		FIGURE("hit_minus_hash_ns", "ns", x->hit_ns_per_row - y->hash_ns_per_row);
		FIGURE("hit_fp_ns_per_row", "ns", x->hit_fp_ns_per_row);
		FIGURE("hit_rest_ns_per_row", "ns", x->hit_ns_per_row - x->hit_fp_ns_per_row);
		FIGURE("served_gbps", "GB/s", x->served_gbps);
		FIGURE("served_per_xxh3", "x", x->served_gbps / y->xxh3_gbps);
		FIGURE("served_per_memcpy", "x", x->served_gbps / y->memcpy_gbps);
		FIGURE("ops_per_copy", "ops", x->ops_per_copy);
		FIGURE("hit_share", "", x->hit_share);
		FIGURE("run_ns_per_row", "ns", x->run_ns_per_row);
		FIGURE("hit_cpu_ns_per_row", "ns", x->hit_cpu_ns_per_row);
		FIGURE("hit_cpu_minus_hash_ns", "ns", x->hit_cpu_ns_per_row - y->hash_cpu_ns_per_row);
		FIGURE("served_cpu_per_xxh3", "x", x->served_cpu_gbps / y->xxh3_cpu_gbps);
		FIGURE("served_cpu_per_memcpy", "x", x->served_cpu_gbps / y->memcpy_cpu_gbps);
		FIGURE("capture_cpu_ns_per_row", "ns", x->capture_cpu_ns_per_row -
		       y->clock_cpu_ns * (double)x->capture_clocks / (double)b.samples);
		FIGURE("capture_cpu_minus_hash_ns", "ns", x->capture_cpu_ns_per_row -
		       y->clock_cpu_ns * (double)x->capture_clocks / (double)b.samples - y->hash_cpu_ns_per_row);
		FIGURE("hit_host_cpu_ns_per_row", "ns", x->hit_host_cpu_ns_per_row -
		       y->clock_cpu_ns * (double)x->hit_clocks / (double)(b.samples * (b.epochs - 1)));
		FIGURE("hit_host_cpu_minus_hash_ns", "ns", x->hit_host_cpu_ns_per_row -
		       y->clock_cpu_ns * (double)x->hit_clocks / (double)(b.samples * (b.epochs - 1)) -
		       y->hash_cpu_ns_per_row);
		FIGURE("device_cpu_ns_per_row", "ns", x->device_cpu_ns_per_row);
		FIGURE("whatif_bytes_per_row", "B", x->whatif_bytes_per_row);
#undef FIGURE
	}
#define BASE_FIGURE(field, unit)						\
	do {								\
		for (uint64_t r = 0; r < b.reps; r++)			\
			v[r] = base[r].field;				\
		print_figure(#field, v, b.reps, unit);			\
	} while (0)
	BASE_FIGURE(hash_ns_per_row, "ns");
	BASE_FIGURE(xxh3_gbps, "GB/s");
	BASE_FIGURE(memcpy_gbps, "GB/s");
	BASE_FIGURE(hash_cpu_ns_per_row, "ns");
	BASE_FIGURE(whatif_cpu_ns_per_row, "ns");
	BASE_FIGURE(whatif_later_cpu_ns_per_row, "ns");
	BASE_FIGURE(whatif_observed_bytes_per_row, "B");
	BASE_FIGURE(clock_cpu_ns, "ns");
#undef BASE_FIGURE
	if (t1 >= 0 && t2 >= 0) {
		for (uint64_t r = 0; r < b.reps; r++)
			v[r] = runs[t2][r].served_gbps / runs[t1][r].served_gbps;
		print_figure("t2_per_t1", v, b.reps, "x");
	}
	printf("verified %s %llu\n", b.mismatches ? "FAILED" : "ok", (unsigned long long)b.verified);
	return b.mismatches ? 1 : 0;
}
