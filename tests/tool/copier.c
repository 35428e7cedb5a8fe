/*
 * copier: a tiny program for the `vrampool run` tests. It makes COPIES
 * host-to-device copies of ROW bytes through the shared CUDA runtime, then
 * exits with STATUS, or kills itself with signal N when STATUS is "sig:N".
 * With "fork" as its fourth argument, a child process makes the copies and
 * the parent none (a launcher that forks its workers).
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Makes COPIES copies of ROW bytes; errors are printed and ignored. */
static void copy_rows(int copies, size_t row)
{
	unsigned char *host = calloc(1, row), *dev = NULL;
	cudaError_t err;
	int i;

	if (!host)
		return;
	err = cudaMalloc((void **)&dev, row);
	if (err != cudaSuccess)
		fprintf(stderr, "copier: cudaMalloc: %s\n", cudaGetErrorName(err));
	for (i = 0; i < copies; i++) {
		err = cudaMemcpy(dev, host, row, cudaMemcpyHostToDevice);
		if (err != cudaSuccess && i == 0)
			fprintf(stderr, "copier: cudaMemcpy: %s\n", cudaGetErrorName(err));
	}
	if (dev)
		cudaFree(dev);
	free(host);
}

int main(int argc, char **argv)
{
	int copies = argc > 1 ? atoi(argv[1]) : 4;
	size_t row = argc > 2 ? (size_t)atol(argv[2]) : 4096;
	const char *status = argc > 3 ? argv[3] : "0";
	int fork_worker = argc > 4 && strcmp(argv[4], "fork") == 0;
	pid_t pid;

	if (fork_worker) {
		pid = fork();
		if (pid == 0) {
			copy_rows(copies, row);
			return 0;
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
		cudaGetLastError();
	} else {
		copy_rows(copies, row);
	}
	printf("copier: done\n");
	fflush(stdout);
	if (strncmp(status, "sig:", 4) == 0)
		raise(atoi(status + 4));
	return atoi(status);
}
