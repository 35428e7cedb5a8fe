/*
 * report: the reporter thread, the periodic and final dumps, telemetry,
 * and the signals that end a job (report.h is the contract; it also says
 * why the signal path cannot deadlock).
 *
 * State. Everything the final report writes is formatted into static
 * buffers under report_lock, which only the reporter thread and the exit
 * report take. report_claim decides, once, who writes the final report:
 * the exit report (-1) or a signal (its number, handed to the reporter
 * through the wake pipe); report_finished and a byte on the fin pipe say
 * it is written. The three handled signals are owned by the shim (its
 * handler installed in place of the default) or not, per signal; while
 * owned, report_view holds the disposition the program believes in.
 */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/dlreal.h"
#include "core/log.h"
#include "core/stats.h"
#include "pool/whatif.h"
#include "report/json.h"
#include "report/summary.h"

#define REPORT_PATH_MAX 4200
#define REPORT_TEXT_MAX 8192
#define REPORT_LINE_MAX 1024
#define REPORT_TMP_TRIES 16     /* temporary names tried before giving up */
#define REPORT_NSIGS 3

static const struct config *report_cfg;
static char report_host[256];
static char report_stats[REPORT_PATH_MAX];      /* the dump's path for this process; "" none */
static char report_tele[REPORT_PATH_MAX];       /* the telemetry path; "" none */
static mode_t report_umask = 022;

static atomic_int report_started;       /* report_start ran in this process */
static atomic_int report_thread_up;     /* the reporter thread runs */
static atomic_int report_claim;         /* 0; -1: the exit report writes; a signal: the reporter does */
static atomic_int report_finished;      /* the final report is written */
static atomic_int report_dying;         /* a handler restores SIG_DFL to die */
static int report_wake[2] = { -1, -1 }; /* handler -> reporter: the signal's number */
static int report_fin[2] = { -1, -1 };  /* reporter -> waiting handlers: done */
static __thread int report_in_exit;     /* this thread writes the exit report */
static volatile sig_atomic_t report_deferred;  /* a signal that landed on it meanwhile */

/* Under report_lock. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static int report_final_written;
static char report_json[REPORT_JSON_MAX];
static char report_text[REPORT_TEXT_MAX];
static int report_tele_fd = -1;
static int report_dump_err, report_tele_err;    /* the last error logged, so each is logged once */
static uint64_t report_last_rows = UINT64_MAX;  /* rows seen at the last verbose line */

static const int report_sigs[REPORT_NSIGS] = { SIGINT, SIGTERM, SIGHUP };
static atomic_int report_owned[REPORT_NSIGS];
static struct sigaction report_view[REPORT_NSIGS];

static void report_on_signal(int sig);

static int report_sig_index(int sig)
{
	int i;

	for (i = 0; i < REPORT_NSIGS; i++)
		if (report_sigs[i] == sig)
			return i;
	return -1;
}

static const char *report_sig_name(int sig)
{
	switch (sig) {
	case SIGINT:
		return "SIGINT";
	case SIGTERM:
		return "SIGTERM";
	case SIGHUP:
		return "SIGHUP";
	}
	return "signal";
}

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

/* Logs a failure to write what to path, once per distinct error (always when final). */
static void report_note(int *last, int err, int final, const char *what, const char *path)
{
	char shown[512];

	if (err == 0 || (err == *last && !final)) {
		*last = err;
		return;
	}
	*last = err;
	log_line("could not write the %s to '%s': %s (errno %d)", what,
		 log_escape(shown, sizeof(shown), path), report_strerror(-err), -err);
}

static void report_fill(struct stats_dump *d, int final, const char *ended_by)
{
	memset(d, 0, sizeof(*d));
	d->pid = (long)getpid();
	d->rank = report_cfg && report_cfg->has_rank ? report_cfg->rank : NULL;
	d->host = report_host[0] ? report_host : NULL;
	d->problem = report_cfg ? report_cfg->problem : NULL;
	d->final = final;
	d->ended_by = ended_by;
}

/* Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or -errno. */
static int report_write_all(int fd, const char *buf, size_t len)
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

/*
 * A stats path that names a device or a FIFO, directly or through a link
 * (/dev/null, /dev/stderr, a pipe to a collector), is written to as it is:
 * renaming a file over it would replace the node. Opening never blocks (a
 * FIFO nobody reads fails with ENXIO); a reader that stops reading is given
 * REPORT_SPECIAL_WAIT_MS per stall, then the write gives up. Returns 0 or
 * -errno.
 */
#define REPORT_SPECIAL_WAIT_MS 2000

static int report_write_special(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n >= 0) {
			data += n;
			len -= (size_t)n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int r = poll(&p, 1, REPORT_SPECIAL_WAIT_MS);

			if (r == 0) {
				err = -ETIMEDOUT;
				break;
			}
			if (r < 0 && errno != EINTR) {
				err = -errno;
				break;
			}
		} else if (errno != EINTR) {
			err = -errno;
			break;
		}
	}
	if (close(fd) != 0 && err == 0 && errno != EINTR)
		err = -errno;
	return err;
}

int report_write_file(const char *path, const char *data, size_t len)
{
	char tmp[REPORT_PATH_MAX + 48];
	long pid = (long)getpid();
	struct stat st;
	int fd = -1, i, n, err;

	if (stat(path, &st) == 0) {
		if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
			return report_write_special(path, data, len);
		if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
			return -EISDIR;
	}
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

/* Under report_lock: formats and writes the dump, if one is asked for. */
static void report_dump(int final, const char *ended_by)
{
	struct stats_dump d;
	int n, err;

	if (report_stats[0] == '\0')
		return;
	report_fill(&d, final, ended_by);
	n = report_format_json(report_json, sizeof(report_json), &d);
	err = n < 0 ? n : report_write_file(report_stats, report_json, (size_t)n);
	report_note(&report_dump_err, err, final, "stats", report_stats);
}

/* The telemetry line of report.h, newline-terminated. Returns its length. */
static int report_format_telemetry(char *buf, size_t len)
{
	uint64_t start = atomic_load_explicit(&stats_global.start_ns, memory_order_relaxed), e = 0;
	struct timespec now, mono;
	char rank[32];
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	if (start) {
		uint64_t m = (uint64_t)mono.tv_sec * 1000000000ULL + (uint64_t)mono.tv_nsec;

		e = m > start ? m - start : 0;
	}
	if (report_cfg && report_cfg->has_rank)
		snprintf(rank, sizeof(rank), "\"%s\"", report_cfg->rank);
	else
		snprintf(rank, sizeof(rank), "null");
	n = snprintf(buf, len,
		     "{\"t\": %lld.%03ld, \"elapsed_s\": %llu.%03llu, \"pid\": %ld, \"rank\": %s, "
		     "\"rows_seen\": %llu, \"rows_hits\": %llu, \"bytes_requested\": %llu, "
		     "\"bytes_h2d\": %llu, \"bytes_served\": %llu, \"pool_bytes\": %llu, "
		     "\"pool_budget\": %llu, \"state\": \"%s\"}\n",
		     (long long)now.tv_sec, now.tv_nsec / 1000000L,
		     (unsigned long long)(e / 1000000000ULL), (unsigned long long)(e % 1000000000ULL / 1000000ULL),
		     (long)getpid(), rank,
		     (unsigned long long)stats_get(ST_ROWS_SEEN), (unsigned long long)stats_get(ST_ROWS_HITS),
		     (unsigned long long)stats_get(ST_BYTES_REQUESTED), (unsigned long long)stats_get(ST_BYTES_H2D),
		     (unsigned long long)stats_get(ST_BYTES_SERVED), (unsigned long long)stats_get(ST_POOL_BYTES),
		     (unsigned long long)stats_get(ST_POOL_BUDGET), stats_state_name(stats_state()));
	return n < 0 ? 0 : (size_t)n >= len ? (int)len - 1 : n;
}

/* Under report_lock: appends a telemetry line, if asked for. */
static void report_telemetry(int final)
{
	char line[REPORT_LINE_MAX];
	struct stat st;
	int n, err = 0;

	if (report_tele[0] == '\0')
		return;
	if (report_tele_fd < 0) {
		report_tele_fd = open(report_tele, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
				      0666);
		if (report_tele_fd < 0) {
			err = -errno;
		} else if (fstat(report_tele_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			err = -EINVAL;
			close(report_tele_fd);
			report_tele_fd = -1;
		}
	}
	if (report_tele_fd >= 0) {
		n = report_format_telemetry(line, sizeof(line));
		err = report_write_all(report_tele_fd, line, (size_t)n);
	}
	report_note(&report_tele_err, err, final, "telemetry", report_tele);
}

/* Under report_lock: the verbose telemetry line on stderr, when rows moved. */
static void report_verbose(void)
{
	uint64_t seen = stats_get(ST_ROWS_SEEN);
	char b1[32], b2[32], b3[32];

	if (!log_is_verbose() || seen == report_last_rows)
		return;
	report_last_rows = seen;
	log_line("served %llu/%llu rows from VRAM (%s PCIe saved), %llu captured, %llu pooled, pool %s/%s",
		 (unsigned long long)stats_get(ST_ROWS_HITS), (unsigned long long)seen,
		 log_bytes(b1, sizeof(b1), stats_get(ST_BYTES_SERVED)),
		 (unsigned long long)stats_get(ST_ROWS_CAPTURED), (unsigned long long)stats_get(ST_ROWS_POOLED),
		 log_bytes(b2, sizeof(b2), stats_get(ST_POOL_BYTES)),
		 log_bytes(b3, sizeof(b3), stats_get(ST_POOL_BUDGET)));
}

/* The reporter's periodic work: the running dump, a telemetry line, the verbose line. */
static void report_tick(void)
{
	pthread_mutex_lock(&report_lock);
	if (!report_final_written && atomic_load(&report_claim) == 0) {
		report_dump(0, NULL);
		report_telemetry(0);
		report_verbose();
	}
	pthread_mutex_unlock(&report_lock);
}

/*
 * The final report, once: the dump, a last telemetry line and the summary
 * (unless quiet), then the word to waiting handlers.
 */
static void report_final(const char *ended_by)
{
	struct stats_dump d;
	int n;

	pthread_mutex_lock(&report_lock);
	if (!report_final_written) {
		report_final_written = 1;
		report_dump(1, ended_by);
		report_telemetry(1);
		if (report_cfg && !report_cfg->quiet) {
			report_fill(&d, 1, ended_by);
			n = report_format_summary(report_text, sizeof(report_text), &d);
			log_text(report_text, (unsigned long)n);
		}
	}
	pthread_mutex_unlock(&report_lock);
	atomic_store(&report_finished, 1);
	if (report_fin[1] >= 0)
		(void)!write(report_fin[1], "x", 1);
}

/* Something to do at each interval: otherwise the reporter sleeps until a signal. */
static int report_periodic(void)
{
	return report_stats[0] != '\0' || report_tele[0] != '\0' || log_is_verbose();
}

static void *report_main(void *arg)
{
	int timeout = report_periodic() ? REPORT_FIRST_TICK_MS : -1;
	struct pollfd p;
	unsigned char sig;
	int n;

	(void)arg;
	pthread_setname_np(pthread_self(), "vrampool-report");
	for (;;) {
		p.fd = report_wake[0];
		p.events = POLLIN;
		p.revents = 0;
		n = poll(&p, 1, timeout);
		if (n < 0 && errno != EINTR)
			return NULL;
		if (n > 0 && read(report_wake[0], &sig, 1) == 1) {
			report_final(report_sig_name(sig));
			return NULL;
		}
		if (n == 0)
			report_tick();
		if (atomic_load(&report_finished))
			return NULL;
		timeout = report_periodic() ? (int)report_cfg->telemetry_s * 1000 : -1;
	}
}

/* Waits, at most REPORT_SIGNAL_WAIT_MS, for the final report to be written. Async-signal-safe. */
static void report_wait_finished(void)
{
	struct timespec start, now;
	struct pollfd p;
	long left = REPORT_SIGNAL_WAIT_MS;

	if (report_fin[0] < 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!atomic_load(&report_finished) && left > 0) {
		p.fd = report_fin[0];
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, (int)left) > 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = REPORT_SIGNAL_WAIT_MS - ((now.tv_sec - start.tv_sec) * 1000L +
						(now.tv_nsec - start.tv_nsec) / 1000000L);
	}
}

/* Ends the process with sig as the default action would. Async-signal-safe. */
static void report_die(int sig)
{
	struct sigaction dfl;
	sigset_t set;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	atomic_store(&report_dying, 1);
	dlreal_sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

/*
 * The shim's handler for SIGINT, SIGTERM and SIGHUP (report.h): claim the
 * final report for this signal and wake the reporter, or, when someone
 * else claimed it, wait for it; then die of the signal.
 */
static void report_on_signal(int sig)
{
	int saved = errno, expected = 0;
	unsigned char b = (unsigned char)sig;

	if (report_in_exit) {
		report_deferred = sig;
		errno = saved;
		return;
	}
	if (atomic_load(&report_thread_up)) {
		if (atomic_compare_exchange_strong(&report_claim, &expected, sig))
			(void)!write(report_wake[1], &b, 1);
		report_wait_finished();
	}
	report_die(sig);
	errno = saved;
}

static struct sigaction report_handler_action(void)
{
	struct sigaction sa;
	int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = report_on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < REPORT_NSIGS; i++)
		sigaddset(&sa.sa_mask, report_sigs[i]);
	sa.sa_flags = SA_RESTART;
	return sa;
}

int report_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	struct sigaction want, view, prev, ours;
	int i = report_sig_index(sig), rc;

	if (i < 0 || atomic_load(&report_dying) || (act && act->sa_handler == report_on_signal))
		return dlreal_sigaction(sig, act, oldact);
	if (act)
		want = *act;	/* act and oldact may be one struct */
	if (atomic_load(&report_owned[i])) {
		view = report_view[i];
		if (act == NULL) {
			if (oldact)
				*oldact = view;
			return 0;
		}
		if (want.sa_handler == SIG_DFL) {
			report_view[i] = want;
			if (oldact)
				*oldact = view;
			return 0;
		}
		rc = dlreal_sigaction(sig, &want, NULL);
		if (rc == 0) {
			atomic_store(&report_owned[i], 0);
			if (oldact)
				*oldact = view;
		}
		return rc;
	}
	if (act && want.sa_handler == SIG_DFL && atomic_load(&report_thread_up)) {
		ours = report_handler_action();
		rc = dlreal_sigaction(sig, &ours, &prev);
		if (rc == 0) {
			report_view[i] = want;
			atomic_store(&report_owned[i], 1);
			if (oldact)
				*oldact = prev;
		}
		return rc;
	}
	return dlreal_sigaction(sig, act, oldact);
}

