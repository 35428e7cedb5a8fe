/*
 * fingerprint_hash: keyed XXH3-128 of rows, the hashing that every
 * fingerprint of the shim goes through (fingerprint_hash.h is the contract;
 * this comment says how).
 *
 * The secrets come from getrandom(2), /dev/urandom, or at worst the clock,
 * the pid and an address (fp_random_bytes): never fatal to the host
 * program. The kernels are XXH3's, inlined here (XXH_INLINE_ALL) so that
 * the loop over rows and the hash of each row compile into one function.
 * Nothing here starts a thread or calls into fingerprint.c.
 */
#include "pool/fingerprint_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/clock.h"

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

static unsigned char fp_row_secret[FP_SECRET_SIZE];
static unsigned char fp_tree_secret[FP_SECRET_SIZE];
static atomic_int fp_ready;                /* secrets generated */
static int fp_avx2;                        /* use the AVX2 kernels */
static pthread_mutex_t fp_init_lock = PTHREAD_MUTEX_INITIALIZER;

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
	mix[0] = clock_now_ns();
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

/* The top level of a tree row: its chunk digests, then its length. */
struct fp fp_hash_tree_top(const struct fp *digests, uint64_t nchunks, uint64_t len)
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

void fp_hash_prepare(void)
{
	fp_ensure_secret();
}

void fp_hash_rows(const unsigned char *src, uint64_t row, uint64_t nrows, struct fp *out)
{
	if (row > FP_CHUNK) {
		for (uint64_t r = 0; r < nrows; r++)
			out[r] = fp_hash_row(src + r * row, row);
		return;
	}
	/* The common case, and every task of a row job: no tree test per row. */
	for (uint64_t r = 0; r < nrows; r++)
		out[r] = fp_hash_flat(src + r * row, row);
}

struct fp fp_hash_chunk(const unsigned char *p, uint64_t len)
{
	return fp_hash_flat(p, len);
}

void fp_hash_atfork_child(void)
{
	pthread_mutex_init(&fp_init_lock, NULL);
}

struct fp fingerprint_one(const void *src, uint64_t len)
{
	fp_ensure_secret();
	return fp_hash_row(src, len);
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
