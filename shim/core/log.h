/*
 * log: the shim's only voice. Every line goes to stderr, starts with
 * "vrampool: " and ends with a newline; one write(2) per line so lines from
 * concurrent threads never interleave. Nothing here calls CUDA, allocates
 * or takes a lock (formatting is vsnprintf into the stack, output is
 * write(2)), so it is safe from the exit path, from fork handlers and from
 * a thread that reports while another is stopped by a signal.
 *
 * Nothing reaches the terminal raw: control characters in a line (from a
 * path, a variable's value) are written as '?' (a newline as a space), so
 * a hostile value can neither forge a line nor send escape sequences.
 * Quote a path with log_escape to show it exactly.
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

/*
 * Writes text (several lines, each ending in '\n') to stderr with one
 * write(2), control characters other than the newlines as '?'.
 */
void log_text(const char *text, unsigned long len);

/*
 * Copies s into buf for quoting in a message: printable ASCII as it is,
 * every other byte as \xNN, cut short with "..." when buf is too small.
 * Returns buf.
 */
const char *log_escape(char *buf, unsigned long len, const char *s);

/* Formats a byte count for humans ("1.2 GiB", "640 KiB", "12 B") into buf. */
const char *log_bytes(char *buf, unsigned long len, unsigned long long bytes);

#endif
