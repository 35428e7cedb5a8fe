/*
 * layout: the registered sample layout (VRAMPOOL_LAYOUT) and the question
 * "how many rows is a copy of n bytes?".
 *
 * Grammar: a comma-separated list of specs, each one of
 *   BYTES              a row size in bytes, suffix K/M/G (KiB/MiB/GiB) allowed: 150528, 147K
 *   DTYPE:D1xD2x...    element type and shape: u8:3x224x224, f32:3x32x32, bf16:4096
 *                      (u8 i8 u16 i16 f16 bf16 u32 i32 f32 u64 i64 f64)
 *   whole:MIN          every copy of at least MIN bytes (size suffix allowed) is one row
 * Whitespace around specs is ignored. At most LAYOUT_MAX_SPECS specs.
 *
 * Matching: a copy of n bytes matches a row spec of r bytes when n = k*r, k >= 1.
 * When several row specs match, the largest r wins. whole:MIN matches a copy
 * of n >= MIN bytes that no row spec matched, as one row of n bytes.
 */
#ifndef VRAMPOOL_LAYOUT_H
#define VRAMPOOL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define LAYOUT_MAX_SPECS 16

struct layout {
	int nrows;                          /* number of fixed row sizes */
	uint64_t rows[LAYOUT_MAX_SPECS];    /* fixed row sizes, in bytes */
	int has_whole;
	uint64_t whole_min;                 /* valid when has_whole */
	char text[256];                     /* the spec as given, normalised (no spaces) */
};

/*
 * Parses text into l. Returns 0, or -EINVAL with a one-line reason in err
 * (for example "bad dtype 'f8' in 'f8:3x3' (expected u8, i8, ..., f64)").
 * An empty string is -EINVAL. l is zeroed first.
 */
int layout_parse(struct layout *l, const char *text, char *err, size_t errlen);

/*
 * Returns the row size for a copy of n bytes (n itself for whole:MIN), or 0
 * when the copy does not match the layout (n == 0 never matches).
 */
uint64_t layout_match(const struct layout *l, uint64_t n);

/* Returns the larger of the largest fixed row size and whole_min (when set), or 0 for an empty layout. */
uint64_t layout_max_row(const struct layout *l);

#endif
