/*
 * dlreal: reads the dynamic symbol table of the loaded C library to find
 * dlsym, dlvsym and sigaction (dlreal.h says why).
 *
 * dl_iterate_phdr gives each loaded object's base and program headers; the
 * PT_DYNAMIC segment gives DT_SYMTAB, DT_STRTAB and a hash table (DT_HASH
 * or DT_GNU_HASH) whose size bounds the symbol table. On most targets the
 * dynamic linker has already relocated those d_ptr values to absolute
 * addresses; where it has not (they lie below the object's base), the
 * base is added.
 */
#include "core/dlreal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

typedef void *dlsym_fn(void *, const char *);
typedef void *dlvsym_fn(void *, const char *, const char *);
typedef int sigaction_fn(int, const struct sigaction *, struct sigaction *);

static pthread_once_t dlreal_once = PTHREAD_ONCE_INIT;
static dlsym_fn *dlreal_dlsym;
static dlvsym_fn *dlreal_dlvsym;
static sigaction_fn *dlreal_sigaction_p;

/* An address from the dynamic section, made absolute. */
static ElfW(Addr) dlreal_abs(ElfW(Addr) base, ElfW(Addr) p)
{
	return p < base ? base + p : p;
}

/* The number of symbols a GNU hash table covers. */
static uint32_t dlreal_gnu_count(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
	const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;

	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return last + 1;
}

#define DLREAL_NAMES 3

struct dlreal_find {
	const char *names[DLREAL_NAMES];
	void *found[DLREAL_NAMES];
};

/* Whether every name was found. */
static int dlreal_all(const struct dlreal_find *f)
{
	for (int k = 0; k < DLREAL_NAMES; k++)
		if (!f->found[k])
			return 0;
	return 1;
}

static int dlreal_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dlreal_find *f = arg;
	const char *base = strrchr(info->dlpi_name, '/');
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *syms = NULL;
	const char *strs = NULL;
	const uint32_t *hash = NULL, *gnu = NULL;
	uint32_t count;

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libc.so", 7) != 0 && strncmp(base, "libdl.so", 8) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		ElfW(Addr) p = dlreal_abs(info->dlpi_addr, dyn->d_un.d_ptr);

		switch (dyn->d_tag) {
		case DT_SYMTAB:
			syms = (const ElfW(Sym) *)p;
			break;
		case DT_STRTAB:
			strs = (const char *)p;
			break;
		case DT_HASH:
			hash = (const uint32_t *)p;
			break;
		case DT_GNU_HASH:
			gnu = (const uint32_t *)p;
			break;
		default:
			break;
		}
	}
	if (!syms || !strs || (!hash && !gnu))
		return 0;
	count = hash ? hash[1] : dlreal_gnu_count(gnu);
	for (uint32_t i = 0; i < count; i++) {
		const ElfW(Sym) *s = &syms[i];

		if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_value)
			continue;
		for (int k = 0; k < DLREAL_NAMES; k++)
			if (!f->found[k] && strcmp(strs + s->st_name, f->names[k]) == 0)
				f->found[k] = (void *)(info->dlpi_addr + s->st_value);
	}
	return dlreal_all(f);
}

static void dlreal_load(void)
{
	struct dlreal_find f = { .names = { "dlsym", "dlvsym", "sigaction" } };

	dl_iterate_phdr(dlreal_phdr, &f);
	*(void **)&dlreal_dlsym = f.found[0];
	*(void **)&dlreal_dlvsym = f.found[1];
	*(void **)&dlreal_sigaction_p = f.found[2];
}

int dlreal_init(void)
{
	pthread_once(&dlreal_once, dlreal_load);
	return dlreal_dlsym ? 0 : -ENOENT;
}

void *dlreal_sym(void *handle, const char *name)
{
	dlreal_init();
	return dlreal_dlsym ? dlreal_dlsym(handle, name) : NULL;
}

void *dlreal_vsym(void *handle, const char *name, const char *version)
{
	dlreal_init();
	return dlreal_dlvsym ? dlreal_dlvsym(handle, name, version) : NULL;
}

void *dlreal_dlsym_fn(void)
{
	dlreal_init();
	return *(void **)&dlreal_dlsym;
}

void *dlreal_dlvsym_fn(void)
{
	dlreal_init();
	return *(void **)&dlreal_dlvsym;
}

int dlreal_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	if (!dlreal_sigaction_p)
		dlreal_init();
	if (!dlreal_sigaction_p) {
		errno = ENOSYS;
		return -1;
	}
	return dlreal_sigaction_p(sig, act, oldact);
}
