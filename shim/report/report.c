/*
 * report: the reporter thread, the periodic and final dumps, telemetry,
 * and what the intercept layer calls at load time, at the first CUDA call,
 * at exit and in a forked child (report.h is the contract). The dump's
 * JSON and the summary are formatted by json.c and summary.c, written by
 * file.c; the signals that end a job and the handshake that decides who
 * writes the final report are signals.c's.
 *
 * State. Everything the final report writes is formatted into static
 * buffers under report_lock, which only the reporter thread and the exit
 * report take (never a signal handler). report_final_written makes the
 * final report happen once even when both reach it.
 */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/pace.h"
#include "core/stats.h"
#include "device/device.h"
#include "pool/ledger.h"
#include "pool/whatif.h"
#include "report/file.h"
#include "report/json.h"
#include "report/sbuf.h"
#include "report/signals.h"
#include "report/summary.h"

#define REPORT_LINE_MAX 4096

static const struct config *report_cfg;
static char report_host[256];
static char report_stats[REPORT_PATH_MAX];      /* the dump's path for this process; "" none */
static char report_tele[REPORT_PATH_MAX];       /* the telemetry path; "" none */

static atomic_int report_started;       /* report_start ran in this process */

/* Issue 19: the command line (/proc/self/cmdline, bounded) and the start, read at load time. */
#define REPORT_COMMAND_MAX 2048
static char report_command[REPORT_COMMAND_MAX];
static size_t report_command_len;
static int64_t report_started_ms;

/* Under report_lock. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static int report_final_written;
static char report_json[REPORT_JSON_MAX];
static char report_text[REPORT_SUMMARY_MAX];
static int report_tele_fd = -1;
static int report_dump_err, report_tele_err;    /* the last error logged, so each is logged once */
static int report_stats_foreign;                /* the stats path holds a file that is no dump (issue 19) */
static uint64_t report_last_rows = UINT64_MAX;  /* rows seen at the last verbose line */

/* The wall clock in Unix milliseconds. */
static int64_t report_now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void report_fill(struct stats_dump *d, int final, const char *ended_by)
{
	memset(d, 0, sizeof(*d));
	d->pid = (long)getpid();
	d->rank = report_cfg && report_cfg->has_rank ? report_cfg->rank : NULL;
	d->host = report_host[0] ? report_host : NULL;
	d->problem = report_cfg ? report_cfg->problem : NULL;
	d->invalid = report_cfg ? report_cfg->invalid : 0;
	d->layout_error = report_cfg ? report_cfg->layout_error : NULL;
	d->layout = report_cfg && report_cfg->has_layout ? &report_cfg->layout : NULL;
	d->final = final;
	d->ended_by = ended_by;
	d->ledger_mode = report_cfg ? (int)report_cfg->ledger : 0;
	d->link_gbps = report_cfg ? report_cfg->link_gbps : 0;
	d->command = report_command;
	d->command_len = report_command_len;
	d->started_ms = report_started_ms;
	d->ended_ms = report_now_ms();
	d->device_name = device_probed_name(&d->device_ordinal);
}

/* Load time (and a forked child): the start, and the command line, its last argument cut to fit. */
static void report_read_command(void)
{
	ssize_t n;
	int fd;

	report_started_ms = report_now_ms();
	report_command_len = 0;
	fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, report_command, sizeof(report_command));
	close(fd);
	report_command_len = n > 0 ? (size_t)n : 0;
}

/* Under report_lock: formats and writes the dump, if one is asked for. */
static void report_dump(int final, const char *ended_by)
{
	struct stats_dump d;
	int n, err;

	if (report_stats[0] == '\0' || report_stats_foreign)
		return;
	if (report_path_foreign(report_stats)) {
		/* issue 19: one line, then no dump for the rest of the run; the job goes on */
		char shown[512];

		report_stats_foreign = 1;
		log_line("VRAMPOOL_STATS: '%s' is an existing file that is not a vrampool dump: it is left "
			 "alone and no dump is written (remove it or name another path)",
			 log_escape(shown, sizeof(shown), report_stats));
		return;
	}
	report_fill(&d, final, ended_by);
	n = report_format_json(report_json, sizeof(report_json), &d);
	err = n < 0 ? n : report_write_file(report_stats, report_json, (size_t)n);
	report_note(&report_dump_err, err, "stats", report_stats);
}

/*
 * The cost ledger's part of a telemetry line (issue 16): the copies passed
 * straight through and, per spec met, its decision and how often it stood
 * aside and came back. Returns the length written (at most len - 1).
 */
static int report_telemetry_ledger(char *buf, size_t len)
{
	struct ledger_view v;
	struct sbuf b;
	int n = 0;

	sbuf_init(&b, buf, len);
	sbuf_printf(&b, ", \"stood_aside\": %llu, \"ledger\": [", (unsigned long long)stats_get(ST_STOOD_ASIDE_CALLS));
	for (int i = 0; i < LEDGER_SPECS; i++)
		if (ledger_view(&ledger_board[i], &v))
			sbuf_printf(&b, "%s{\"row\": %llu, \"decision\": \"%s\", \"stand_asides\": %llu, "
				    "\"resumes\": %llu}", n++ ? ", " : "", (unsigned long long)v.row,
				    v.aside ? "stood_aside" : "pooling", (unsigned long long)v.stand_asides,
				    (unsigned long long)v.resumes);
	sbuf_printf(&b, "]");
	return b.full ? 0 : (int)b.used;
}

