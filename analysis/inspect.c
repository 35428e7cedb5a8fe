/*
 * inspect.c: `vrampool inspect FILE...`, will a program's host-to-device
 * copies be seen by the preloaded library?
 *
 * A preloaded object sees a call only when the call goes through the dynamic
 * linker: the program must import cudaMemcpy / cudaMemcpyAsync from a shared
 * libcudart. nvcc links the runtime statically by default, and then every
 * copy is a direct call inside the binary, invisible to any preload. This
 * file reads each ELF object with libelf/gelf (the idioms of elfutils'
 * elfclassify.c), classifies it, resolves its DT_NEEDED entries the way
 * ld.so does (DT_RPATH when there is no DT_RUNPATH, LD_LIBRARY_PATH,
 * DT_RUNPATH, the ld.so cache, the default directories; $ORIGIN, $LIB and
 * $PLATFORM expanded), walks the result recursively (each object once,
 * bounded depth) and prints one verdict per file and one overall.
 *
 * The evidence for a statically linked runtime, strongest first: a defined
 * cudaMemcpyAsync / cudaGetErrorString or a __cudart / cudart:: symbol in
 * .symtab; when the binary is stripped, the runtime's error-name table
 * (the string "cudaErrorMemoryAllocation") in read-only data of a file that
 * imports no runtime function. Device code (.nv_fatbin) is reported as a
 * hint only: a -cudart shared program carries it too.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <ar.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "vrampool.h"

#define MAX_NEEDED 256		/* DT_NEEDED entries kept per object */
#define MAX_OBJECTS 1024	/* objects walked per invocation */
#define MAX_DEPTH 32		/* DT_NEEDED nesting */
#define MAX_SCRIPT_HOPS 4	/* #! interpreters that are scripts themselves */

/* The copy entry points the shim interposes (DESIGN.md). */
static const char *const interposed_copies[] = {
	"cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz", "cudaMemcpy_ptds",
};

/* Symbols whose definition means the runtime itself is inside the object. */
static const char *const runtime_definitions[] = {
	"cudaMemcpyAsync", "cudaMemcpy", "cudaMalloc", "cudaGetErrorString",
	"cudaMemcpyAsync_ptsz", "cudaLaunchKernel",
};

/* The runtime's error-name table survives stripping. */
static const char runtime_signature[] = "cudaErrorMemoryAllocation";

/* What one ELF object tells about its use of CUDA. */
struct elf_facts {
	int elfclass;
	int machine;
	int type;
	bool executable;		/* has PT_INTERP */
	bool has_symtab;
	bool device_code;		/* .nv_fatbin or .nvFatBinSegment */
	bool provides;			/* a shared object exporting the copies */
	bool has_rpath, has_runpath;
	char soname[256];
	char rpath[4096];
	char runpath[4096];
	char *needed[MAX_NEEDED];
	int nneeded;
	char seen[256];			/* imported interposed copies */
	char other_copies[256];		/* imported copies not interposed */
	char driver[256];		/* imported driver copies */
	int runtime_imports;		/* cuda* / __cuda* imports */
	int driver_imports;		/* cu[A-Z]* imports */
	bool imports_dlopen;
	bool driver_dlopen;		/* dlopens libcuda.so.1 itself */
	char static_evidence[128];	/* why we think the runtime is inside */
	enum inspect_verdict verdict;
	char why[512];
};

/* A loader in the chain that led to an object: its RPATH applies below it. */
struct loader_chain {
	const char *rpath;		/* NULL when absent or overridden by RUNPATH */
	const char *origin;		/* directory of the loader, for $ORIGIN */
	const struct loader_chain *up;
};

/* An entry of `ldconfig -p`. */
struct cache_entry {
	char *name;
	char *path;
};

/* The state of one invocation: options, objects seen, results. */
struct walk {
	bool verbose;			/* print every dependency */
	bool follow;			/* walk DT_NEEDED */
	FILE *out;			/* NULL: print nothing */
	struct { dev_t dev; ino_t ino; } *seen_objects;
	int nseen_objects;
	struct cache_entry *cache;
	int ncache;
	bool cache_loaded;
	int hidden;			/* dependencies with no CUDA use, not printed */
	/* The overall verdict and the files that decided it. */
	enum inspect_verdict worst;	/* largest verdict other than SEEN */
	int nseen, nstatic, ndriver;
	char seen_file[PATH_MAX], worst_file[PATH_MAX];
	char worst_why[512];
	bool error;
	char error_msg[512];
};

