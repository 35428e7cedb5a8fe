/*
 * harness.h: what the emulated device's check suites share. Each case runs
 * in a fork()ed child that sets its FAKECUDA_* variables before its first
 * CUDA call (the emulation reads them then); the child exits with the low
 * byte of the line of the first failed CHK, or 0. An alarm turns a hang
 * into a failure. Each program's main() is cunit_suite_main() of
 * tests/unit/cunit_main.h, included here. Included by one .c per program:
 * the helpers are static.
 */
#ifndef FAKECUDA_CHECK_HARNESS_H
#define FAKECUDA_CHECK_HARNESS_H

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../unit/cunit_main.h"

/* In a child: exit with the line number when COND is false. */
#define CHK(cond) do { if (!(cond)) { \
	fprintf(stderr, "child check failed at line %d: %s\n", __LINE__, #cond); \
	_exit(__LINE__ & 0xff ? __LINE__ & 0xff : 1); } } while (0)

/* Runs FN in a child with the given NAME=VALUE settings; returns the raw
 * wait status. The child exits through exit() so atexit handlers run. */
static inline int in_child(void (*fn)(void), const char *const *env)
{
	pid_t pid = fork();
	int status = -1;

	if (pid == 0) {
		for (; env && *env; env += 2)
			setenv(env[0], env[1], 1);
		alarm(10);
		fn();
		exit(0);
	}
	waitpid(pid, &status, 0);
	return status;
}

/* Returns nonzero when the child exited 0; says why not on stderr. */
static inline int child_ok(int status)
{
	if (WIFSIGNALED(status))
		fprintf(stderr, "child died of signal %d\n", WTERMSIG(status));
	else if (WEXITSTATUS(status))
		fprintf(stderr, "child exited %d\n", WEXITSTATUS(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The emulation's ground-truth counter NAME, read mid-run. */
static inline unsigned long long counter(const char *name)
{
	unsigned long long (*fn)(const char *);

	*(void **)&fn = dlsym(RTLD_DEFAULT, "fakecuda_counter");
	CHK(fn != NULL);
	return fn(name);
}

static inline void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

/* A host function that holds its stream until the gate opens. */
static atomic_int gate;

static inline void hold_stream(void *arg)
{
	(void)arg;
	while (!atomic_load(&gate))
		sleep_ms(1);
}

#endif
