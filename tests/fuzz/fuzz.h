/*
 * fuzz.h: the contract of the fuzz targets (tests/fuzz/fuzz_*.c) and the
 * helpers they share (fuzz.c).
 *
 * Each target is one file that defines LLVMFuzzerTestOneInput for one
 * reader of untrusted text: the VRAMPOOL_* variables, the layout grammar,
 * sizes (shim/core), the stats dump and its report printers, the telemetry
 * file, the terminal escaping of strings, the ELF reader (analysis/). A
 * target feeds the input to the code under test and checks the promises
 * its header makes (a result in range, a string terminated, a round trip
 * that holds); a broken promise calls fuzz_fail, which aborts, so the
 * fuzzer records the input as a finding just as it does a sanitizer report.
 *
 * Two builds of the same target files (the Makefile):
 *  - `make fuzz`: clang, -fsanitize=fuzzer,address,undefined; libFuzzer
 *    owns main and mutates from tests/fuzz/corpus/<target>/;
 *  - every `make`: the system compiler with AddressSanitizer and UBSan
 *    (float casts too), linked with replay.c's main, which runs the target
 *    once on each file it is given: scripts/test.sh replays the corpus and
 *    each finding checked in under tests/fuzz/regress/<target>/.
 *
 * Targets keep no state between inputs except what they set up once, and
 * free what they allocate (leaks are findings too).
 */
#ifndef VRAMPOOL_FUZZ_H
#define VRAMPOOL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The entry point of a target: runs one input; always returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A copy of the input with a NUL after it, in memory the caller frees
 * (the parsers read C strings; an embedded NUL ends the string early, as
 * it would in the environment). Aborts when out of memory.
 */
char *fuzz_string(const uint8_t *data, size_t size);

/*
 * Puts the input in an anonymous in-memory file (one per process, rewritten
 * each time) and returns a path that opens it ("/proc/self/fd/N"); *fd, when
 * not NULL, gets a descriptor open on it at offset 0. Aborts on failure.
 */
const char *fuzz_file(const uint8_t *data, size_t size, int *fd);

/* A stream that discards what is written to it (the printers' output). */
void *fuzz_devnull(void);

/* Reports a broken promise, with the input's first bytes, and aborts. */
void fuzz_fail(const char *what, const uint8_t *data, size_t size) __attribute__((noreturn));

/* Whether s is NUL-terminated within len bytes. */
int fuzz_terminated(const char *s, size_t len);

#endif