/* Appends NAME to the comma-separated list LIST unless already there. */
static void list_add(char *list, size_t size, const char *name)
{
	size_t len = strlen(list), nlen = strlen(name);
	const char *p = list;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == list || p[-2] == ',') && (p[nlen] == '\0' || p[nlen] == ','))
			return;
		p += nlen;
	}
	if (len + nlen + 3 >= size)
		return;
	if (len)
		strcat(list, ", ");
	strcat(list, name);
}

/* Returns whether NAME is one of the N strings of TABLE. */
static bool name_in(const char *name, const char *const *table, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(name, table[i]) == 0)
			return true;
	return false;
}

#define NAME_IN(name, table) name_in(name, table, sizeof(table) / sizeof(table[0]))

/* Frees the DT_NEEDED names of F. */
static void elf_facts_release(struct elf_facts *f)
{
	int i;

	for (i = 0; i < f->nneeded; i++) {
		free(f->needed[i]);
		f->needed[i] = NULL;
	}
	f->nneeded = 0;
}

/* Records what one symbol says: an import, an export or a static runtime. */
static void elf_facts_symbol(struct elf_facts *f, const char *name,
			     const GElf_Sym *sym, bool dynamic)
{
	bool undefined = sym->st_shndx == SHN_UNDEF;
	int bind = GELF_ST_BIND(sym->st_info);

	if (!name[0])
		return;
	if (undefined && dynamic) {
		if (NAME_IN(name, interposed_copies))
			list_add(f->seen, sizeof(f->seen), name);
		else if (strncmp(name, "cudaMemcpy", 10) == 0)
			list_add(f->other_copies, sizeof(f->other_copies), name);
		if (strcmp(name, "dlopen") == 0)
			f->imports_dlopen = true;
		if (strncmp(name, "cuda", 4) == 0 || strncmp(name, "__cuda", 6) == 0)
			f->runtime_imports++;
		else if (name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z') {
			f->driver_imports++;
			if (strncmp(name, "cuMemcpy", 8) == 0)
				list_add(f->driver, sizeof(f->driver), name);
		}
		return;
	}
	if (undefined)
		return;
	if (dynamic && (bind == STB_GLOBAL || bind == STB_WEAK) &&
	    NAME_IN(name, interposed_copies) && !f->executable) {
		f->provides = true;
		return;
	}
	if (f->static_evidence[0])
		return;
	if (NAME_IN(name, runtime_definitions) || strncmp(name, "__cudart", 8) == 0 ||
	    strncmp(name, "_ZN6cudart", 10) == 0)
		snprintf(f->static_evidence, sizeof(f->static_evidence),
			 "defines %s", name);
}

/* Reads the symbols of one SHT_SYMTAB or SHT_DYNSYM section. */
static void elf_facts_symbols(struct elf_facts *f, Elf *elf, Elf_Scn *scn,
			      const GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;
	GElf_Sym sym;
	const char *name;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 1; i < n; i++) {
		if (!gelf_getsym(data, (int)i, &sym))
			break;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (name)
			elf_facts_symbol(f, name, &sym, sh->sh_type == SHT_DYNSYM);
	}
}

/* Reads DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH. */
static void elf_facts_dynamic(struct elf_facts *f, Elf *elf, Elf_Scn *scn,
			      const GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;
	GElf_Dyn dyn;
	const char *s;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME &&
		    dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH)
			continue;
		s = elf_strptr(elf, sh->sh_link, dyn.d_un.d_val);
		if (!s)
			continue;
		if (dyn.d_tag == DT_NEEDED && f->nneeded < MAX_NEEDED) {
			f->needed[f->nneeded] = strdup(s);
			if (f->needed[f->nneeded])
				f->nneeded++;
		} else if (dyn.d_tag == DT_SONAME) {
			snprintf(f->soname, sizeof(f->soname), "%s", s);
		} else if (dyn.d_tag == DT_RPATH) {
			f->has_rpath = true;
			snprintf(f->rpath, sizeof(f->rpath), "%s", s);
		} else {
			f->has_runpath = true;
			snprintf(f->runpath, sizeof(f->runpath), "%s", s);
		}
	}
}

/* Looks for NEEDLE in read-only data: the strings of a stripped runtime. */
static bool elf_has_string(Elf *elf, const char *needle)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *data;
	size_t shstrndx;
	const char *name;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_EXECINSTR))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strncmp(name, ".rodata", 7) != 0)
			continue;
		data = elf_rawdata(scn, NULL);
		if (data && data->d_buf &&
		    memmem(data->d_buf, data->d_size, needle, strlen(needle)))
			return true;
	}
	return false;
}

