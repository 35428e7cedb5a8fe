/*
 * oneshot: a program whose SIGTERM handler runs once (SA_RESETHAND), as
 * tests/e2e/report.sh runs it with and without the shim: its output and
 * its end must be the same, and with the shim the second SIGTERM, which
 * the default ends it with, must leave the final dump.
 *
 * Usage: oneshot ROUTE, ROUTE sigaction (SA_RESETHAND) or sysv_signal
 * (what signal() is in a strict ISO C build). After one CUDA call it sets
 * its handler with ROUTE, asks what is installed, raises SIGTERM (its
 * handler prints and returns), asks again (the default is back) and
 * raises SIGTERM again: the default kills it (143 in a shell).
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_term(int sig)
{
	static const char msg[] = "handler ran\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
}

static void query(const char *when)
{
	struct sigaction now;

	sigaction(SIGTERM, NULL, &now);
	printf("%s: %s%s\n", when, now.sa_handler == SIG_DFL ? "SIG_DFL" : now.sa_handler == on_term ?
	       "handler" : "other", now.sa_flags & SA_RESETHAND ? ", once" : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	void *dev = NULL;

	if (argc != 2 || (strcmp(argv[1], "sigaction") != 0 && strcmp(argv[1], "sysv_signal") != 0)) {
		fprintf(stderr, "usage: oneshot sigaction|sysv_signal\n");
		return 2;
	}
	if (cudaMalloc(&dev, 4096) != cudaSuccess) {
		fprintf(stderr, "oneshot: cudaMalloc failed\n");
		return 2;
	}
	cudaFree(dev);
	if (strcmp(argv[1], "sigaction") == 0) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESETHAND;
		sigaction(SIGTERM, &sa, NULL);
	} else {
		sysv_signal(SIGTERM, on_term);
	}
	query("set");
	raise(SIGTERM);
	query("after the first SIGTERM");
	raise(SIGTERM);
	printf("survived the second SIGTERM\n");
	return 0;
}