/*
 * Takes the signals whose disposition is the default. The calls go to the
 * C library's sigaction (dlreal), never through the exported hook.
 */
static void report_take_signals(void)
{
	struct sigaction cur, ours = report_handler_action();
	int i;

	for (i = 0; i < REPORT_NSIGS; i++) {
		if (dlreal_sigaction(report_sigs[i], NULL, &cur) != 0 || cur.sa_handler != SIG_DFL)
			continue;
		if (dlreal_sigaction(report_sigs[i], &ours, NULL) != 0)
			continue;
		report_view[i] = cur;
		atomic_store(&report_owned[i], 1);
	}
}

static void report_close_pair(int fds[2])
{
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	fds[0] = fds[1] = -1;
}

/* Starts the reporter thread with every signal blocked. Returns 0 or -errno. */
static int report_launch(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc;

	if (pipe2(report_wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return -errno;
	if (pipe2(report_fin, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		goto out_close;
	}
	if ((rc = pthread_attr_init(&attr)) != 0) {
		rc = -rc;
		goto out_close;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, report_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		rc = -rc;
		goto out_close;
	}
	atomic_store(&report_thread_up, 1);
	return 0;

out_close:
	report_close_pair(report_fin);
	report_close_pair(report_wake);
	return rc;
}

void report_start(void)
{
	int expected = 0;

	if (atomic_load_explicit(&report_started, memory_order_relaxed))
		return;
	if (!atomic_compare_exchange_strong(&report_started, &expected, 1) || !report_cfg)
		return;
	if (report_launch() == 0)
		report_take_signals();
	else
		log_verbose("could not start the reporter thread: no periodic dump, and a signal ends "
			    "the job without a summary");
}

void report_exit(void)
{
	int saved = errno, expected = 0, sig;

	if (!report_cfg || !atomic_load(&stats_global.used))
		return;
	if (!atomic_compare_exchange_strong(&report_claim, &expected, -1)) {
		/* a signal's report is being written: let it end before the process does */
		report_wait_finished();
		errno = saved;
		return;
	}
	report_in_exit = 1;
	report_final("exit");
	report_in_exit = 0;
	sig = report_deferred;
	if (sig)
		report_die(sig);
	errno = saved;
}

/* Expands pattern for this process into out (REPORT_PATH_MAX); "" when none or too long. */
static void report_expand(const char *var, const char *pattern, char *out)
{
	out[0] = '\0';
	if (pattern[0] == '\0')
		return;
	if (config_expand_path(pattern, (long)getpid(), report_cfg->rank[0] ? report_cfg->rank : "0",
			       report_host, out, REPORT_PATH_MAX) < 0)
		log_line("%s is too long once %%p, %%r and %%h are expanded: nothing will be written", var);
}

static void report_paths(void)
{
	report_expand("VRAMPOOL_STATS", report_cfg->stats_path, report_stats);
	report_expand("VRAMPOOL_TELEMETRY", report_cfg->telemetry_path, report_tele);
}

/*
 * Checks that the directory of path exists and this process may create
 * files in it (or that path is a device or FIFO it may write); one line now
 * if not. Returns 0 or -errno.
 */
static int report_check_dir(const char *var, const char *path)
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

void report_setup(const struct config *c)
{
	report_cfg = c;
	whatif_setup(c->whatif_mem);
	report_umask = report_read_umask();
	if (gethostname(report_host, sizeof(report_host)) != 0)
		report_host[0] = '\0';
	report_host[sizeof(report_host) - 1] = '\0';
	if (c->dry && !c->invalid)
		stats_set_mode(STATS_MODE_DRY);
	report_paths();
	report_dump_err = report_check_dir("VRAMPOOL_STATS", report_stats);
	report_tele_err = report_check_dir("VRAMPOOL_TELEMETRY", report_tele);
}

void report_atfork_child(void)
{
	/* The parent's threads are gone: whatever they held is free again. */
	pthread_mutex_init(&report_lock, NULL);
	atomic_store(&report_started, 0);
	atomic_store(&report_thread_up, 0);
	atomic_store(&report_claim, 0);
	atomic_store(&report_finished, 0);
	atomic_store(&report_dying, 0);
	report_in_exit = 0;
	report_deferred = 0;
	report_final_written = 0;
	report_close_pair(report_wake);
	report_close_pair(report_fin);
	if (report_tele_fd >= 0)
		close(report_tele_fd);
	report_tele_fd = -1;
	report_dump_err = report_tele_err = 0;
	report_last_rows = UINT64_MAX;
	whatif_reset();
	if (!report_cfg)
		return;
	if (report_cfg->dry && !report_cfg->invalid)
		stats_set_mode(STATS_MODE_DRY);
	report_paths();
}