/* Decides F's verdict from its facts and writes the reason. */
static void elf_facts_decide(struct elf_facts *f)
{
	if (f->seen[0]) {
		f->verdict = INSPECT_SEEN;
		snprintf(f->why, sizeof(f->why),
			 "seen: imports %s from the shared CUDA runtime", f->seen);
	} else if (f->provides) {
		f->verdict = INSPECT_PROVIDER;
		snprintf(f->why, sizeof(f->why),
			 "provides the CUDA runtime API itself (libcudart, or a library that interposes it)");
	} else if (f->static_evidence[0]) {
		f->verdict = INSPECT_STATIC;
		snprintf(f->why, sizeof(f->why),
			 "not seen: carries the CUDA runtime inside itself (static runtime: %s%s)",
			 f->static_evidence, f->has_symtab ? "" : ", stripped");
	} else if (f->driver_imports && !f->runtime_imports) {
		f->verdict = INSPECT_DRIVER;
		snprintf(f->why, sizeof(f->why),
			 "not seen by this version: calls the CUDA driver API directly%s%s%s",
			 f->driver[0] ? " (" : "", f->driver, f->driver[0] ? ")" : "");
	} else if (f->driver_dlopen) {
		f->verdict = INSPECT_DRIVER;
		snprintf(f->why, sizeof(f->why),
			 "not seen by this version: loads the CUDA driver itself (dlopen of libcuda.so.1)");
	} else if (f->runtime_imports) {
		f->verdict = INSPECT_RUNTIME_OTHER;
		snprintf(f->why, sizeof(f->why),
			 "uses the shared CUDA runtime but imports no copy that vrampool interposes%s%s%s",
			 f->other_copies[0] ? " (only " : "", f->other_copies,
			 f->other_copies[0] ? ")" : "");
	} else {
		f->verdict = INSPECT_NONE;
		snprintf(f->why, sizeof(f->why), "no CUDA use%s",
			 f->device_code ? " found, though it holds device code" : "");
	}
}

/*
 * Reads the ELF object open on FD (of SIZE bytes) into F. Returns 0, or
 * -EINVAL with a message in ERR for input that is not a usable ELF object.
 */
static int elf_facts_read(struct elf_facts *f, int fd, off_t size,
			  char *err, size_t err_size)
{
	Elf *elf;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	GElf_Phdr ph;
	Elf_Scn *scn = NULL;
	size_t shstrndx, nphdr, i;
	const char *name;
	int ret = -EINVAL;

	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		snprintf(err, err_size, "cannot read as ELF: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	if (elf_kind(elf) == ELF_K_AR) {
		snprintf(err, err_size,
			 "an ar archive (a static library): inspect the program linked from it");
		goto out_close_elf;
	}
	if (elf_kind(elf) != ELF_K_ELF) {
		snprintf(err, err_size, "not an ELF object (nor a #! script)");
		goto out_close_elf;
	}
	if (!gelf_getehdr(elf, &eh)) {
		snprintf(err, err_size, "truncated or corrupt ELF header: %s", elf_errmsg(-1));
		goto out_close_elf;
	}
	f->elfclass = gelf_getclass(elf);
	f->machine = eh.e_machine;
	f->type = eh.e_type;
	if (f->elfclass != ELFCLASS64) {
		snprintf(err, err_size,
			 "a 32-bit ELF object: CUDA has no 32-bit host runtime here, nothing to inspect");
		goto out_close_elf;
	}
	if (eh.e_type == ET_CORE) {
		snprintf(err, err_size, "a core dump, not a program or library");
		goto out_close_elf;
	}
	if (eh.e_shoff > (uint64_t)size ||
	    (uint64_t)eh.e_shnum * eh.e_shentsize > (uint64_t)size - eh.e_shoff) {
		snprintf(err, err_size,
			 "truncated ELF: the section headers end past the end of the file (%lld bytes)",
			 (long long)size);
		goto out_close_elf;
	}
	if (elf_getshdrstrndx(elf, &shstrndx) != 0 || elf_getphdrnum(elf, &nphdr) != 0) {
		snprintf(err, err_size, "corrupt ELF: %s", elf_errmsg(-1));
		goto out_close_elf;
	}
	for (i = 0; i < nphdr; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			f->executable = true;
	/* Every section must lie inside the file before any is read. */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh)) {
			snprintf(err, err_size, "corrupt section header: %s", elf_errmsg(-1));
			goto out_close_elf;
		}
		if (sh.sh_type != SHT_NOBITS &&
		    (sh.sh_offset > (uint64_t)size || sh.sh_size > (uint64_t)size - sh.sh_offset)) {
			snprintf(err, err_size,
				 "truncated ELF: a section ends at byte %llu, past the end of the file (%lld bytes)",
				 (unsigned long long)(sh.sh_offset + sh.sh_size), (long long)size);
			goto out_close_elf;
		}
	}
	/* The dynamic section first: whether the object exports depends on it. */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNAMIC)
			elf_facts_dynamic(f, elf, scn, &sh);
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && (strcmp(name, ".nv_fatbin") == 0 ||
			     strcmp(name, ".nvFatBinSegment") == 0))
			f->device_code = true;
	}
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			f->has_symtab = true;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
			elf_facts_symbols(f, elf, scn, &sh);
	}
	if (!f->seen[0] && !f->provides && !f->static_evidence[0] &&
	    !f->runtime_imports && elf_has_string(elf, runtime_signature))
		snprintf(f->static_evidence, sizeof(f->static_evidence),
			 "the runtime's error-name strings%s",
			 f->device_code ? " and device code" : "");
	if (!f->seen[0] && !f->provides && !f->static_evidence[0] &&
	    !f->runtime_imports && f->imports_dlopen && elf_has_string(elf, "libcuda.so.1"))
		f->driver_dlopen = true;
	elf_facts_decide(f);
	ret = 0;
