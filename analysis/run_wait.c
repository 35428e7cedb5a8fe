/*
 * run_wait.c: `vrampool run` while CMD runs (run.h): the signals that end
 * a job, passed on to CMD when they were meant for the launcher alone, the
 * bounded wait with its escalation to SIGKILL, and the launcher's own end
 * with CMD's status.
 *
 * CMD runs in the launcher's process group, so the terminal treats the two
 * as one job: Ctrl-C, Ctrl-\ and a hang-up reach CMD from the kernel, and
 * Ctrl-Z, fg and bg work as they would on CMD alone. The launcher blocks
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT (those not ignored when it started) and
 * SIGCHLD, and takes them with sigtimedwait: no handler runs. Which of
 * them it passes on, and why, is said at run_should_forward.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "vrampool.h"

#define RUN_ANCESTRY_MAX 64	/* parents walked to tell whether a sender is CMD's */

static const int run_ending[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

const char *run_signal_name(int sig)
{
	static char other[16];

	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP: return "SIGHUP";
	case SIGQUIT: return "SIGQUIT";
	case SIGKILL: return "SIGKILL";
	case SIGSEGV: return "SIGSEGV";
	case SIGABRT: return "SIGABRT";
	case SIGBUS: return "SIGBUS";
	case SIGPIPE: return "SIGPIPE";
	}
	snprintf(other, sizeof(other), "signal %d", sig);
	return other;
}

int run_signals_init(struct run_signals *s)
{
	struct sigaction dfl, cur;
	size_t i;

	memset(s, 0, sizeof(*s));
	sigemptyset(&s->taken);
	for (i = 0; i < sizeof(run_ending) / sizeof(run_ending[0]); i++)
		if (sigaction(run_ending[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
			sigaddset(&s->taken, run_ending[i]);
	sigaddset(&s->taken, SIGCHLD);
	/* an inherited SIG_IGN would reap CMD behind waitpid's back */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	if (sigaction(SIGCHLD, &dfl, &s->old_chld) != 0)
		return -errno;
	if (sigprocmask(SIG_BLOCK, &s->taken, &s->old_mask) != 0) {
		int err = -errno;

		sigaction(SIGCHLD, &s->old_chld, NULL);
		return err;
	}
	return 0;
}

void run_signals_child(const struct run_signals *s, pid_t launcher)
{
	sigaction(SIGCHLD, &s->old_chld, NULL);
	sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
	/* the launcher killed (SIGKILL, where it cannot pass anything on): CMD gets SIGTERM */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != launcher)
		raise(SIGTERM);
}

void run_signals_release(struct run_signals *s)
{
	sigaction(SIGCHLD, &s->old_chld, NULL);
	sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
}

/* Whether pid is a descendant of this process (its parents walked through /proc). */
static bool run_is_descendant(pid_t pid)
{
	char path[64], buf[512], *p;
	int i, fd;
	ssize_t n;
	long ppid;

	for (i = 0; i < RUN_ANCESTRY_MAX && pid > 1; i++) {
		snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		/* "pid (comm) state ppid ...": comm may hold anything but ends at the last ')' */
		p = strrchr(buf, ')');
		if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1)
			return false;
		if (ppid == (long)getpid())
			return true;
		pid = (pid_t)ppid;
	}
	return false;
}

/*
 * Whether an ending signal the launcher took is to be passed on to CMD
 * (pid child), so that CMD gets it exactly once:
 *  - sent by the kernel (si_code > 0: the terminal's Ctrl-C, Ctrl-\ or
 *    hang-up, sent to the terminal's foreground process group): CMD, in
 *    the launcher's group, has it already; passed on only when CMD has
 *    left the group (setsid, setpgid) and so did not get it;
 *  - sent by CMD or one of its descendants (kill(0, sig) to their own
 *    group, which holds the launcher too): CMD's own doing, not passed on;
 *  - sent by anyone else (kill PID, docker stop, a supervisor, a script
 *    that started the launcher): meant for the job, passed on.
 * A process outside the job that signals the whole group (kill -TERM
 * -PGID, systemd's control-group kill, Slurm) reaches CMD directly and
 * through the launcher: twice (docs/vrampool.1.md says so).
 */
static bool run_should_forward(const siginfo_t *info, pid_t child)
{
	if (info->si_code > 0)
		return getpgid(child) != getpgrp();
	if (info->si_pid == child || (info->si_pid > 0 && run_is_descendant(info->si_pid)))
		return false;
	return true;
}

/* Seconds on the monotonic clock. */
static double run_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Takes one of s's signals: at most wait_s seconds (< 0: no limit). Returns it, or 0 when none came. */
static int run_take(struct run_signals *s, double wait_s, siginfo_t *info)
{
	struct timespec ts;
	int sig;

	if (wait_s < 0) {
		sig = sigwaitinfo(&s->taken, info);
	} else {
		ts.tv_sec = (time_t)wait_s;
		ts.tv_nsec = (long)((wait_s - (double)ts.tv_sec) * 1e9);
		sig = sigtimedwait(&s->taken, info, &ts);
	}
	return sig < 0 ? 0 : sig;
}

int run_wait(struct run_signals *s, const struct run_options *o, pid_t child, int *wstatus,
	     struct run_progress *progress)
{
	double deadline = 0, left, due;
	siginfo_t info;
	bool killed = false;
	pid_t r;
	int sig;

	for (;;) {
		r = waitpid(child, wstatus, WNOHANG);
		if (r == child) {
			run_progress_end(progress);
			return 0;
		}
		if (r < 0 && errno != EINTR)
			return -errno;
		left = -1;
		if (deadline && !killed) {
			left = deadline - run_clock();
			if (left <= 0) {
				fprintf(stderr, "vrampool run: %s did not end within %g s of %s: sending SIGKILL\n",
					esc(o->cmd[0]), o->kill_after, run_signal_name(s->forwarded));
				kill(child, SIGKILL);
				killed = true;
				left = -1;
			}
		}
		due = run_progress_due(progress);
		if (due >= 0 && (left < 0 || due < left))
			left = due;
		sig = run_take(s, left, &info);
		run_progress_tick(progress, child);
		if (sig == 0 || sig == SIGCHLD)
			continue;
		run_progress_end(progress);
		if (!s->got)
			s->got = sig;
		if (!run_should_forward(&info, child))
			continue;
		kill(child, sig);
		if (!s->forwarded) {
			s->forwarded = sig;
			deadline = run_clock() + o->kill_after;
			fprintf(stderr, "vrampool run: %s passed on to %s; SIGKILL if it has not ended in %g s\n",
				run_signal_name(sig), esc(o->cmd[0]), o->kill_after);
		}
	}
}

int run_signals_poll(struct run_signals *s)
{
	siginfo_t info;
	int sig;

	while ((sig = run_take(s, 0, &info)) != 0) {
		if (sig != SIGCHLD && !s->got)
			s->got = sig;
	}
	return s->got;
}

void run_die_of(int sig)
{
	struct rlimit none = { 0, 0 };
	struct sigaction dfl;
	sigset_t set;

	fflush(NULL);
	/* the launcher's end mirrors CMD's; a core file of the launcher would only mislead */
	setrlimit(RLIMIT_CORE, &none);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}
