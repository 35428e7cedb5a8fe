/*
 * index_room: the memory of the index's slot array (index.h): plain
 * allocations, the reservation a table grows in, and the pages a shrunk
 * table gives back. INTERNAL to pool/index.c and pool/index_room.c.
 *
 * A slot array of 2 MiB or more (IX_HUGE_MIN), and every reservation, is
 * an anonymous mapping aligned to 2 MiB with transparent huge pages
 * requested (MADV_HUGEPAGE): at 10^6 entries (about 40 MiB) a lookup then
 * needs no page walk; a smaller one comes from calloc. A mapping's length
 * is whole pages, and room counts the slots it holds; a reservation's is
 * whole huge pages, however small the budget (a table of 20,000 rows on
 * small pages took a page walk a look-up: 15 to 30 ns a capture more at
 * 3 KiB rows, issue 16). A reservation is
 * mapped MAP_NORESERVE: its pages are charged and faulted only when first
 * written, and index_room_trim gives written pages back. Whether the
 * kernel grants huge pages is its business; either way the table works
 * the same.
 */
#ifndef VRAMPOOL_INDEX_ROOM_H
#define VRAMPOOL_INDEX_ROOM_H

#include <stddef.h>
#include <stdint.h>

#define IX_HUGE_MIN (2ull << 20)        /* arrays this large are mapped for huge pages */

/* One slot: a key and its value together (index.c's layout). */
struct ix_slot {
	uint64_t lo, hi;
	uint64_t val;
};

/* An allocation of slots, zeroed when made. */
struct index_room {
	struct ix_slot *slots;
	size_t room;            /* slots it holds */
	size_t alloc;           /* bytes */
	int mapped;             /* a mapping (else calloc) */
	int reserved;           /* a MAP_NORESERVE reservation */
};

/*
 * Allocates a zeroed array of at least n slots: calloc below IX_HUGE_MIN
 * bytes, else a mapping (whose room fills its last page). Returns 0 or
 * -ENOMEM.
 */
int index_room_alloc(size_t n, struct index_room *b);

/*
 * Reserves n slots: a MAP_NORESERVE mapping, refused (-ENOMEM) where
 * address space is limited (RLIMIT_AS set: it would count against the
 * program's own) or memory is never overcommitted (vm.overcommit_memory =
 * 2: it would be charged at once). Returns 0 or -ENOMEM.
 */
int index_room_reserve(size_t n, struct index_room *b);

/* Frees an allocation from index_room_alloc or index_room_reserve. */
void index_room_free(const struct index_room *b);

/* Host bytes of the first len slots of a mapping: whole pages. */
size_t index_room_bytes(size_t len);

/*
 * Gives back the pages of a reservation's slots [keep, used) that no slot
 * below keep shares (they must be empty: they read as zero again).
 */
void index_room_trim(struct ix_slot *slots, size_t keep, size_t used);

#endif