out_close_elf:
	elf_end(elf);
	return ret;
}

/* Prints to the walk's output, if it has one. */
static void walk_print(struct walk *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void walk_print(struct walk *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->out)
		return;
	va_start(ap, fmt);
	vfprintf(w->out, fmt, ap);
	va_end(ap);
}

/* Records an error of a file named on the command line. */
static void walk_error(struct walk *w, const char *path, const char *msg)
{
	w->error = true;
	snprintf(w->error_msg, sizeof(w->error_msg), "%s: %s", path, msg);
	if (w->out) {
		fflush(w->out);
		fprintf(stderr, "vrampool inspect: %s: %s\n", path, msg);
	}
}

/* Folds the verdict of PATH into the overall one. */
static void walk_note(struct walk *w, const char *path, const struct elf_facts *f)
{
	if (f->verdict == INSPECT_SEEN) {
		if (!w->nseen++)
			snprintf(w->seen_file, sizeof(w->seen_file), "%s", path);
		return;
	}
	if (f->verdict == INSPECT_STATIC)
		w->nstatic++;
	if (f->verdict == INSPECT_DRIVER)
		w->ndriver++;
	if (f->verdict > w->worst || (f->verdict == w->worst && !w->worst_file[0])) {
		w->worst = f->verdict;
		snprintf(w->worst_file, sizeof(w->worst_file), "%s", path);
		snprintf(w->worst_why, sizeof(w->worst_why), "%s", f->why);
	}
}

/* Returns whether the object FD was already walked, and marks it walked. */
static bool walk_visited(struct walk *w, const struct stat *st)
{
	int i;
	void *p;

	for (i = 0; i < w->nseen_objects; i++)
		if (w->seen_objects[i].dev == st->st_dev && w->seen_objects[i].ino == st->st_ino)
			return true;
	p = realloc(w->seen_objects, (size_t)(w->nseen_objects + 1) * sizeof(*w->seen_objects));
	if (!p)
		return true;
	w->seen_objects = p;
	w->seen_objects[w->nseen_objects].dev = st->st_dev;
	w->seen_objects[w->nseen_objects].ino = st->st_ino;
	w->nseen_objects++;
	return false;
}

/* Loads `ldconfig -p` once: the ld.so cache, name => path. */
static void walk_load_cache(struct walk *w)
{
	const char *ldconfig = access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig -p" :
			       "/usr/sbin/ldconfig -p";
	char line[PATH_MAX + 256], *name, *arrow, *end;
	FILE *p;
	void *grown;

	w->cache_loaded = true;
	p = popen(ldconfig, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		name = line + strspn(line, " \t");
		end = strchr(name, ' ');
		arrow = strstr(name, " => ");
		if (!end || !arrow)
			continue;
		*end = '\0';
		arrow += 4;
		arrow[strcspn(arrow, "\n")] = '\0';
		grown = realloc(w->cache, (size_t)(w->ncache + 1) * sizeof(*w->cache));
		if (!grown)
			break;
		w->cache = grown;
		w->cache[w->ncache].name = strdup(name);
		w->cache[w->ncache].path = strdup(arrow);
		if (!w->cache[w->ncache].name || !w->cache[w->ncache].path) {
			free(w->cache[w->ncache].name);
			free(w->cache[w->ncache].path);
			break;
		}
		w->ncache++;
	}
	pclose(p);
}

