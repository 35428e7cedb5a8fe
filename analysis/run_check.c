/*
 * run_check.c: what `vrampool run` checks before it starts CMD (run.h).
 *
 * It checks what the library would only find out later: every flag and
 * every inherited VRAMPOOL_* variable goes through the library's own parser
 * (shim/core/config.c, linked into the command), whose one-line complaints
 * are shown as they are and stop the launch with exit 2; the stats and
 * telemetry paths must lie in a writable directory. Then it asks inspect
 * whether CMD's copies can be seen at all and warns when not.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/config_names.h"
#include "run.h"
#include "vrampool.h"

/* The environment being checked, for child_getenv (the command is single-threaded). */
static const struct child_env *checked_env;

/* getenv as CMD will see it: config_load's getter. */
static const char *child_getenv(const char *name)
{
	int i;

	for (i = 0; checked_env && i < checked_env->n; i++)
		if (strcmp(checked_env->v[i].name, name) == 0)
			return checked_env->v[i].value;
	return getenv(name);
}

/* The flag of `vrampool run` that sets variable NAME, when O used it. */
static const char *flag_of(const char *name, const struct run_options *o)
{
	if (strncmp(name, "VRAMPOOL_LAYOUT=", 16) == 0 && o->layout)
		return "--layout";
	if (strncmp(name, "VRAMPOOL_BUDGET=", 16) == 0 && o->budget)
		return "--budget";
	if (strncmp(name, "VRAMPOOL_TELEMETRY_S=", 21) == 0 && o->interval)
		return "--interval";
	if (strncmp(name, "VRAMPOOL_TELEMETRY=", 19) == 0 && o->telemetry_flag)
		return "--telemetry";
	if (strncmp(name, "VRAMPOOL_STATS=", 15) == 0 && o->stats_flag)
		return "--stats";
	return NULL;
}

/*
 * Runs the library's own parser over the environment E. Its complaints,
 * one line per bad variable, are shown as the library prints them (less
 * "running as pass-through": here nothing runs). Returns the number of bad
 * variables, or a negative errno when the check itself failed.
 */
static int run_check_variables(const struct child_env *e, const struct run_options *o)
{
	static const char prefix[] = "vrampool: ", suffix[] = "; running as pass-through";
	struct config *c;
	char out[32768], *line, *nl;
	size_t len = 0;
	ssize_t n;
	int pipefd[2], saved, bad;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		free(c);
		return -errno;
	}
	fflush(stderr);
	saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (saved < 0 || dup2(pipefd[1], STDERR_FILENO) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		if (saved >= 0)
			close(saved);
		free(c);
		return -EIO;
	}
	close(pipefd[1]);
	checked_env = e;
	bad = config_load(c, child_getenv);
	checked_env = NULL;
	config_warn_names(environ);     /* issue 19: unknown VRAMPOOL_* names, one line, never fatal */
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (len + 1 < sizeof(out) &&
	       (n = read(pipefd[0], out + len, sizeof(out) - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(pipefd[0]);
	for (line = out; *line; line = nl) {
		const char *flag;
		size_t l;

		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		else
			nl = line + strlen(line);
		if (strncmp(line, prefix, sizeof(prefix) - 1) == 0)
			line += sizeof(prefix) - 1;
		l = strlen(line);
		if (l >= sizeof(suffix) - 1 && strcmp(line + l - (sizeof(suffix) - 1), suffix) == 0)
			line[l - (sizeof(suffix) - 1)] = '\0';
		flag = flag_of(line, o);
		fprintf(stderr, "vrampool run: %s%s%s%s\n", esc(line), flag ? " (set by " : "",
			flag ? flag : "", flag ? ")" : "");
	}
	free(c);
	return bad;
}

/* This process's rank as the library reads it (RANK, LOCAL_RANK, ...), for %r; NULL when none. */
static const char *run_rank(void)
{
	static const char *const names[] = {
		"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
	};
	const char *v;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((v = getenv(names[i])) != NULL && *v)
			return v;
	return NULL;
}

int run_expand(const char *pattern, long pid, char *out, size_t size)
{
	char host[256];

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	return config_expand_path(pattern, pid, run_rank(), host, out, size);
}

int run_path_writable(const char *path, char *why, size_t size)
{
	struct stat st;
	bool exists = stat(path, &st) == 0;
	int fd, err;

	why[0] = '\0';
	if (exists && !S_ISREG(st.st_mode))
		return 0;	/* a FIFO or a device: written in place, never opened here */
	if (exists)
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	else
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		snprintf(why, size, "cannot %s %s: %s", exists ? "write" : "create", esc(path),
			 strerror(errno));
		return err;
	}
	close(fd);
	if (!exists)
		unlink(path);
	return 0;
}

/* Whether the regular file PATH holds something other than a vrampool dump (and is not empty). */
static bool run_foreign_file(const char *path)
{
	static const char magic[] = "{\"vrampool\":";
	char head[sizeof(magic) - 1];
	struct stat st;
	ssize_t n;
	int fd;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return false;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, head, sizeof(head));
	close(fd);
	return n != (ssize_t)sizeof(head) || memcmp(head, magic, sizeof(head)) != 0;
}

