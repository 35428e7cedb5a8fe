/*
 * dltest: what production interposers that hook dlsym have broken, each as
 * a case that prints what it found, reduced to text without addresses, so
 * that its output is the same with and without a preloaded library that
 * is as invisible as it must be (tests/e2e/dlsym.sh compares the two).
 *
 * The cases come from the issue trackers of HAMi-core, DMTCP, GOTCHA,
 * libfabric and the like: dlsym(RTLD_NEXT) answered relative to the hook
 * instead of the caller (a library asking for the definition after its
 * own got its own back and recursed), RTLD_DEFAULT from a local scope,
 * look-ups from constructors while the loader holds its lock (deadlock at
 * `import torch`), RTLD_DEEPBIND libraries, a library of its own exporting
 * CUDA-named functions (HAMi-core answered its look-ups with the global
 * definitions), concurrent first calls, cuGetProcAddress before cuInit
 * and with unknown version numbers, dlvsym on the driver's handle.
 *
 * usage: dltest [CASE...]   (no CASE: every case, each in a child process)
 *        dltest --list
 * Exit: 0 when every case ran to its end (what it found is in its output,
 * for the caller to compare), 1 when a case failed outright, 2 bad usage.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DLT_THREADS 16

typedef char dlt_letter_fn(void);
typedef const char *dlt_report_fn(void);

/* The linked libraries' functions (libdlt_a.so, libdlt_b.so). */
char dlt_layered(void);
char dlt_a_next(void);
char dlt_b_next(void);
const char *dlt_a_ctor_report(void);

/* The program's own definition, exported (-rdynamic): the first one. */
char dlt_layered(void)
{
	return 'P';
}

/* A function's address as an object pointer (dlsym's currency). */
__attribute__((unused)) static void *dlt_fnaddr(void (*f)(void))
{
	void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

#define DLT_FN(f) dlt_fnaddr((void (*)(void))(f))

/* The letter a found dlt_layered-like function returns, '-' when not found. */
static char dlt_call(void *f)
{
	dlt_letter_fn *fn;

	if (!f)
		return '-';
	memcpy(&fn, &f, sizeof(f));
	return fn();
}

/* The directory of this program, for the libraries beside it. */
static char dlt_dir[PATH_MAX];

/* dlopen()s a library beside this program. */
static void *dlt_open(const char *name, int flags)
{
	char path[PATH_MAX + 64];
	void *h;

	snprintf(path, sizeof(path), "%s/%s", dlt_dir, name);
	h = dlopen(path, flags);
	if (!h)
		printf("dlopen %s: failed: %s\n", name, dlerror());
	return h;
}

/* Prints "same" or "different" for two addresses. */
static const char *dlt_same(const void *a, const void *b)
{
	return !a ? "missing" : a == b ? "same" : "different";
}

/* ---- the cases ---- */

/*
 * RTLD_NEXT from the program and from each library finds the definition
 * after the caller: program -> A -> B -> none.
 */
static int dlt_case_next(void)
{
	printf("program next %c\n", dlt_call(dlsym(RTLD_NEXT, "dlt_layered")));
	printf("libdlt_a next %c\n", dlt_a_next());
	printf("libdlt_b next %c\n", dlt_b_next());
	printf("program default %c\n", dlt_call(dlsym(RTLD_DEFAULT, "dlt_layered")));
	printf("program next fopen %s\n", dlt_same(dlsym(RTLD_NEXT, "fopen"), DLT_FN(fopen)));
	printf("program next malloc %s\n", dlt_same(dlsym(RTLD_NEXT, "malloc"), DLT_FN(malloc)));
	printf("program next no_such_symbol %s\n",
	       dlsym(RTLD_NEXT, "dlt_no_such_symbol") ? "found" : "none");
	printf("program next cudaMalloc %s\n", dlsym(RTLD_NEXT, "cudaMalloc") ? "found" : "none");
	printf("program next dlsym %s\n", dlsym(RTLD_NEXT, "dlsym") ? "found" : "none");
	return 0;
}

/* What libdlt_a's constructor found when the program was loaded. */
static int dlt_case_needed_ctor(void)
{
	printf("libdlt_a constructor: %s\n", dlt_a_ctor_report());
	return 0;
}

/* Look-ups from the constructor of a library loaded with dlopen. */
static int dlt_case_dlopen_ctor(void)
{
	static const int modes[] = { RTLD_NOW | RTLD_LOCAL, RTLD_LAZY | RTLD_GLOBAL };

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		void *h = dlt_open("libdlt_ctor.so", modes[i]);
		dlt_report_fn *report;

		if (!h)
			return 1;
		*(void **)&report = dlsym(h, "dlt_ctor_report");
		printf("libdlt_ctor %s constructor: %s\n", i ? "global" : "local",
		       report ? report() : "no report");
		printf("libdlt_ctor own via handle %c\n", dlt_call(dlsym(h, "dlt_ctor_own")));
		dlclose(h);
	}
	return 0;
}

