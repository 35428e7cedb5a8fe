/*
 * fuzz_elf.c: the ELF reader of `vrampool inspect` (analysis/elf_facts.c,
 * with libelf): what one file says about its copies and how it loads.
 *
 * The input is the file. Promises checked (elf_facts.h): elf_facts_read
 * returns 0, or -EINVAL with a one-line message; a read file's strings are
 * terminated and its DT_NEEDED count in range, each name a string;
 * elf_facts_release frees them (a leak is a finding). libelf maps the
 * in-memory file: a read past its last page faults, which the fuzzer
 * records as a crash.
 *
 * The seeds are small objects made with gcc -nostdlib (a library importing
 * runtime and driver copies, dlopen and dlsym and naming libcuda.so.1 with
 * a DT_RUNPATH; one defining cudaMemcpyAsync and cuInit and holding the
 * runtime's error-name string, also stripped; an executable with
 * PT_INTERP; a relocatable object), one claiming to be 32-bit and one cut
 * short.
 */
#include <stdlib.h>
#include <string.h>

#include "elf_facts.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct elf_facts *f = calloc(1, sizeof(*f));
	char msg[512];
	int fd, err, i;

	if (!f)
		abort();
	if (!ready && elf_facts_init(msg, sizeof(msg)) != 0)
		fuzz_fail(msg, data, size);
	ready = 1;
	fuzz_file(data, size, &fd);
	memset(msg, 'x', sizeof(msg));
	err = elf_facts_read(f, fd, (off_t)size, msg, sizeof(msg));
	if (err) {
		if (err > 0 || !msg[0] || !fuzz_terminated(msg, sizeof(msg)) || strchr(msg, '\n'))
			fuzz_fail("a refused ELF file without a one-line message", data, size);
	} else {
		if (f->nneeded < 0 || f->nneeded > ELF_FACTS_MAX_NEEDED)
			fuzz_fail("a DT_NEEDED count out of range", data, size);
		for (i = 0; i < f->nneeded; i++)
			if (!f->needed[i])
				fuzz_fail("a DT_NEEDED name missing", data, size);
		if (!fuzz_terminated(f->soname, sizeof(f->soname)) ||
		    !fuzz_terminated(f->rpath, sizeof(f->rpath)) ||
		    !fuzz_terminated(f->runpath, sizeof(f->runpath)) ||
		    !fuzz_terminated(f->runtime_copies, sizeof(f->runtime_copies)) ||
		    !fuzz_terminated(f->driver_copies, sizeof(f->driver_copies)) ||
		    !fuzz_terminated(f->other_copies, sizeof(f->other_copies)) ||
		    !fuzz_terminated(f->static_evidence, sizeof(f->static_evidence)))
			fuzz_fail("a string of the ELF facts is not terminated", data, size);
	}
	elf_facts_release(f);
	free(f);
	return 0;
}