/* Frees what the walk allocated. */
static void walk_release(struct walk *w)
{
	int i;

	for (i = 0; i < w->ncache; i++) {
		free(w->cache[i].name);
		free(w->cache[i].path);
	}
	free(w->cache);
	w->cache = NULL;
	w->ncache = 0;
	free(w->seen_objects);
	w->seen_objects = NULL;
	w->nseen_objects = 0;
}

/* The Debian multiarch directory name for MACHINE, or NULL. */
static const char *multiarch(int machine)
{
	switch (machine) {
	case EM_X86_64:
		return "x86_64-linux-gnu";
	case EM_AARCH64:
		return "aarch64-linux-gnu";
	case EM_PPC64:
		return "powerpc64le-linux-gnu";
	default:
		return NULL;
	}
}

/*
 * Returns whether PATH is an ELF object of CLASS and MACHINE, the test ld.so
 * applies before it accepts a candidate.
 */
static bool compatible_object(const char *path, int elfclass, int machine)
{
	unsigned char h[20];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	int m;

	if (fd < 0)
		return false;
	n = pread(fd, h, sizeof(h), 0);
	close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h, ELFMAG, SELFMAG) != 0 || h[EI_CLASS] != elfclass)
		return false;
	m = h[EI_DATA] == ELFDATA2MSB ? (h[18] << 8 | h[19]) : (h[19] << 8 | h[18]);
	return m == machine;
}

/* Expands $ORIGIN, $LIB and $PLATFORM (with or without braces) in DIR. */
static void expand_dst(const char *dir, const char *origin, int machine,
		       char *out, size_t size)
{
	static const char *const names[] = { "ORIGIN", "LIB", "PLATFORM" };
	char lib[64];
	const char *values[3];
	struct utsname u;
	size_t o = 0, len, k;
	const char *ma = multiarch(machine);

	snprintf(lib, sizeof(lib), "%s%s", ma ? "lib/" : "lib64", ma ? ma : "");
	values[0] = origin;
	values[1] = lib;
	values[2] = uname(&u) == 0 ? u.machine : "x86_64";
	while (*dir && o + 1 < size) {
		bool done = false;

		if (*dir == '$') {
			bool brace = dir[1] == '{';

			for (k = 0; k < 3 && !done; k++) {
				len = strlen(names[k]);
				if (strncmp(dir + 1 + brace, names[k], len) != 0 ||
				    (brace && dir[1 + brace + len] != '}'))
					continue;
				o += (size_t)snprintf(out + o, size - o, "%s", values[k]);
				if (o >= size)
					o = size - 1;
				dir += 1 + brace + len + brace;
				done = true;
			}
		}
		if (!done)
			out[o++] = *dir++;
	}
	out[o] = '\0';
}

/*
 * Searches NAME in the colon-separated LIST of directories; writes the first
 * compatible candidate into OUT and returns true.
 */
static bool search_list(const char *list, const char *name, const char *origin,
			int elfclass, int machine, char *out, size_t size)
{
	char dir[PATH_MAX], expanded[PATH_MAX];
	const char *p = list, *colon;
	size_t len;

	while (p) {
		colon = strchr(p, ':');
		len = colon ? (size_t)(colon - p) : strlen(p);
		if (len >= sizeof(dir))
			len = sizeof(dir) - 1;
		memcpy(dir, p, len);
		dir[len] = '\0';
		expand_dst(len ? dir : ".", origin, machine, expanded, sizeof(expanded));
		if ((size_t)snprintf(out, size, "%s/%s", expanded, name) < size &&
		    compatible_object(out, elfclass, machine))
			return true;
		p = colon ? colon + 1 : NULL;
	}
	return false;
}

