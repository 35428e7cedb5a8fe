/*
 * seed.c: linked into the ThreadSanitizer build of libvrampool.so only
 * (make tsan), never into the library that ships.
 *
 * Why: ThreadSanitizer's own start-up finds each real function it wraps
 * with dlsym(RTLD_NEXT, name) before it can record anything, and the
 * preloaded library's dlsym export (intercept/dlsym.c) answers those calls.
 * Its trampoline jumps straight to the C library's dlsym once it knows it
 * (vp_real_dlsym); before the library's constructor ran it calls C code
 * to find it, and that code, instrumented, dies in ThreadSanitizer's
 * not yet started runtime (__tsan_func_entry with no thread state; the
 * C library's dl_iterate_phdr through an interceptor not yet set up).
 *
 * So this file finds the C library's dlsym and dlvsym while the library is
 * being relocated, before any start-up code runs anywhere: an indirect
 * function's resolver (an IRELATIVE relocation of vp_tsan_seed_ref) walks
 * the dynamic linker's list of loaded objects (_r_debug) to the C library
 * and reads its dynamic symbol table, then sets the trampolines' pointers.
 * Every file of the library itself stays instrumented; this one is built
 * without instrumentation and calls no function (the C library's string
 * functions are intercepted too), as it runs before the runtime exists.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>

/* The trampolines' targets (intercept/dlsym.c, hidden in the library). */
extern void *vp_real_dlsym __attribute__((visibility("hidden")));
extern void *vp_real_dlvsym __attribute__((visibility("hidden")));

/* Whether string a starts with b (whole: and ends there too). */
static int seed_prefix(const char *a, const char *b, int whole)
{
	for (; *b; a++, b++)
		if (*a != *b)
			return 0;
	return !whole || *a == '\0';
}

/* An address from a dynamic section, absolute (the dynamic linker relocates most). */
static ElfW(Addr) seed_abs(ElfW(Addr) base, ElfW(Addr) p)
{
	return p < base ? base + p : p;
}

/* The symbol NAME in the GNU hash table GNU of SYMS/STRS, or NULL. */
static const ElfW(Sym) *seed_lookup(const uint32_t *gnu, const ElfW(Sym) *syms, const char *strs,
				    const char *name)
{
	uint32_t h = 5381, nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2], i;
	const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	const unsigned char *c;

	for (c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t ch = chain[i - symoffset];

		if ((ch | 1) == (h | 1) && seed_prefix(strs + syms[i].st_name, name, 1) && syms[i].st_value)
			return &syms[i];
		if (ch & 1)
			return NULL;
	}
}

static void seed_target(void)
{
}

/* The resolver: runs while libvrampool.so is relocated. */
static void (*seed_resolve(void))(void)
{
	const struct link_map *m;

	for (m = _r_debug.r_map; m; m = m->l_next) {
		const char *base = NULL, *c;
		const ElfW(Sym) *syms = NULL, *s;
		const uint32_t *gnu = NULL;
		const char *strs = NULL;
		const ElfW(Dyn) *d;

		for (c = m->l_name; c && *c; c++)
			if (*c == '/')
				base = c + 1;
		if (!base || !seed_prefix(base, "libc.so", 0))
			continue;
		for (d = m->l_ld; d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_SYMTAB)
				syms = (const ElfW(Sym) *)seed_abs(m->l_addr, d->d_un.d_ptr);
			else if (d->d_tag == DT_STRTAB)
				strs = (const char *)seed_abs(m->l_addr, d->d_un.d_ptr);
			else if (d->d_tag == DT_GNU_HASH)
				gnu = (const uint32_t *)seed_abs(m->l_addr, d->d_un.d_ptr);
		}
		if (!syms || !strs || !gnu)
			break;
		if ((s = seed_lookup(gnu, syms, strs, "dlsym")))
			vp_real_dlsym = (void *)(m->l_addr + s->st_value);
		if ((s = seed_lookup(gnu, syms, strs, "dlvsym")))
			vp_real_dlvsym = (void *)(m->l_addr + s->st_value);
		break;
	}
	return seed_target;
}

void vp_tsan_seed(void) __attribute__((ifunc("seed_resolve"), visibility("hidden")));
void (*const vp_tsan_seed_ref)(void) __attribute__((used, visibility("hidden"))) = vp_tsan_seed;