/* A library bound with RTLD_DEEPBIND looks up its own and the C library's symbols. */
static int dlt_case_deepbind(void)
{
	void *h = dlt_open("libdlt_deep.so", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	dlt_report_fn *report;

	if (!h)
		return 1;
	*(void **)&report = dlsym(h, "dlt_deep_report");
	printf("libdlt_deep: %s\n", report ? report() : "no report");
	printf("libdlt_deep layered via handle %c\n", dlt_call(dlsym(h, "dlt_layered")));
	printf("program default after deepbind %c\n", dlt_call(dlsym(RTLD_DEFAULT, "dlt_layered")));
	dlclose(h);
	return 0;
}

/*
 * Prints whether a look-up of name on handle found something and whether
 * dlerror then says why not (it must, after a miss, and once only).
 */
static void dlt_miss(const char *what, void *handle, const char *name)
{
	void *f;
	const char *err;

	dlerror();
	f = dlsym(handle, name);
	err = dlerror();
	printf("%s %s dlerror %s\n", what, f ? "found" : "none", err ? "set" : "clear");
}

/* dlsym and dlvsym on the C and maths libraries, and dlerror after a miss. */
static int dlt_case_libc(void)
{
	static const char *const glibc_versions[] = { "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0" };
	void *libm = dlopen("libm.so.6", RTLD_NOW);
	void *libc = dlopen("libc.so.6", RTLD_NOW);
	double (*cosine)(double) = NULL;
	void *vcos = NULL;
	volatile double x = 0.5;

	if (!libm || !libc) {
		printf("dlopen libm/libc failed\n");
		return 1;
	}
	*(void **)&cosine = dlsym(libm, "cos");
	printf("libm cos %s value %s\n", dlt_same(DLT_FN(cosine), DLT_FN(cos)),
	       cosine && cosine(x) == cos(x) ? "equal" : "different");
	for (size_t i = 0; !vcos && i < sizeof(glibc_versions) / sizeof(glibc_versions[0]); i++)
		vcos = dlvsym(libm, "cos", glibc_versions[i]);
	printf("libm dlvsym cos %s\n", dlt_same(vcos, DLT_FN(cos)));
	printf("libm dlvsym cos NOPE_1.0 %s\n", dlvsym(libm, "cos", "NOPE_1.0") ? "found" : "none");
	printf("libc fopen %s\n", dlt_same(dlsym(libc, "fopen"), DLT_FN(fopen)));
	printf("libc strlen %s\n", dlt_same(dlsym(libc, "strlen"), DLT_FN(strlen)));
	printf("default getpid %s\n", dlt_same(dlsym(RTLD_DEFAULT, "getpid"), DLT_FN(getpid)));
	dlt_miss("libc no_such_symbol", libc, "dlt_no_such_symbol");
	printf("dlerror after read %s\n", dlerror() ? "set" : "clear");
	dlt_miss("default no_such_symbol", RTLD_DEFAULT, "dlt_no_such_symbol");
	dlt_miss("next no_such_symbol", RTLD_NEXT, "dlt_no_such_symbol");
	dlt_miss("libc cuda-named miss", libc, "cuMemcpyHtoD_v2");
	dlt_miss("libm cuda-named miss", libm, "cudaMemcpyAsync");
	dlclose(libm);
	dlclose(libc);
	return 0;
}

/* A library of its own with CUDA-named functions: its handle finds them. */
static int dlt_case_foreign_cu(void)
{
	void *h = dlt_open("libdlt_cu.so", RTLD_NOW | RTLD_LOCAL);
	CUresult (*htod)(CUdeviceptr, const void *, size_t) = NULL;
	cudaError_t (*copy)(void *, const void *, size_t, enum cudaMemcpyKind) = NULL;
	CUresult (*gpa)(const char *, void **, int, cuuint64_t,
			CUdriverProcAddressQueryResult *) = NULL;
	void *fn = &fn;

	if (!h)
		return 1;
	*(void **)&htod = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&copy = dlsym(h, "cudaMemcpy");
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	printf("libdlt_cu cuMemcpyHtoD_v2 returns %d\n", htod ? (int)htod(0, NULL, 0) : -1);
	printf("libdlt_cu cudaMemcpy returns %d\n",
	       copy ? (int)copy(NULL, NULL, 0, cudaMemcpyHostToDevice) : -1);
	printf("libdlt_cu cuGetProcAddress_v2 returns %d\n",
	       gpa ? (int)gpa("cuInit", &fn, 12000, 0, NULL) : -1);
	*(void **)&htod = dlvsym(h, "cuMemcpyHtoD_v2", "libcuda.so.1");
	printf("libdlt_cu dlvsym libcuda.so.1 %s\n", htod ? "found" : "none");
	dlclose(h);
	return 0;
}

/* The driver's lookups before cuInit, for known and unknown versions. */
static int dlt_case_getproc(void)
{
	static const char *const names[] = {
		"cuInit", "cuMemcpyHtoDAsync", "cuMemcpyHtoD", "cuMemAlloc",
		"cuStreamGetCaptureInfo", "cuMemAllocAsync", "cuMemcpyBatchAsync",
		"cuGetProcAddress", "cuDltNoSuchFunction",
	};
	static const int versions[] = { 0, 3020, 11000, 11020, 12000, 12030, 13000, 99999 };
	static const cuuint64_t flags[] = {
		CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
		CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*gpa4)(const char *, void **, int, cuuint64_t);
	CUresult (*init)(unsigned) = NULL;
	CUresult (*dev_get)(CUdevice *, int) = NULL;
	CUresult (*retain)(CUcontext *, CUdevice) = NULL;
	CUresult (*set)(CUcontext) = NULL;
	CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
	CUresult (*mfree)(CUdeviceptr) = NULL;
	CUresult (*htod)(CUdeviceptr, const void *, size_t) = NULL;
	CUresult (*dtoh)(void *, CUdeviceptr, size_t) = NULL;
	CUresult (*nested)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = NULL;
	unsigned char up[4096], down[4096];
	CUdriverProcAddressQueryResult st;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr d;
	CUresult rc;
	void *fn;
	int ok;

	if (!h) {
		printf("dlopen libcuda.so.1 failed\n");
		return 1;
	}
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	*(void **)&gpa4 = dlsym(h, "cuGetProcAddress");
	if (!gpa || !gpa4) {
		printf("no cuGetProcAddress\n");
		return 1;
	}
	for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
		for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
			for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
				fn = NULL;
				st = (CUdriverProcAddressQueryResult)-1;
				rc = gpa(names[n], &fn, versions[v], flags[f], &st);
				printf("getproc %s %d %llu: rc %d status %d %s", names[n],
				       versions[v], (unsigned long long)flags[f], (int)rc, (int)st,
				       fn ? "pointer" : "null");
				fn = NULL;
				rc = gpa4(names[n], &fn, versions[v], flags[f]);
				printf(" | legacy rc %d %s\n", (int)rc, fn ? "pointer" : "null");
			}
		}
	}
	/* Entry points taken before cuInit work after it. */
	ok = gpa("cuInit", (void **)&init, 13000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuDeviceGet", (void **)&dev_get, 13000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 13000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuCtxSetCurrent", (void **)&set, 13000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuMemAlloc", (void **)&alloc, 99999, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuMemFree", (void **)&mfree, 12000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuMemcpyHtoD", (void **)&htod, 99999, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuMemcpyDtoH", (void **)&dtoh, 12000, 0, &st) == CUDA_SUCCESS &&
	     gpa("cuGetProcAddress", (void **)&nested, 12000, 0, &st) == CUDA_SUCCESS;
	printf("resolved before cuInit: %s\n", ok ? "all" : "not all");
	if (!ok)
		return 1;
	printf("cuInit %d\n", (int)init(0));
	printf("cuDeviceGet %d\n", (int)dev_get(&dev, 0));
	printf("cuDevicePrimaryCtxRetain %d\n", (int)retain(&ctx, dev));
	printf("cuCtxSetCurrent %d\n", (int)set(ctx));
	fn = NULL;
	rc = nested("cuMemAlloc", &fn, 12000, 0, &st);
	printf("nested getproc cuMemAlloc %d %s\n", (int)rc, fn ? "pointer" : "null");
	for (size_t i = 0; i < sizeof(up); i++)
		up[i] = (unsigned char)(i * 7 + 3);
	memset(down, 0, sizeof(down));
	printf("cuMemAlloc %d\n", (int)alloc(&d, sizeof(up)));
	printf("cuMemcpyHtoD %d\n", (int)htod(d, up, sizeof(up)));
	printf("cuMemcpyDtoH %d\n", (int)dtoh(down, d, sizeof(down)));
	printf("bytes %s\n", memcmp(up, down, sizeof(up)) ? "differ" : "verified");
	printf("cuMemFree %d\n", (int)mfree(d));
	/* The runtime's lookups answer through the same table. */
	for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
		enum cudaDriverEntryPointQueryResult q = (enum cudaDriverEntryPointQueryResult)-1;
		cudaError_t rc;

		fn = NULL;
		rc = cudaGetDriverEntryPointByVersion("cuMemcpyHtoDAsync", &fn,
						      (unsigned)versions[v], cudaEnableDefault, &q);
		printf("entrypoint cuMemcpyHtoDAsync %d: rc %d status %d %s\n", versions[v],
		       (int)rc, (int)q, fn ? "pointer" : "null");
	}
	return 0;
}

