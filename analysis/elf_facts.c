/*
 * elf_facts.c: one ELF object read with libelf/gelf (the idioms of
 * elfutils' elfclassify.c: elf_version first, gelf_getehdr into storage,
 * elf_errmsg(-1) for the reason, one elf_end), reduced to the facts of
 * elf_facts.h. The tables below name the entry points vrampool interposes:
 * keep them in step with the shim's own table.
 */
#include <ar.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf_facts.h"

/* Runtime copy entry points the shim interposes (DESIGN.md, issue 10). */
static const char *const runtime_interposed[] = {
	"cudaMemcpy", "cudaMemcpy_ptds", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz",
	"cudaMemcpy2D", "cudaMemcpy2D_ptds", "cudaMemcpy2DAsync", "cudaMemcpy2DAsync_ptsz",
	"cudaMemcpyBatchAsync", "cudaMemcpyBatchAsync_ptsz",
};

/*
 * Driver copy entry points the shim interposes, besides every
 * cuMemcpyHtoD* form (the old 32-bit ABI names included).
 */
static const char *const driver_interposed[] = {
	"cuMemcpy", "cuMemcpy_ptds", "cuMemcpyAsync", "cuMemcpyAsync_ptsz",
	"cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz",
	"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz",
	"cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz",
};

/* Exports that make a shared object the runtime (or an interposer of it). */
static const char *const runtime_exports[] = {
	"cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz", "cudaMemcpy_ptds",
	"cudaMalloc",
};

/* Exports that make a shared object the driver (or its stub). */
static const char *const driver_exports[] = {
	"cuInit", "cuGetProcAddress_v2", "cuDriverGetVersion", "cuMemcpyHtoD_v2",
};

/* Symbols whose definition means the runtime itself is inside the object. */
static const char *const runtime_definitions[] = {
	"cudaMemcpyAsync", "cudaMemcpy", "cudaMalloc", "cudaGetErrorString",
	"cudaMemcpyAsync_ptsz", "cudaLaunchKernel",
};

/* The runtime's error-name table survives stripping. */
static const char runtime_signature[] = "cudaErrorMemoryAllocation";

/* The name a program passes to dlopen to reach the driver. */
static const char driver_soname[] = "libcuda.so.1";

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

/* Whether NAME is a driver API name: cu followed by a capital. */
static bool driver_name(const char *name)
{
	return name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

int elf_facts_init(char *err, size_t err_size)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, err_size, "libelf: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	return 0;
}

void elf_facts_release(struct elf_facts *f)
{
	int i;

	for (i = 0; i < f->nneeded; i++) {
		free(f->needed[i]);
		f->needed[i] = NULL;
	}
	f->nneeded = 0;
}

/* Records what one imported symbol says. */
static void elf_facts_import(struct elf_facts *f, const char *name)
{
	if (strcmp(name, "dlopen") == 0)
		f->imports_dlopen = true;
	if (strcmp(name, "dlsym") == 0 || strcmp(name, "dlvsym") == 0)
		f->imports_dlsym = true;
	if (strncmp(name, "cuda", 4) == 0 || strncmp(name, "__cuda", 6) == 0) {
		f->runtime_imports++;
		if (NAME_IN(name, runtime_interposed))
			list_add(f->runtime_copies, sizeof(f->runtime_copies), name);
		else if (strncmp(name, "cudaMemcpy", 10) == 0)
			list_add(f->other_copies, sizeof(f->other_copies), name);
	} else if (driver_name(name)) {
		f->driver_imports++;
		if (strncmp(name, "cuMemcpyHtoD", 12) == 0 || NAME_IN(name, driver_interposed))
			list_add(f->driver_copies, sizeof(f->driver_copies), name);
		else if (strncmp(name, "cuMemcpy", 8) == 0)
			list_add(f->other_copies, sizeof(f->other_copies), name);
	}
}

/* Records what one symbol says: an import, an export or a static runtime. */
static void elf_facts_symbol(struct elf_facts *f, const char *name,
			     const GElf_Sym *sym, bool dynamic)
{
	bool undefined = sym->st_shndx == SHN_UNDEF;
	int bind = GELF_ST_BIND(sym->st_info);
	bool exported = dynamic && (bind == STB_GLOBAL || bind == STB_WEAK) && !f->interp;

	if (!name[0])
		return;
	if (undefined) {
		if (dynamic)
			elf_facts_import(f, name);
		return;
	}
	if (exported && NAME_IN(name, runtime_exports)) {
		f->defines_runtime = true;
		return;
	}
	if (exported && NAME_IN(name, driver_exports)) {
		f->defines_driver = true;
		return;
	}
	if (f->static_evidence[0])
		return;
	if (NAME_IN(name, runtime_definitions) || strncmp(name, "__cudart", 8) == 0 ||
	    strncmp(name, "_ZN6cudart", 10) == 0)
		snprintf(f->static_evidence, sizeof(f->static_evidence), "defines %s", name);
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

	f->dynamic = true;
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
		if (dyn.d_tag == DT_NEEDED && f->nneeded < ELF_FACTS_MAX_NEEDED) {
			f->needed[f->nneeded] = strdup(s);
			if (f->needed[f->nneeded])
				f->nneeded++;
		} else if (dyn.d_tag == DT_SONAME) {
			snprintf(f->soname, sizeof(f->soname), "%s", s);
		} else if (dyn.d_tag == DT_RPATH) {
			f->has_rpath = true;
			snprintf(f->rpath, sizeof(f->rpath), "%s", s);
		} else if (dyn.d_tag == DT_RUNPATH) {
			f->has_runpath = true;
			snprintf(f->runpath, sizeof(f->runpath), "%s", s);
		}
	}
}

/* Whether the C string NEEDLE (its terminating NUL included) is in BUF. */
static bool has_c_string(const char *buf, size_t len, const char *needle)
{
	return memmem(buf, len, needle, strlen(needle) + 1) != NULL;
}

/*
 * Looks for the C strings of the runtime's error-name table and of the
 * driver's soname in every allocated, read-only, non-executable section
 * with contents: a stripped runtime's strings, a dlopen's argument.
 */
static void elf_facts_strings(struct elf_facts *f, Elf *elf, bool want_runtime)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *data;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
			continue;
		data = elf_rawdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		if (want_runtime && !f->static_evidence[0] &&
		    has_c_string(data->d_buf, data->d_size, runtime_signature))
			snprintf(f->static_evidence, sizeof(f->static_evidence),
				 "the runtime's error-name strings%s",
				 f->device_code ? " and device code" : "");
		if (!f->names_driver && has_c_string(data->d_buf, data->d_size, driver_soname))
			f->names_driver = true;
	}
}

int elf_facts_read(struct elf_facts *f, int fd, off_t size, char *err, size_t err_size)
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
			f->interp = true;
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
	elf_facts_strings(f, elf, !f->runtime_copies[0] && !f->defines_runtime &&
			  !f->static_evidence[0] && !f->runtime_imports);
	ret = 0;
out_close_elf:
	elf_end(elf);
	return ret;
}
