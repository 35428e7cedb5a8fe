/*
 * sigroutes: a program that sets SIGTERM's disposition through one of the
 * C library's functions, as tests/e2e/report.sh runs it with and without
 * the shim (issue 17, B): its output and its end must be the same.
 *
 * Usage: sigroutes SET RESET, each one of signal, sigaction, bsd_signal,
 * ssignal, sysv_signal, __sysv_signal, sigset (RESET also none). After
 * one CUDA call (the shim then owns SIGTERM), it installs its handler with
 * SET, asks what is installed, sets SIG_DFL back with RESET (unless none),
 * asks again, and raises SIGTERM: the default kills it (143 in a shell);
 * its handler prints and exits 42. With SET sigset it first holds the
 * signal twice (SIG_HOLD) and prints what sigset returns each time.
 * Each line names a disposition: SIG_DFL, SIG_IGN, SIG_HOLD, SIG_ERR,
 * handler (its own), or other (one it never set, such as the shim's).
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"	/* sigset */

sighandler_t bsd_signal(int sig, sighandler_t handler);	/* not declared under _GNU_SOURCE */

static void on_term(int sig)
{
	static const char msg[] = "handler ran\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(42);
}

static const char *name_of(sighandler_t h)
{
	if (h == SIG_DFL)
		return "SIG_DFL";
	if (h == SIG_IGN)
		return "SIG_IGN";
	if (h == SIG_HOLD)
		return "SIG_HOLD";
	if (h == SIG_ERR)
		return "SIG_ERR";
	return h == on_term ? "handler" : "other";
}

/* Sets SIGTERM to h through route; returns what the route says was there, or NULL for an unknown route. */
static const char *set_with(const char *route, sighandler_t h)
{
	struct sigaction sa, old;

	if (strcmp(route, "sigaction") == 0) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = h;
		sigemptyset(&sa.sa_mask);
		return sigaction(SIGTERM, &sa, &old) == 0 ? name_of(old.sa_handler) : "failed";
	}
	if (strcmp(route, "signal") == 0)
		return name_of(signal(SIGTERM, h));
	if (strcmp(route, "bsd_signal") == 0)
		return name_of(bsd_signal(SIGTERM, h));
	if (strcmp(route, "ssignal") == 0)
		return name_of(ssignal(SIGTERM, h));
	if (strcmp(route, "sysv_signal") == 0)
		return name_of(sysv_signal(SIGTERM, h));
	if (strcmp(route, "__sysv_signal") == 0)
		return name_of(__sysv_signal(SIGTERM, h));
	if (strcmp(route, "sigset") == 0)
		return name_of(sigset(SIGTERM, h));
	return NULL;
}

static void query(void)
{
	struct sigaction now;
	sigset_t mask;

	sigaction(SIGTERM, NULL, &now);
	sigprocmask(SIG_BLOCK, NULL, &mask);
	printf("query: %s%s\n", name_of(now.sa_handler), sigismember(&mask, SIGTERM) ? ", blocked" : "");
}

/* Sets SIGTERM to h through route and says what it was, then what it is. Returns 0, or 2 for an unknown route. */
static int step(const char *what, const char *route, sighandler_t h)
{
	const char *prev = set_with(route, h);

	if (!prev) {
		fprintf(stderr, "sigroutes: unknown route %s\n", route);
		return 2;
	}
	printf("%s with %s: previous %s\n", what, route, prev);
	query();
	return 0;
}

int main(int argc, char **argv)
{
	void *dev = NULL;

	if (argc != 3) {
		fprintf(stderr, "usage: sigroutes SET RESET\n");
		return 2;
	}
	if (cudaMalloc(&dev, 4096) != cudaSuccess) {
		fprintf(stderr, "sigroutes: cudaMalloc failed\n");
		return 2;
	}
	cudaFree(dev);
	if (strcmp(argv[1], "sigset") == 0) {
		printf("hold: previous %s\n", name_of(sigset(SIGTERM, SIG_HOLD)));
		printf("hold again: previous %s\n", name_of(sigset(SIGTERM, SIG_HOLD)));
		query();
	}
	if (step("set", argv[1], on_term) != 0)
		return 2;
	if (strcmp(argv[2], "none") != 0 && step("reset", argv[2], SIG_DFL) != 0)
		return 2;
	fflush(stdout);
	raise(SIGTERM);
	printf("survived SIGTERM\n");
	return 0;
}