/* The telemetry line of report.h, newline-terminated. Returns its length. */
static int report_format_telemetry(char *buf, size_t len)
{
	struct timespec now;
	uint64_t e;
	char ident[REPORT_LINE_MAX / 2], ledger[REPORT_LINE_MAX / 2];
	struct sbuf ib;
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	stats_elapsed_ns(&e);
	/* issue 19: "format", "version", "host", "rank" (a number or null), "mode", "layout" */
	sbuf_init(&ib, ident, sizeof(ident));
	report_json_ident(&ib, report_host[0] ? report_host : NULL,
			  report_cfg && report_cfg->has_rank ? report_cfg->rank : NULL);
	if (report_telemetry_ledger(ledger, sizeof(ledger)) <= 0)
		ledger[0] = '\0';
	n = snprintf(buf, len,
		     "{\"t\": %lld.%03ld, \"elapsed_s\": %llu.%03llu, \"pid\": %ld, %s, "
		     "\"rows_seen\": %llu, \"rows_hits\": %llu, \"bytes_requested\": %llu, "
		     "\"bytes_h2d\": %llu, \"bytes_served\": %llu, \"pool_bytes\": %llu, "
		     "\"pool_budget\": %llu, \"state\": \"%s\"%s}\n",
		     (long long)now.tv_sec, now.tv_nsec / 1000000L,
		     (unsigned long long)(e / 1000000000ULL), (unsigned long long)(e % 1000000000ULL / 1000000ULL),
		     (long)getpid(), ident,
		     (unsigned long long)stats_get(ST_ROWS_SEEN), (unsigned long long)stats_get(ST_ROWS_HITS),
		     (unsigned long long)stats_get(ST_BYTES_REQUESTED), (unsigned long long)stats_get(ST_BYTES_H2D),
		     (unsigned long long)stats_get(ST_BYTES_SERVED), (unsigned long long)stats_get(ST_POOL_BYTES),
		     (unsigned long long)stats_get(ST_POOL_BUDGET), stats_state_name(stats_state()), ledger);
	return n < 0 ? 0 : (size_t)n >= len ? (int)len - 1 : n;
}

/* Under report_lock: appends a telemetry line, if asked for. */
static void report_telemetry(void)
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
	report_note(&report_tele_err, err, "telemetry", report_tele);
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
	if (!report_final_written && !report_final_claimed()) {
		report_dump(0, NULL);
		report_telemetry();
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
		report_telemetry();
		if (report_cfg && !report_cfg->quiet) {
			report_fill(&d, 1, ended_by);
			n = report_format_summary(report_text, sizeof(report_text), &d);
			log_text(report_text, (unsigned long)n);
		}
	}
	pthread_mutex_unlock(&report_lock);
	report_mark_finished();
}

/* Something to do at each interval: otherwise the reporter sleeps until a signal. */
static int report_periodic(void)
{
	return report_stats[0] != '\0' || report_tele[0] != '\0' || log_is_verbose();
}

static void *report_main(void *arg)
{
	int timeout = report_periodic() ? REPORT_FIRST_TICK_MS : -1;
	int n;

	(void)arg;
	pthread_setname_np(pthread_self(), "vrampool-report");
	for (;;) {
		n = report_wait_wake(timeout);
		if (n > 0) {
			report_final(report_sig_name(n));
			return NULL;
		}
		if (n < 0 && n != -EAGAIN)
			return NULL;
		if (n == 0)
			report_tick();
		if (report_is_finished())
			return NULL;
		timeout = report_periodic() ? (int)report_cfg->telemetry_s * 1000 : -1;
	}
}

/* Starts the reporter thread with every signal blocked. Returns 0 or -errno. */
static int report_launch(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc;

	if ((rc = report_pipes_open()) != 0)
		return rc;
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
	report_signals_arm();
	return 0;

out_close:
	report_pipes_close();
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
	int saved = errno;

	if (!report_cfg || !atomic_load(&stats_global.used))
		return;
	if (!report_claim_final(-1)) {
		/* a signal's report is being written: let it end before the process does */
		report_wait_finished();
		errno = saved;
		return;
	}
	report_hold_signals();
	report_final("exit");
	report_release_signals();
	errno = saved;
}

static void report_paths(void)
{
	const char *rank = report_cfg->has_rank ? report_cfg->rank : NULL;  /* %r: "norank" (issue 19) */

	report_expand_path("VRAMPOOL_STATS", report_cfg->stats_path, rank, report_host, report_stats);
	report_expand_path("VRAMPOOL_TELEMETRY", report_cfg->telemetry_path, rank, report_host, report_tele);
}

void report_setup(const struct config *c)
{
	report_cfg = c;
	whatif_setup(c->whatif_mem);
	report_file_setup();
	report_read_command();
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
	report_signals_atfork();
	report_final_written = 0;
	if (report_tele_fd >= 0)
		close(report_tele_fd);
	report_tele_fd = -1;
	report_dump_err = report_tele_err = 0;
	report_stats_foreign = 0;
	report_last_rows = UINT64_MAX;
	whatif_reset();
	pace_reset();                   /* issue 19: the child's pace is its own */
	report_started_ms = report_now_ms();
	if (!report_cfg)
		return;
	if (report_cfg->dry && !report_cfg->invalid)
		stats_set_mode(STATS_MODE_DRY);
	report_paths();
}
