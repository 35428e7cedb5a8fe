/*
 * log: the shim's only voice. Every line goes to stderr, starts with
 * "vrampool: " and ends with a newline; one write(2) per line so lines from
 * concurrent threads never interleave. Nothing here calls CUDA or allocates
 * after log_init, so it is safe from the exit path and from fork handlers.
 */
#ifndef VRAMPOOL_LOG_H
#define VRAMPOOL_LOG_H

/* Sets whether log_verbose prints. Called once by config loading. */
void log_set_verbose(int on);

/* Returns nonzero when VRAMPOOL_VERBOSE is on. */
int log_is_verbose(void);

/* Prints one line always (errors, warnings, the exit summary's lines). */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints one line only under VRAMPOOL_VERBOSE (decisions, telemetry). */
void log_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Formats a byte count for humans ("1.2 GiB", "640 KiB", "12 B") into buf. */
const char *log_bytes(char *buf, unsigned long len, unsigned long long bytes);

#endif
