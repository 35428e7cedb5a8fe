/*
 * signals: the signal hooks. Internal to the interception layer; what it
 * exports are sigaction(2) and signal(2) themselves.
 *
 * The program's sigaction and signal go through report_sigaction
 * (report/report.h), so the shim's handler for SIGINT, SIGTERM and SIGHUP
 * stays in place of SIG_DFL while the program sees SIG_DFL (Python sets
 * SIG_DFL, then raises SIGINT to end on a KeyboardInterrupt). signal() is
 * sigaction with glibc's BSD semantics: SA_RESTART, the signal blocked in
 * its own handler. Both are safe in a signal handler (no lock, no
 * allocation). The C library's sigaction comes from core/dlreal.h, found by
 * the constructor; the report never calls these hooks.
 */
#ifndef VRAMPOOL_SIGNALS_H
#define VRAMPOOL_SIGNALS_H

#include "intercept/table.h"

#endif