/* dlvsym on the driver's and the runtime's handles. */
static int dlt_case_dlvsym(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*init)(unsigned) = NULL;
	cudaError_t (*rt_malloc)(void **, size_t);
	cudaError_t (*rt_free)(void *);
	CUdriverProcAddressQueryResult st;
	void *p = NULL;

	if (!h || !rt) {
		printf("dlopen failed\n");
		return 1;
	}
	*(void **)&gpa = dlvsym(h, "cuGetProcAddress_v2", "libcuda.so.1");
	printf("dlvsym cuGetProcAddress_v2 libcuda.so.1 %s\n", gpa ? "found" : "none");
	printf("dlvsym cuMemAlloc_v2 libcuda.so.1 %s\n",
	       dlvsym(h, "cuMemAlloc_v2", "libcuda.so.1") ? "found" : "none");
	printf("dlvsym cuMemAlloc_v2 NOPE_1.0 %s\n",
	       dlvsym(h, "cuMemAlloc_v2", "NOPE_1.0") ? "found" : "none");
	printf("dlvsym cuMemcpyHtoDAsync_v2 libcuda.so.1 %s\n",
	       dlvsym(h, "cuMemcpyHtoDAsync_v2", "libcuda.so.1") ? "found" : "none");
	if (gpa) {
		printf("cuInit lookup %d\n", (int)gpa("cuInit", (void **)&init, 12000, 0, &st));
		printf("cuInit %d\n", init ? (int)init(0) : -1);
	}
	*(void **)&rt_malloc = dlvsym(rt, "cudaMalloc", "libcudart.so.13");
	*(void **)&rt_free = dlvsym(rt, "cudaFree", "libcudart.so.13");
	printf("dlvsym cudaMalloc libcudart.so.13 %s\n", rt_malloc ? "found" : "none");
	if (rt_malloc && rt_free) {
		printf("cudaMalloc %d\n", (int)rt_malloc(&p, 1 << 20));
		printf("cudaFree %d\n", (int)rt_free(p));
	}
	dlclose(rt);
	dlclose(h);
	return 0;
}