/*
 * Checks that the library will be able to write VAR's file PATTERN: its
 * directory exists and is writable, what is at the path, if anything, is
 * a regular file, a FIFO or a device (written in place), one can be written
 * there, and with FOREIGN, a regular file there is a vrampool dump (or
 * empty). Returns 0, or -EINVAL after one line on stderr.
 */
static int run_check_path(const char *var, const char *pattern, const char *flag, bool foreign)
{
	char path[PATH_MAX], dir[PATH_MAX], why[PATH_MAX + 128], *slash;
	struct stat st;

	if (run_expand(pattern, 0, path, sizeof(path)) != 0) {
		fprintf(stderr, "vrampool run: %s='%s': the path is too long\n", var, esc(pattern));
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	why[0] = '\0';
	if (stat(dir, &st) != 0)
		snprintf(why, sizeof(why), "the directory %s %s", esc(dir),
			 errno == ENOENT ? "does not exist" : strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "%s is not a directory", esc(dir));
	else if (access(dir, W_OK | X_OK) != 0)
		snprintf(why, sizeof(why), "cannot write in %s: %s", esc(dir), strerror(errno));
	else if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "%s is a directory", esc(path));
	else if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
		 !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		snprintf(why, sizeof(why), "%s is not a regular file, a FIFO or a device", esc(path));
	else if (run_foreign_file(path) && foreign)
		snprintf(why, sizeof(why), "%s exists and is not a vrampool dump: not overwriting it (--force overwrites it)",
			 esc(path));
	else if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && run_foreign_file(path) &&
		 truncate(path, 0) != 0)
		/* --force: the library leaves a foreign file alone (never
		 * overwriting what it did not write), an empty one it fills */
		snprintf(why, sizeof(why), "cannot empty %s for --force: %s", esc(path), strerror(errno));
	else
		run_path_writable(path, why, sizeof(why));
	if (!why[0])
		return 0;
	fprintf(stderr, "vrampool run: %s='%s': %s%s%s%s\n", var, esc(pattern), why,
		flag ? " (set by " : "", flag ? flag : "", flag ? ")" : "");
	return -EINVAL;
}

int run_check(const struct child_env *e, const struct run_target *t, int n,
	      const struct run_options *o)
{
	int bad = run_check_variables(e, o), paths = 0, i;

	if (bad < 0) {
		fprintf(stderr, "vrampool run: cannot check the variables: %s\n", strerror(-bad));
		return TOOL_EXIT_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (!t[i].tmpdir[0])
			paths += run_check_path("VRAMPOOL_STATS", t[i].pattern,
						o->stats_flag ? "--stats" : NULL, !o->force) != 0;
		if (t[i].telemetry[0])
			paths += run_check_path("VRAMPOOL_TELEMETRY", t[i].telemetry,
						o->telemetry_flag ? "--telemetry" : NULL, false) != 0;
	}
	if (!bad && !paths)
		return 0;
	fprintf(stderr, "vrampool run: %s not started: fix the value%s above (the library would have run it %s)\n",
		esc(o->cmd[0]), bad + paths > 1 ? "s" : "",
		bad ? "as a pass-through" : "and lost its stats at exit");
	return TOOL_EXIT_ERROR;
}

void run_preflight(const struct run_options *o)
{
	char why[1024];
	int v = inspect_program_verdict(o->cmd[0], why, sizeof(why));

	if (v < 0)
		return;
	switch (v) {
	case INSPECT_STATIC:
	case INSPECT_UNREACHABLE:
	case INSPECT_DRIVER:
	case INSPECT_OTHER:
	case INSPECT_PROVIDER:
	case INSPECT_VENDOR:	/* an NVIDIA library's own copies (inspect_verdict.h) */
		fprintf(stderr, "vrampool run: warning: the copies of %s will not be seen: %s\n"
			"  (`vrampool inspect %s` says what to do); running it anyway.\n",
			esc(o->cmd[0]), why, esc(o->cmd[0]));
		break;
	case INSPECT_NONE:
		if (o->verbose)
			fprintf(stderr, "vrampool run: note: %s does not link CUDA; its copies are seen only if it loads CUDA at run time (as PyTorch does).\n",
				esc(o->cmd[0]));
		break;
	default:
		break;
	}
}