/* Resolves the DT_NEEDED NAME of an object as ld.so would; true if found. */
static bool walk_resolve(struct walk *w, const char *name, const struct elf_facts *f,
			 const char *origin, const struct loader_chain *up,
			 char *out, size_t size)
{
	static const char *const defaults[] = { "/lib64", "/usr/lib64", "/lib", "/usr/lib" };
	const struct loader_chain *l;
	const char *env = getenv("LD_LIBRARY_PATH");
	const char *ma = multiarch(f->machine);
	char dir[PATH_MAX];
	size_t i;
	int k;

	if (strchr(name, '/')) {
		snprintf(out, size, "%s", name);
		return compatible_object(out, f->elfclass, f->machine);
	}
	if (!f->has_runpath) {
		if (f->has_rpath &&
		    search_list(f->rpath, name, origin, f->elfclass, f->machine, out, size))
			return true;
		for (l = up; l; l = l->up)
			if (l->rpath && search_list(l->rpath, name, l->origin, f->elfclass,
						    f->machine, out, size))
				return true;
	}
	if (env && *env && search_list(env, name, origin, f->elfclass, f->machine, out, size))
		return true;
	if (f->has_runpath &&
	    search_list(f->runpath, name, origin, f->elfclass, f->machine, out, size))
		return true;
	if (!w->cache_loaded)
		walk_load_cache(w);
	for (k = 0; k < w->ncache; k++)
		if (strcmp(w->cache[k].name, name) == 0 &&
		    compatible_object(w->cache[k].path, f->elfclass, f->machine)) {
			snprintf(out, size, "%s", w->cache[k].path);
			return true;
		}
	if (ma) {
		snprintf(dir, sizeof(dir), "/lib/%s:/usr/lib/%s", ma, ma);
		if (search_list(dir, name, origin, f->elfclass, f->machine, out, size))
			return true;
	}
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (search_list(defaults[i], name, origin, f->elfclass, f->machine, out, size))
			return true;
	return false;
}

/*
 * Reads PATH into F: opens it, refuses what is not a regular, non-empty
 * ELF object, and reports the reason in ERR. Returns 0 or a negative errno.
 * SCRIPT receives the interpreter line when PATH is a #! script (then F is
 * left empty and 1 is returned).
 */
static int inspect_read(const char *path, struct elf_facts *f, char *script,
			size_t script_size, char *err, size_t err_size)
{
	struct stat st;
	char head[256];
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		goto out_close;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = -EISDIR;
		snprintf(err, err_size, "is a directory, not a program or library");
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, err_size, "not a regular file");
		goto out_close;
	}
	if (st.st_size == 0) {
		ret = -EINVAL;
		snprintf(err, err_size, "empty file, not an ELF object");
		goto out_close;
	}
	n = pread(fd, head, sizeof(head) - 1, 0);
	if (n < 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		goto out_close;
	}
	head[n] = '\0';
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		head[strcspn(head, "\n")] = '\0';
		snprintf(script, script_size, "%s", head + 2);
		ret = 1;
		goto out_close;
	}
	if (n >= SARMAG && memcmp(head, ARMAG, SARMAG) == 0) {
		ret = -EINVAL;
		snprintf(err, err_size,
			 "an ar archive (a static library): inspect the program linked from it");
		goto out_close;
	}
	if (n < SELFMAG || memcmp(head, ELFMAG, SELFMAG) != 0) {
		ret = -EINVAL;
		snprintf(err, err_size, "not an ELF object (nor a #! script)");
		goto out_close;
	}
	ret = elf_facts_read(f, fd, st.st_size, err, err_size);
out_close:
	close(fd);
	return ret;
}