/* One of the threads of the concurrency case. */
struct dlt_thread {
	pthread_barrier_t *start;
	unsigned index;
	int ok;
};

/*
 * Released with the others at once: takes the driver's lookup from a
 * handle and uses it, then makes its first runtime calls: an allocation,
 * a copy there and back, verified.
 */
static void *dlt_thread_main(void *arg)
{
	struct dlt_thread *t = arg;
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*init)(unsigned) = NULL;
	CUdriverProcAddressQueryResult st;
	unsigned char up[8192], down[8192];
	void *h, *d = NULL;
	int ok = 1;

	for (size_t i = 0; i < sizeof(up); i++)
		up[i] = (unsigned char)(i * 13 + t->index);
	pthread_barrier_wait(t->start);
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	*(void **)&gpa = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
	ok &= gpa && gpa("cuInit", (void **)&init, 13000, 0, &st) == CUDA_SUCCESS &&
	      init && init(0) == CUDA_SUCCESS;
	ok &= cudaMalloc(&d, sizeof(up)) == cudaSuccess;
	ok &= ok && cudaMemcpy(d, up, sizeof(up), cudaMemcpyHostToDevice) == cudaSuccess;
	ok &= ok && cudaMemcpy(down, d, sizeof(down), cudaMemcpyDeviceToHost) == cudaSuccess;
	ok &= ok && !memcmp(up, down, sizeof(up));
	if (d)
		ok &= cudaFree(d) == cudaSuccess;
	if (h)
		dlclose(h);
	t->ok = ok;
	return NULL;
}

