/*
 * forker: a CUDA program that forks. The parent makes host-to-device copies
 * before and after the fork; the child never touches CUDA and exits through
 * exit(3), so atexit handlers run in it. Used to check that a preloaded
 * shim reports once, for the parent only. With --child-cuda the child makes
 * copies of its own (it must then report its own numbers, not the parent's).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKER_BYTES 4096

static int forker_copy(int times)
{
	static char host[FORKER_BYTES];
	void *dev = NULL;
	cudaError_t err;

	memset(host, 7, sizeof(host));
	err = cudaMalloc(&dev, sizeof(host));
	for (int i = 0; err == cudaSuccess && i < times; i++)
		err = cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice);
	if (err != cudaSuccess) {
		fprintf(stderr, "forker: %s\n", cudaGetErrorName(err));
		return 3;
	}
	cudaFree(dev);
	return 0;
}

int main(int argc, char **argv)
{
	int child_cuda = argc > 1 && strcmp(argv[1], "--child-cuda") == 0;
	int status = 0;
	pid_t pid;

	if (forker_copy(3))
		return 3;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("forker: fork");
		return 3;
	}
	if (pid == 0)
		exit(child_cuda ? forker_copy(2) : 0);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forker: child failed\n");
		return 3;
	}
	if (forker_copy(2))
		return 3;
	printf("forker: parent %ld child %ld ok\n", (long)getpid(), (long)pid);
	return 0;
}
