/*
 * file: how the report's files are written, and the checks of their paths.
 *
 * The dump is written to a temporary file created exclusively in the
 * target directory (O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, mode 0600, named
 * PATH.tmp.PID, then PATH.tmp.PID.N when that name is taken), given the
 * usual mode (0666 less the umask) and renamed over the path: a link or a
 * FIFO planted at a temporary name is never opened, never followed, never
 * waited on. Not fsynced (a crash of the machine may lose the last dump,
 * never leave a torn one in place of the previous). A path that names a
 * FIFO or a character device, directly or through a link (/dev/null,
 * /dev/stderr, a pipe to a collector), is written in place, never renamed
 * over; what is written there is decided by fstat on the open descriptor,
 * not by the check before it: the node itself is opened with O_NOFOLLOW,
 * and a regular file found at the open (a link put in its place, a link
 * retargeted) is never written through; the dump is then written the
 * regular way, which replaces the name only. A path shown in a message is
 * escaped (log_escape).
 *
 * Nothing here allocates or takes a lock (the error texts come from a fixed
 * table, not strerror), so the reporter thread can write the final dump
 * while another thread is stopped by a signal anywhere. report_file_setup
 * and report_check_dir run at load time only.
 */
#ifndef VRAMPOOL_FILE_H
#define VRAMPOOL_FILE_H

#include <stddef.h>

#define REPORT_PATH_MAX 4200            /* an expanded path, its NUL included */
#define REPORT_SPECIAL_WAIT_MS 2000     /* a FIFO's reader may stall a write this long, per stall */

/* Load time: reads the process's umask (without changing it) for report_write_file. */
void report_file_setup(void);

/*
 * Writes len bytes of data to path the dump's way (a temporary file
 * created exclusively beside it, then renamed; a FIFO or character device
 * in place, never waiting longer than REPORT_SPECIAL_WAIT_MS per stall).
 * Returns 0 or -errno; on an error nothing is left behind and path is
 * untouched.
 */
int report_write_file(const char *path, const char *data, size_t len);

/*
 * For tests: hook (NULL: none) runs in report_write_file between the check
 * that path names a FIFO or a device and its open, so that a test can
 * swap the node in that window. Not for the library's own use.
 */
void report_file_set_race_hook(void (*hook)(const char *path));

#define REPORT_DUMP_MAGIC "{\"vrampool\":"  /* the first bytes of every dump */

/*
 * Issue 19: whether path names a regular file (itself, not through a
 * link: the regular way replaces a link, never its target) that a dump
 * must not replace: not empty, and its first bytes are not
 * REPORT_DUMP_MAGIC, or it cannot be read to tell. Returns 1 or 0; reads
 * at most those bytes, never blocks. The reporter asks before each write.
 */
int report_path_foreign(const char *path);

/* Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or -errno. */
int report_write_all(int fd, const char *buf, size_t len);

/*
 * Logs a failure (err, a negative errno) to write what to path, once per
 * distinct error: not again when *last holds the same one, the final
 * write's included (the load-time check of report_check_dir counts, so a
 * directory reported at load is not reported again at exit); err 0 logs
 * nothing. *last remembers the error for next time.
 */
void report_note(int *last, int err, const char *what, const char *path);

/*
 * Expands pattern ("%p" pid, "%r" rank, "%h" host) for this process into
 * out (REPORT_PATH_MAX bytes); "" when pattern is empty, and "" with one
 * line naming var when the expansion is too long.
 */
void report_expand_path(const char *var, const char *pattern, const char *rank, const char *host, char *out);

/*
 * Checks that the directory of path exists and this process may create
 * files in it (or that path is a device or FIFO it may write); if not, one
 * line naming var now. An empty path passes. Returns 0 or -errno.
 */
int report_check_dir(const char *var, const char *path);

#endif
