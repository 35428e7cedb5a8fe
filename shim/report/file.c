/*
 * file: the report's files: the dump written through an exclusive
 * temporary name and a rename (or in place for a FIFO or a device), the
 * error messages, and the load-time checks of the paths (file.h is the
 * contract).
 */
#include "report/file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"

#define REPORT_TMP_TRIES 16     /* temporary names tried before giving up */

static mode_t report_umask = 022;

/*
 * The description of an errno, from a fixed table: strerror may translate
 * (a lock and an allocation), which the signal path cannot afford.
 */
static const char *report_strerror(int err)
{
	switch (err) {
	case ENOENT: return "no such file or directory";
	case EACCES: return "permission denied";
	case EPERM: return "operation not permitted";
	case EROFS: return "read-only file system";
	case ENOSPC: return "no space left on device";
	case EDQUOT: return "disk quota exceeded";
	case ENOTDIR: return "not a directory";
	case EISDIR: return "is a directory";
	case EEXIST: return "every temporary name is taken";
	case ELOOP: return "a symbolic link (not followed)";
	case ENAMETOOLONG: return "name too long";
	case ENXIO: return "a FIFO or device (not written)";
	case EINVAL: return "not a regular file (not written)";
	case EIO: return "input/output error";
	}
	return "error";
}

void report_note(int *last, int err, const char *what, const char *path)
{
	char shown[512];

	if (err == 0 || err == *last) {
		*last = err;
		return;
	}
	*last = err;
	log_line("could not write the %s to '%s': %s (errno %d)", what,
		 log_escape(shown, sizeof(shown), path), report_strerror(-err), -err);
}

int report_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void (*report_race_hook)(const char *path);	/* tests: between the check and the open */

void report_file_set_race_hook(void (*hook)(const char *path))
{
	report_race_hook = hook;
}

/* Writes all of data to fd, a FIFO or device opened non-blocking, giving a stalled reader REPORT_SPECIAL_WAIT_MS. */
static int report_write_nonblocking(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n >= 0) {
			data += n;
			len -= (size_t)n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int r = poll(&p, 1, REPORT_SPECIAL_WAIT_MS);

			if (r == 0)
				return -ETIMEDOUT;
			if (r < 0 && errno != EINTR)
				return -errno;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/*
 * A stats path that names a device or a FIFO, directly or through a link
 * (/dev/null, /dev/stderr, a pipe to a collector), is written to as it is:
 * renaming a file over it would replace the node. The check (lstat, and
 * stat through a link) and the open are two moments: what is opened is
 * what fstat says of the open descriptor, never the check. The node itself
 * is opened with O_NOFOLLOW, so a link put in its place meanwhile is never
 * followed; a link the user named is followed, and what it leads to is
 * written only if it is still a FIFO or a device. Anything else found at
 * the open (a regular file, a link where there was none) is left alone
 * and the caller writes the dump the regular way, which replaces the name,
 * never what a link points to. Opening never blocks (a FIFO nobody reads
 * fails with ENXIO, O_NOCTTY: a terminal does not become the process's);
 * a reader that stops reading is given REPORT_SPECIAL_WAIT_MS per stall,
 * then the write gives up. Returns 0 or -errno when written here (or
 * refused: -EISDIR for a directory, socket or block device), 1 when the
 * dump is to be written the regular way.
 */
static int report_write_special(const char *path, const char *data, size_t len)
{
	int flags = O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, fd, err;
	struct stat st;

	if (lstat(path, &st) != 0)
		return 1;
	if (!S_ISLNK(st.st_mode))
		flags |= O_NOFOLLOW;
	else if (stat(path, &st) != 0)
		return 1;
	if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
		return -EISDIR;
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return 1;
	if (report_race_hook)
		report_race_hook(path);
	fd = open(path, flags);
	if (fd < 0)
		return errno == ELOOP ? 1 : -errno;
	if (fstat(fd, &st) != 0 || (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))) {
		close(fd);
		return 1;
	}
	err = report_write_nonblocking(fd, data, len);
	if (close(fd) != 0 && err == 0 && errno != EINTR)
		err = -errno;
	return err;
}

int report_path_foreign(const char *path)
{
	static const char magic[] = REPORT_DUMP_MAGIC;
	char head[sizeof(magic) - 1];
	struct stat st;
	ssize_t n;
	int fd;

	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT && errno != ELOOP;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		return 0;
	}
	do
		n = read(fd, head, sizeof(head));
	while (n < 0 && errno == EINTR);
	close(fd);
	return n != (ssize_t)sizeof(head) || memcmp(head, magic, sizeof(head)) != 0;
}

int report_write_file(const char *path, const char *data, size_t len)
{
	char tmp[REPORT_PATH_MAX + 48];
	long pid = (long)getpid();
	int fd = -1, i, n, err;

	err = report_write_special(path, data, len);
	if (err <= 0)
		return err;
	for (i = 0; i < REPORT_TMP_TRIES; i++) {
		if (i == 0)
			n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, pid);
		else
			n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%d", path, pid, i);
		if (n < 0 || (size_t)n >= sizeof(tmp))
			return -ENAMETOOLONG;
		/* O_EXCL: never a file, link or FIFO someone else put there. */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	err = report_write_all(fd, data, len);
	/* the mode a plain creat(2) would have given; a file system that refuses is no reason to fail */
	if (err == 0)
		(void)fchmod(fd, 0666 & ~report_umask);
	if (close(fd) != 0 && err == 0)
		err = -errno;
	if (err == 0 && rename(tmp, path) != 0)
		err = -errno;
	if (err != 0)
		unlink(tmp);
	return err;
}

void report_expand_path(const char *var, const char *pattern, const char *rank, const char *host, char *out)
{
	out[0] = '\0';
	if (pattern[0] == '\0')
		return;
	if (config_expand_path(pattern, (long)getpid(), rank, host, out, REPORT_PATH_MAX) < 0)
		log_line("%s is too long once %%p, %%r and %%h are expanded: nothing will be written", var);
}

int report_check_dir(const char *var, const char *path)
{
	char dir[REPORT_PATH_MAX], shown[512];
	const char *slash = strrchr(path, '/');
	struct stat st;
	int err = 0;

	if (path[0] == '\0')
		return 0;
	/* a device or FIFO is written in place: its directory is not used */
	if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) &&
	    faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0)
		return 0;
	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
	} else if (slash == path) {
		snprintf(dir, sizeof(dir), "/");
	} else {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	if (stat(dir, &st) != 0)
		err = errno;
	else if (!S_ISDIR(st.st_mode))
		err = ENOTDIR;
	else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0)
		err = errno;
	if (err == 0)
		return 0;
	log_line("%s: cannot write in '%s': %s; the job runs on, and the file is tried again later",
		 var, log_escape(shown, sizeof(shown), dir), report_strerror(err));
	return -err;
}

/* The process's umask, read without changing it (/proc); 022 when unknown. */
static mode_t report_read_umask(void)
{
	char buf[2048], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 022;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 022;
	buf[n] = '\0';
	p = strstr(buf, "\nUmask:");
	if (p == NULL)
		return 022;
	return (mode_t)strtoul(p + 7, NULL, 8) & 0777;
}

void report_file_setup(void)
{
	report_umask = report_read_umask();
}
