/*
 * dltlib: the small libraries dltest loads, one source built several ways
 * (DLT_ROLE_*), each exercising the dynamic linker where interposers that
 * hook dlsym have broken it (HAMi-core, DMTCP, GOTCHA and others): look-ups
 * whose answer depends on who asks (RTLD_NEXT, RTLD_DEFAULT from a local
 * scope), look-ups made while the loader runs constructors, libraries
 * bound with RTLD_DEEPBIND, and libraries that export CUDA-named functions
 * of their own.
 *
 * Every answer is reduced to text without addresses (which function was
 * found, as the letter it returns; whether two lookups agree), so dltest's
 * output is the same with and without a preloaded library when that
 * library is invisible, as it must be.
 *
 * Roles:
 *  DLT_ROLE_A     libdlt_a.so, linked into dltest before libdlt_b.so:
 *                 dlt_layered() is 'A'; its constructor looks up at load
 *                 time (possibly before a preloaded library's constructor)
 *  DLT_ROLE_B     libdlt_b.so: dlt_layered() is 'B', the last definition
 *  DLT_ROLE_CTOR  libdlt_ctor.so, opened with dlopen: look-ups from its
 *                 constructor, while the loader holds its lock
 *  DLT_ROLE_DEEP  libdlt_deep.so, opened with RTLD_DEEPBIND: dlt_layered()
 *                 is 'D'; looks up its own and the C library's symbols
 *  DLT_ROLE_CU    libdlt_cu.so: not CUDA, but exports functions named
 *                 cuMemcpyHtoD_v2, cudaMemcpy and cuGetProcAddress_v2
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define DLT_API __attribute__((visibility("default")))

typedef char dlt_letter_fn(void);

/* A function's address as an object pointer (dlsym's currency). */
__attribute__((unused)) static void *dlt_fnaddr(void (*f)(void))
{
	void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

#define DLT_FN(f) dlt_fnaddr((void (*)(void))(f))

/* The letter a found dlt_layered-like function returns, '-' when not found. */
__attribute__((unused)) static char dlt_call(void *f)
{
	dlt_letter_fn *fn;

	if (!f)
		return '-';
	memcpy(&fn, &f, sizeof(f));
	return fn();
}

/* Whether the driver's lookup entry point can be taken from a libcuda handle. */
__attribute__((unused)) static const char *dlt_cuda_lookup(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	const char *answer;

	if (!h)
		return "no-libcuda";
	answer = dlsym(h, "cuGetProcAddress_v2") && dlsym(h, "cuInit") ? "found" : "missing";
	dlclose(h);
	return answer;
}

#if defined(DLT_ROLE_A) || defined(DLT_ROLE_B)

#ifdef DLT_ROLE_A
#define DLT_LETTER 'A'
#define DLT_NEXT dlt_a_next
#else
#define DLT_LETTER 'B'
#define DLT_NEXT dlt_b_next
#endif

DLT_API char dlt_layered(void);
DLT_API char DLT_NEXT(void);

DLT_API char dlt_layered(void)
{
	return DLT_LETTER;
}

/* The definition after this library's, as RTLD_NEXT finds it from here. */
DLT_API char DLT_NEXT(void)
{
	return dlt_call(dlsym(RTLD_NEXT, "dlt_layered"));
}

#endif

#ifdef DLT_ROLE_A
DLT_API const char *dlt_a_ctor_report(void);

static char dlt_a_report[256];

/*
 * Runs when dltest is loaded, before main and possibly before a preloaded
 * library's own constructor.
 */
__attribute__((constructor)) static void dlt_a_ctor(void)
{
	/* In this order: the first look-up may be a dlsym hook's first call. */
	char next = dlt_call(dlsym(RTLD_NEXT, "dlt_layered"));
	void *self_next = dlsym(RTLD_NEXT, "dlt_a_next");
	char deflt = dlt_call(dlsym(RTLD_DEFAULT, "dlt_layered"));
	void *strlen_found = dlsym(RTLD_DEFAULT, "strlen");
	void *strlen_linked = DLT_FN(strlen);
	const char *cuda = dlt_cuda_lookup();

	snprintf(dlt_a_report, sizeof(dlt_a_report),
		 "next %c default %c self-next %s strlen %s cuda %s", next, deflt,
		 self_next ? "found" : "none",
		 strlen_found == strlen_linked ? "same" : "different", cuda);
}

/* What the constructor found. */
DLT_API const char *dlt_a_ctor_report(void)
{
	return dlt_a_report;
}
#endif

#ifdef DLT_ROLE_CTOR
DLT_API char dlt_ctor_own(void);
DLT_API const char *dlt_ctor_report(void);

static char dlt_report_text[256];

DLT_API char dlt_ctor_own(void)
{
	return 'C';
}

/*
 * Runs inside dlopen, with the loader's lock held: a dlsym hook that
 * takes a lock of its own, or calls back into the loader the wrong way,
 * deadlocks or recurses here.
 */
__attribute__((constructor)) static void dlt_ctor(void)
{
	char own_default = dlt_call(dlsym(RTLD_DEFAULT, "dlt_ctor_own"));
	char own_next = dlt_call(dlsym(RTLD_NEXT, "dlt_ctor_own"));
	char layered_next = dlt_call(dlsym(RTLD_NEXT, "dlt_layered"));
	char layered_default = dlt_call(dlsym(RTLD_DEFAULT, "dlt_layered"));
	void *strlen_found = dlsym(RTLD_DEFAULT, "strlen");
	void *strlen_linked = DLT_FN(strlen);
	const char *cuda = dlt_cuda_lookup();

	snprintf(dlt_report_text, sizeof(dlt_report_text),
		 "own-default %c own-next %c layered-next %c layered-default %c "
		 "strlen %s cuda %s", own_default, own_next, layered_next,
		 layered_default, strlen_found == strlen_linked ? "same" : "different",
		 cuda);
}

/* What the constructor found. */
DLT_API const char *dlt_ctor_report(void)
{
	return dlt_report_text;
}
#endif

#ifdef DLT_ROLE_DEEP
DLT_API char dlt_layered(void);
DLT_API const char *dlt_deep_report(void);

static char dlt_deep_text[256];

DLT_API char dlt_layered(void)
{
	return 'D';
}

/*
 * What a library bound with RTLD_DEEPBIND sees: its own definitions come
 * first for its own references, RTLD_DEFAULT searches from its scope.
 */
DLT_API const char *dlt_deep_report(void)
{
	void *self = dlsym(RTLD_DEFAULT, "dlt_deep_report");
	void *strlen_found = dlsym(RTLD_DEFAULT, "strlen");
	void *strlen_linked = DLT_FN(strlen);
	void *report_linked = DLT_FN(dlt_deep_report);
	char direct = dlt_layered();
	char deflt = dlt_call(dlsym(RTLD_DEFAULT, "dlt_layered"));
	char next = dlt_call(dlsym(RTLD_NEXT, "dlt_layered"));
	void *main_handle = dlopen(NULL, RTLD_NOW);
	char main_letter = dlt_call(main_handle ? dlsym(main_handle, "dlt_layered") : NULL);

	snprintf(dlt_deep_text, sizeof(dlt_deep_text),
		 "direct %c default %c next %c main %c self %s strlen %s", direct,
		 deflt, next, main_letter,
		 self == report_linked ? "same" : self ? "different" : "missing",
		 strlen_found == strlen_linked ? "same" : "different");
	if (main_handle)
		dlclose(main_handle);
	return dlt_deep_text;
}
#endif

#ifdef DLT_ROLE_CU
/*
 * Functions with CUDA names in a library that is not CUDA (another
 * interposer, a tracer, a mock): a look-up on this library's handle must
 * find these, whatever a preloaded library does with the real ones.
 */
DLT_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	(void)dst;
	(void)src;
	(void)n;
	return (CUresult)701;
}

DLT_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)dst;
	(void)src;
	(void)n;
	(void)kind;
	return (cudaError_t)702;
}

DLT_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	(void)symbol;
	(void)version;
	(void)flags;
	if (pfn)
		*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return (CUresult)703;
}
#endif
