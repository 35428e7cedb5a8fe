/*
 * layout: the registered sample layout (VRAMPOOL_LAYOUT) and the question
 * "how many rows is a copy of n bytes?".
 *
 * Grammar: a comma-separated list of specs, each one of
 *   BYTES              a row size in bytes, suffix K/M/G (KiB/MiB/GiB) allowed: 150528, 147K
 *   DTYPE:D1xD2x...    element type and shape: u8:3x224x224, f32:3x32x32, bf16:4096
 *                      (u8 i8 u16 i16 f16 bf16 u32 i32 f32 u64 i64 f64)
 *   whole:MIN          every copy of at least MIN bytes (size suffix allowed) is one row
 * Any spec may end in "@P", P a priority from 0 to 9 (default 0): 3072@1.
 * Whitespace around specs is ignored. At most LAYOUT_MAX_SPECS specs.
 * The whole text "auto" asks the shim to find the rows from the content
 * (autolayout.h): the layout then has no spec until one is found.
 * Keywords (auto, whole, the dtype names) are read in any case: AUTO,
 * U8:3x224x224, Whole:1M.
 *
 * Matching: a copy of n bytes matches a row spec of r bytes when n = k*r, k >= 1.
 * When several row specs match, the largest r wins. whole:MIN matches a copy
 * of n >= MIN bytes that no row spec matched, as one row of n bytes. Two
 * specs of the same row size are one spec with the higher priority, at
 * the position of the first.
 *
 * Positions: rows[] is sorted for matching, so a spec's index there is
 * not where the user wrote it; pos[] keeps that (layout_position), which
 * is what reports call the spec's index in the layout.
 */
#ifndef VRAMPOOL_LAYOUT_H
#define VRAMPOOL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define LAYOUT_MAX_SPECS 16
#define LAYOUT_MAX_PRIO 9

struct layout {
	int nrows;                          /* number of fixed row sizes */
	uint64_t rows[LAYOUT_MAX_SPECS];    /* fixed row sizes, in bytes, largest first */
	uint8_t prio[LAYOUT_MAX_SPECS];     /* priority of rows[i], 0..LAYOUT_MAX_PRIO */
	uint8_t pos[LAYOUT_MAX_SPECS];      /* rows[i]'s spec's position in the text, 0 first (user_order) */
	int user_order;                     /* pos[] is set: the layout was parsed from text */
	int has_whole;
	uint64_t whole_min;                 /* valid when has_whole */
	uint8_t whole_prio;
	int is_auto;                        /* "auto": no spec yet; the shim finds them */
	char text[256];                     /* the spec as given, normalised (no spaces) */
};

/* What a copy matched: its row size, the spec's priority and index. */
struct layout_hit {
	uint64_t row;
	unsigned prio;
	int spec;                           /* index in rows[], or -1 for whole:MIN */
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

/* Like layout_match, with the priority and spec. Returns 1 (matched, *hit set) or 0. */
int layout_match_hit(const struct layout *l, uint64_t n, struct layout_hit *hit);

/*
 * The position of the spec rows[spec] in the layout as the user wrote it
 * (0 first, every comma-separated spec counted, whole:MIN included): pos[]
 * for a layout layout_parse made; spec itself for one built in code (an
 * automatic layout), or when l is NULL; -1 for -1 (whole:MIN).
 */
int layout_position(const struct layout *l, int spec);

/* Returns the smallest row the layout can produce (fixed rows and whole_min), or 0 when empty. */
uint64_t layout_min_row(const struct layout *l);

/*
 * Writes the canonical text of l's specs into l->text ("3072,8192@1,whole:1M"):
 * for layouts built in code (the automatic layout).
 */
void layout_format(struct layout *l);

/* Returns the larger of the largest fixed row size and whole_min (when set), or 0 for an empty layout. */
uint64_t layout_max_row(const struct layout *l);

#endif