/* 16 threads make their first CUDA calls, driver and runtime, at once. */
static int dlt_case_threads(void)
{
	pthread_barrier_t start;
	pthread_t th[DLT_THREADS];
	struct dlt_thread t[DLT_THREADS];
	unsigned ok = 0;

	pthread_barrier_init(&start, NULL, DLT_THREADS);
	for (unsigned i = 0; i < DLT_THREADS; i++) {
		t[i] = (struct dlt_thread){ .start = &start, .index = i };
		if (pthread_create(&th[i], NULL, dlt_thread_main, &t[i])) {
			printf("pthread_create failed\n");
			_exit(1);
		}
	}
	for (unsigned i = 0; i < DLT_THREADS; i++) {
		pthread_join(th[i], NULL);
		ok += t[i].ok;
	}
	pthread_barrier_destroy(&start);
	printf("threads %u ok %u\n", DLT_THREADS, ok);
	return ok == DLT_THREADS ? 0 : 1;
}

/* ---- the table of cases ---- */

static const struct {
	const char *name;
	int (*run)(void);
} dlt_cases[] = {
	{ "next", dlt_case_next },
	{ "needed-ctor", dlt_case_needed_ctor },
	{ "dlopen-ctor", dlt_case_dlopen_ctor },
	{ "deepbind", dlt_case_deepbind },
	{ "libc", dlt_case_libc },
	{ "foreign-cu", dlt_case_foreign_cu },
	{ "getproc", dlt_case_getproc },
	{ "dlvsym", dlt_case_dlvsym },
	{ "threads", dlt_case_threads },
};

#define DLT_NCASES (sizeof(dlt_cases) / sizeof(dlt_cases[0]))

/* Runs case i in this process. Returns its status. */
static int dlt_run(size_t i)
{
	int status;

	printf("== %s\n", dlt_cases[i].name);
	status = dlt_cases[i].run();
	printf("== %s end %d\n", dlt_cases[i].name, status);
	fflush(stdout);
	return status;
}

/* Runs case i in a child process (a fresh CUDA state). Returns its status. */
static int dlt_run_child(size_t i)
{
	pid_t pid;
	int ws;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(dlt_run(i));
	if (waitpid(pid, &ws, 0) != pid)
		return 1;
	if (!WIFEXITED(ws)) {
		printf("== %s killed by signal %d\n", dlt_cases[i].name,
		       WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
		return 1;
	}
	return WEXITSTATUS(ws);
}

int main(int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", dlt_dir, sizeof(dlt_dir) - 1);
	char *slash;
	int status = 0;

	if (n <= 0) {
		fprintf(stderr, "dltest: cannot read /proc/self/exe\n");
		return 1;
	}
	dlt_dir[n] = '\0';
	slash = strrchr(dlt_dir, '/');
	if (slash)
		*slash = '\0';
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < DLT_NCASES; i++)
			printf("%s\n", dlt_cases[i].name);
		return 0;
	}
	if (argc == 1) {
		for (size_t i = 0; i < DLT_NCASES; i++)
			status |= dlt_run_child(i) != 0;
		return status;
	}
	for (int a = 1; a < argc; a++) {
		size_t i = 0;

		while (i < DLT_NCASES && strcmp(dlt_cases[i].name, argv[a]))
			i++;
		if (i == DLT_NCASES) {
			fprintf(stderr, "dltest: no case '%s' (dltest --list)\n", argv[a]);
			return 2;
		}
		status |= dlt_run(i) != 0;
	}
	return status;
}
