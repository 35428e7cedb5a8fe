/*
 * elf_facts: what one ELF file holds that tells whether the preloaded
 * library can see its host-to-device copies. libelf only: no file is
 * searched or opened here (loader.h does that), no verdict is drawn
 * (inspect.c does that).
 *
 * The facts, each read from the file itself:
 *  - which copy entry points it imports, from the runtime (cudaMemcpy*)
 *    and from the driver (cuMemcpyHtoD*), split into those vrampool
 *    interposes and the others;
 *  - whether it defines the runtime API (libcudart, an interposer) or the
 *    driver API (libcuda.so.1, its link-time stub), in its dynamic symbols;
 *  - whether it carries a runtime of its own (a static runtime): a defined
 *    cudaMemcpyAsync, cudaGetErrorString, __cudart* or cudart:: symbol in
 *    .symtab, or, when stripped, the runtime's error-name table: the C
 *    string "cudaErrorMemoryAllocation" (NUL-terminated: header text that
 *    merely mentions the name, as libnvrtc-builtins embeds, is not a table);
 *  - whether it names the driver library: the C string "libcuda.so.1" in
 *    any allocated read-only section (.rodata, .lrodata, ...), and imports
 *    dlopen and dlsym/dlvsym: the route by which a static runtime, or a
 *    library of its own accord, reaches the driver's entry points;
 *  - how it is loaded: PT_INTERP (started by the dynamic linker), the
 *    dynamic section (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH).
 *
 * Ownership: elf_facts_read allocates the DT_NEEDED names;
 * elf_facts_release frees them.
 */
#ifndef VRAMPOOL_ELF_FACTS_H
#define VRAMPOOL_ELF_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define ELF_FACTS_MAX_NEEDED 256	/* DT_NEEDED entries kept per object */

struct elf_facts {
	int elfclass;
	int machine;
	int type;			/* e_type: ET_EXEC, ET_DYN, ... */
	bool interp;			/* has PT_INTERP: started by the dynamic linker */
	bool dynamic;			/* has a dynamic section */
	bool has_symtab;
	bool device_code;		/* .nv_fatbin or .nvFatBinSegment */
	bool defines_runtime;		/* exports the runtime's copies or cudaMalloc */
	bool defines_driver;		/* exports cuInit, cuGetProcAddress_v2, ... */
	bool has_rpath, has_runpath;
	char soname[256];
	char rpath[4096];
	char runpath[4096];
	char *needed[ELF_FACTS_MAX_NEEDED];
	int nneeded;
	char runtime_copies[256];	/* imported runtime copies vrampool interposes */
	char driver_copies[256];	/* imported driver copies vrampool interposes */
	char other_copies[256];		/* imported copies it does not interpose */
	int runtime_imports;		/* cuda* / __cuda* imports */
	int driver_imports;		/* cu[A-Z]* imports */
	bool imports_dlopen;
	bool imports_dlsym;		/* dlsym or dlvsym */
	bool names_driver;		/* the C string "libcuda.so.1" in read-only data */
	char static_evidence[128];	/* why the runtime seems to be inside, or "" */
};

/* Sets libelf up (elf_version); returns 0 or -EINVAL with a message in ERR. */
int elf_facts_init(char *err, size_t err_size);

/*
 * Reads the ELF object open on FD (a regular file of SIZE bytes) into F,
 * which must be zeroed. Returns 0, or -EINVAL with a one-line message in
 * ERR for input that is not a usable 64-bit ELF object (truncated, corrupt,
 * 32-bit, an archive, a core dump). Every section is checked to lie inside
 * the file before any is read.
 */
int elf_facts_read(struct elf_facts *f, int fd, off_t size, char *err, size_t err_size);

/* Frees the DT_NEEDED names of F. */
void elf_facts_release(struct elf_facts *f);

#endif
