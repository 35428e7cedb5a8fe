/*
 * signals: the signal hooks. Internal to the interception layer; what it
 * exports are the C library's own functions that set a disposition:
 * sigaction(2), signal(2) and its aliases bsd_signal and ssignal,
 * sysv_signal and __sysv_signal (what signal() is in a strict ISO C
 * build), and sigset(3).
 *
 * Each goes through report_sigaction (report/report.h), so the shim's
 * handler for SIGINT, SIGTERM and SIGHUP stays in place of SIG_DFL while
 * the program sees SIG_DFL (Python sets SIG_DFL, then raises SIGINT to end
 * on a KeyboardInterrupt). The C library's versions call its internal
 * sigaction, which no preload sees; so each is re-written here as sigaction
 * with glibc's own semantics:
 *   signal, bsd_signal, ssignal  SA_RESTART, the signal blocked in its own
 *                                handler (BSD);
 *   sysv_signal, __sysv_signal   SA_RESETHAND | SA_NODEFER, no SA_RESTART
 *                                (System V);
 *   sigset                       no flags; SIG_HOLD blocks the signal and
 *                                returns SIG_HOLD when it was blocked
 *                                already, else the disposition; another
 *                                disposition is installed, the signal
 *                                unblocked, and SIG_HOLD returned when it
 *                                had been blocked.
 * All return SIG_ERR with errno EINVAL for SIG_ERR or a signal out of
 * range, as glibc does. (siginterrupt's mark that makes glibc's signal()
 * leave out SA_RESTART is glibc's own, hidden: signal() here always sets
 * it.)
 *
 * What no hook sees: a raw rt_sigaction system call (the Go runtime's),
 * and sigignore, which glibc writes with its internal sigaction.
 * report_sigaction notices a handler set so the next time the program
 * sets or asks for that signal (report.h). All are safe in a
 * signal handler (no lock, no allocation). The C library's sigaction comes
 * from core/dlreal.h, found by the constructor; the report never calls
 * these hooks.
 */
#ifndef VRAMPOOL_SIGNALS_H
#define VRAMPOOL_SIGNALS_H

#include "intercept/table.h"

#endif