/* Finds NAME in $PATH the way execvp does; writes the path into OUT. */
static bool path_search(const char *name, char *out, size_t size)
{
	const char *path = getenv("PATH"), *p, *colon;
	size_t len;

	if (strchr(name, '/')) {
		snprintf(out, size, "%s", name);
		return true;
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; p; p = colon ? colon + 1 : NULL) {
		colon = strchr(p, ':');
		len = colon ? (size_t)(colon - p) : strlen(p);
		if ((size_t)snprintf(out, size, "%.*s/%s", (int)len, len ? p : ".", name) >= size)
			continue;
		if (access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/*
 * Turns the #! line LINE into the interpreter's path: the first word, or
 * for `/usr/bin/env [-S] [-opts] prog`, prog found through $PATH.
 */
static bool script_interpreter(const char *line, char *out, size_t size)
{
	char buf[256], *word, *save = NULL;
	const char *base;

	snprintf(buf, sizeof(buf), "%s", line);
	word = strtok_r(buf, " \t\r", &save);
	if (!word)
		return false;
	base = strrchr(word, '/');
	base = base ? base + 1 : word;
	if (strcmp(base, "env") != 0) {
		snprintf(out, size, "%s", word);
		return true;
	}
	while ((word = strtok_r(NULL, " \t\r", &save)) != NULL) {
		if (word[0] == '-' || strchr(word, '='))
			continue;
		return path_search(word, out, size);
	}
	return false;
}

/*
 * Walks the object at PATH (named NAME by its loader, or NULL for a file of
 * the command line) and its dependencies. Returns 0, or a negative errno when
 * a file of the command line cannot be inspected.
 */
static int walk_object(struct walk *w, const char *path, const char *name,
		       const struct loader_chain *up, int depth)
{
	struct elf_facts f;
	struct loader_chain me;
	char err[256], script[256], interp[PATH_MAX], dep[PATH_MAX], real[PATH_MAX];
	char origin[PATH_MAX], *slash;
	struct stat st;
	int ret, i;

	memset(&f, 0, sizeof(f));
	if (name && stat(path, &st) == 0 && walk_visited(w, &st))
		return 0;
	ret = inspect_read(path, &f, script, sizeof(script), err, sizeof(err));
	if (ret == 1) {
		if (name || depth >= MAX_SCRIPT_HOPS) {
			walk_print(w, "  %s: a script, not loadable\n", path);
			return 0;
		}
		if (!script_interpreter(script, interp, sizeof(interp))) {
			walk_error(w, path, "a #! script whose interpreter cannot be found");
			return -ENOENT;
		}
		walk_print(w, "%s: a script run by %s\n", path, interp);
		return walk_object(w, interp, NULL, NULL, depth + 1);
	}
	if (ret < 0) {
		if (!name) {
			walk_error(w, path, err);
			return ret;
		}
		walk_print(w, "  %s => %s: cannot inspect: %s\n", name, path, err);
		return 0;
	}
	if (!name && stat(path, &st) == 0)
		walk_visited(w, &st);
	walk_note(w, path, &f);
	if (!name)
		walk_print(w, "%s: %s\n", path, f.why);
	else if (w->verbose || f.verdict != INSPECT_NONE)
		walk_print(w, "  %s => %s: %s\n", name, path, f.why);
	else
		w->hidden++;
	if (!w->follow || depth >= MAX_DEPTH || w->nseen_objects >= MAX_OBJECTS)
		goto out_release;
	/* $ORIGIN: the executable's real directory, a library's as found. */
	if (!name && realpath(path, real))
		snprintf(origin, sizeof(origin), "%s", real);
	else
		snprintf(origin, sizeof(origin), "%s", path);
	slash = strrchr(origin, '/');
	if (slash && slash != origin)
		*slash = '\0';
	else
		snprintf(origin, sizeof(origin), "%s", slash ? "/" : ".");
	me.rpath = f.has_rpath && !f.has_runpath ? f.rpath : NULL;
	me.origin = origin;
	me.up = up;
	for (i = 0; i < f.nneeded; i++) {
		if (!walk_resolve(w, f.needed[i], &f, origin, up, dep, sizeof(dep))) {
			walk_print(w, "  %s: not found\n", f.needed[i]);
			continue;
		}
		walk_object(w, dep, f.needed[i], &me, depth + 1);
	}
out_release:
	elf_facts_release(&f);
	return 0;
}

/* Prints the overall verdict and returns the exit status it means. */
static int walk_conclude(struct walk *w, FILE *out)
{
	int status;

	if (w->nseen) {
		fprintf(out, "verdict: seen: host-to-device copies made through the shared CUDA runtime (%s%s) will be seen by vrampool.\n",
			w->seen_file, w->nseen > 1 ? " and others" : "");
		if (w->nstatic || w->ndriver)
			fprintf(out, "note: copies made inside %s%s are not seen: %s.\n",
				w->worst_file,
				w->nstatic + w->ndriver > 1 ? " and others" : "",
				w->worst == INSPECT_STATIC ? "it carries its own CUDA runtime" :
				"it calls the driver API");
		return TOOL_EXIT_OK;
	}
	status = TOOL_EXIT_NOT_SEEN;
	switch (w->worst) {
	case INSPECT_STATIC:
		fprintf(out, "verdict: not seen: %s carries the CUDA runtime inside itself, so a preloaded library cannot see its copies.\n"
			"advice: if it is your program, rebuild it with `nvcc -cudart shared` (or link with -lcudart, not -lcudart_static).\n",
			w->worst_file);
		break;
	case INSPECT_DRIVER:
		fprintf(out, "verdict: not seen by this version: %s uses the CUDA driver API directly (cuMemcpyHtoD*, or its own dlopen of libcuda.so.1), which vrampool does not interpose yet.\n",
			w->worst_file);
		break;
	case INSPECT_PROVIDER:
		fprintf(out, "verdict: not seen: %s is the CUDA runtime (or an interposer); inspect the program that uses it.\n",
			w->worst_file);
		break;
	case INSPECT_RUNTIME_OTHER:
		fprintf(out, "verdict: not seen: %s uses the shared CUDA runtime but none of the copies vrampool interposes (cudaMemcpy, cudaMemcpyAsync).\n",
			w->worst_file);
		break;
	default:
		fprintf(out, "verdict: not seen: no CUDA use found. A program that loads CUDA at run time with dlopen (Python with PyTorch) is not covered: inspect the libraries it loads, e.g. `vrampool inspect .../site-packages/torch/lib/*.so`.\n");
		break;
	}
	return status;
}

void inspect_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool inspect [-v] [--no-deps] FILE...\n"
		"\n"
		"Tells whether the host-to-device copies of each program or shared\n"
		"library will be seen by the preloaded vrampool library: it must import\n"
		"cudaMemcpy/cudaMemcpyAsync from a shared libcudart. Follows DT_NEEDED as\n"
		"the dynamic linker does, and a #! script's interpreter. A FILE without a\n"
		"slash that does not exist is looked up in $PATH.\n"
		"\n"
		"  -v, --verbose   list every dependency, also those with no CUDA use\n"
		"      --no-deps   inspect the named files only\n"
		"\n"
		"Exit status: 0 seen, 1 not seen, 2 error (bad usage, unreadable input).\n");
}

int inspect_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-deps", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct walk w;
	char path[PATH_MAX];
	int c, i, status;

	memset(&w, 0, sizeof(w));
	w.follow = true;
	w.out = stdout;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+vh", options, NULL)) != -1) {
		switch (c) {
		case 'v':
			w.verbose = true;
			break;
		case 'n':
			w.follow = false;
			break;
		case 'h':
			inspect_usage(stdout);
			return TOOL_EXIT_OK;
		default:
			inspect_usage(stderr);
			return TOOL_EXIT_ERROR;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vrampool inspect: no file named\n");
		inspect_usage(stderr);
		return TOOL_EXIT_ERROR;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		fprintf(stderr, "vrampool inspect: libelf: %s\n", elf_errmsg(-1));
		return TOOL_EXIT_ERROR;
	}
	for (i = optind; i < argc; i++) {
		snprintf(path, sizeof(path), "%s", argv[i]);
		if (!strchr(argv[i], '/') && access(argv[i], F_OK) != 0 &&
		    !path_search(argv[i], path, sizeof(path)))
			snprintf(path, sizeof(path), "%s", argv[i]);
		w.hidden = 0;
		walk_object(&w, path, NULL, NULL, 0);
		if (w.hidden)
			printf("  (%d more librar%s with no CUDA use; -v lists them)\n",
			       w.hidden, w.hidden == 1 ? "y" : "ies");
	}
	if (w.error && !w.nseen && w.worst == INSPECT_NONE && !w.nseen_objects)
		status = TOOL_EXIT_ERROR;
	else
		status = walk_conclude(&w, stdout);
	if (w.error)
		status = TOOL_EXIT_ERROR;
	walk_release(&w);
	return status;
}

int inspect_program_verdict(const char *program, char *why, size_t why_size)
{
	struct walk w;
	char path[PATH_MAX];
	int ret;

	memset(&w, 0, sizeof(w));
	w.follow = true;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(why, why_size, "libelf: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	if (!path_search(program, path, sizeof(path))) {
		snprintf(why, why_size, "%s: not found in PATH", program);
		return -ENOENT;
	}
	ret = walk_object(&w, path, NULL, NULL, 0);
	if (ret < 0) {
		snprintf(why, why_size, "%s", w.error_msg);
		goto out_release;
	}
	if (w.nseen) {
		snprintf(why, why_size, "%s: seen", w.seen_file);
		ret = INSPECT_SEEN;
	} else {
		snprintf(why, why_size, "%s: %s", w.worst_file[0] ? w.worst_file : path,
			 w.worst_file[0] ? w.worst_why : "no CUDA use");
		ret = (int)w.worst;
	}
out_release:
	walk_release(&w);
	return ret;
}
