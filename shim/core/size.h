/*
 * size: parsing a size as the VRAMPOOL_* variables write it.
 */
#ifndef VRAMPOOL_SIZE_H
#define VRAMPOOL_SIZE_H

#include <stdint.h>

/*
 * Parses a size: decimal digits with an optional K, M, G or T suffix
 * (binary multiples; a trailing "B" or "iB" is accepted: 8G, 8GB, 8GiB).
 * Zero is allowed. Returns 0 and *out, -EINVAL (empty or junk) or -ERANGE
 * (more than 64 bits); *out is untouched on an error.
 */
int size_parse(const char *s, uint64_t *out);

/*
 * Parses unsigned decimal digits only, the whole string (no suffix).
 * Returns 0 and *out, -EINVAL (empty or junk) or -ERANGE.
 */
int size_parse_uint(const char *s, uint64_t *out);

#endif
