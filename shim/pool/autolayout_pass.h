/*
 * autolayout_pass: hashing one observed copy for every candidate row of
 * its size and looking the rows up in the tables. INTERNAL to the
 * auto-layout room (autolayout_impl.h lists its files); it calls only
 * autolayout_sizes.c.
 *
 * Hashing. A row's fingerprint must not depend on where the row sits in the
 * copy, nor on the copy's size (the last, partial batch of an epoch holds
 * the same samples), and hashing each candidate's rows separately would
 * read the copy once per candidate. So each row size c has a hashing unit
 * u(c) that depends on c alone (64 bytes when 64 divides c, else the odd
 * part of c doubled up to at least 64 bytes: 147 for 2352 = 16 * 147, 3079
 * for a prime 3079), and a row's fingerprint is the Horner polynomial of
 * the XXH3-64 hashes of its units: P[e] - P[e-q] * K^q over the prefix
 * P[m] = P[m-1] * K + h(unit m) (mod 2^64) of the copy. One pass per unit
 * reads the copy once and gives every candidate of that unit all its row
 * fingerprints for a multiply each. A candidate that shares a pass with a
 * smaller unit (autolayout_sizes.h) gets fingerprints that depend on the
 * size. The passes read at most AL_WINDOW bytes of a copy (its start); a
 * candidate row longer than that is represented by the window, a prefix of
 * its first row. These fingerprints are evidence only (64 bits, fixed
 * keys): the pool fingerprints what it serves.
 *
 * Evidence counted. A sampled row seen in an earlier copy is a repeat. A
 * row seen earlier in the same copy (an all-black block, a padding run) and
 * a row already repeated AL_HOT times are no evidence at all: so the blocks
 * of black borders, which come back in every copy, are not taken for
 * samples that come back each epoch. A repeat of a row first seen in
 * another size marks both sizes as sharing rows (al_size.shares).
 *
 * Runs under al.lock, with al.seq the number of the copy being observed.
 */
#ifndef VRAMPOOL_AUTOLAYOUT_PASS_H
#define VRAMPOOL_AUTOLAYOUT_PASS_H

#include "pool/autolayout_impl.h"

/*
 * Runs the pass of class cls of s over the copy src of n bytes: hashes its
 * units in the window and looks up the rows of the class's candidates,
 * adding to their cur_n (sampled rows) and cur_k (repeats). Returns the
 * bytes hashed.
 */
uint64_t al_pass(struct al_size *s, int cls, const unsigned char *src, uint64_t n);

#endif
