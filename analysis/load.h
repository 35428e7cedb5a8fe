/*
 * load.h: checked reading of the JSON files the library writes, internal
 * to the readers of dump.h (dump.c: the stats dump, telemetry.c: the
 * telemetry file); nothing else includes it.
 *
 * Each function reads one value with jansson and checks it is what its key
 * promises (the rules are dump.h's: a count is a whole number from 0 to
 * 2^64-1, a time is a non-negative finite number, a missing key or null is
 * no error and leaves the default). A failure writes one line into the
 * caller's struct load_error, "PATH[: line N]: what is wrong" naming the
 * key as SECTION.KEY (SECTION NULL: a top-level key), and returns a
 * negative errno, -EINVAL for a bad value. The path is escaped; the struct
 * owns none of its pointers.
 */
#ifndef VRAMPOOL_LOAD_H
#define VRAMPOOL_LOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a failed read goes: the message, its destination, the file. */
struct load_error {
	char *msg;
	size_t size;
	const char *path;
	long line;		/* telemetry: the line number, or 0 */
};

/* Formats "PATH[:LINE]: " into E's message and returns its length. */
size_t load_where(struct load_error *e);

/* Writes "PATH: key "SECTION.KEY" is not WHAT" and returns -EINVAL. */
int load_type_error(struct load_error *e, const char *section,
		    const char *key, const char *what);

/* Writes "PATH: key "SECTION.KEY" is VALUE: WHY" and returns -EINVAL. */
int load_value_error(struct load_error *e, const char *section, const char *key,
		     const char *value, const char *why);

/*
 * Converts the JSON number V into a count in OUT: a whole number from 0 to
 * 2^64-1. Returns 0, or -EINVAL with the reason written for SECTION.KEY.
 */
int load_count(struct load_error *e, json_t *v, const char *section,
	       const char *key, uint64_t *out);

/*
 * Reads the count KEY of OBJ into OUT. A missing key (or a missing OBJ) or
 * null leaves OUT at 0 and is not an error; anything but a count is.
 */
int load_u64(struct load_error *e, json_t *obj, const char *section,
	     const char *key, uint64_t *out);

/* Reads the non-negative number KEY of OBJ into OUT; *HAS (unless NULL) says it was there. */
int load_seconds(struct load_error *e, json_t *obj, const char *section,
		 const char *key, double *out, bool *has);

/*
 * Reads the string KEY of OBJ into OUT of SIZE bytes ("" when missing or
 * null, cut to fit); with NUMBERS, an integer is written out as a string.
 */
int load_string(struct load_error *e, json_t *obj, const char *section,
		const char *key, char *out, size_t size, bool numbers);

/* Reads the boolean KEY of OBJ (DEF when missing); 0 and 1 count too. */
int load_bool(struct load_error *e, json_t *obj, const char *section,
	      const char *key, bool def, bool *out, bool *has);

/*
 * Returns the object KEY of ROOT, NULL when missing or null. A wrong type
 * returns NULL too and sets *ERR, unless it holds an earlier error already.
 */
json_t *load_section(struct load_error *e, json_t *root, const char *key, int *err);

/*
 * Reads all of PATH ("-": standard input) into a NUL-terminated buffer of
 * at most MAX bytes. Returns 0 with *BUF (free it) and *LEN, or a negative
 * errno with the message in E (-EFBIG past MAX).
 */
int load_file(struct load_error *e, const char *path, uint64_t max, char **buf, size_t *len);

/*
 * Turns jansson's complaint into E's message: "not valid JSON (line,
 * column)", or a number too large to represent. Returns -EINVAL.
 */
int load_json_error(struct load_error *e, const json_error_t *jerr);

#endif
