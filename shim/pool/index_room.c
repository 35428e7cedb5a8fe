/*
 * index_room: the memory of the index's slot array (index_room.h is the
 * contract). Mappings are made 2 MiB-aligned by mapping 2 MiB more than
 * asked and unmapping the lead and the tail.
 */
#include "pool/index_room.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define IX_HUGE_ALIGN (2ull << 20)

/* The system page size (4096 when it cannot be read or is odd). */
static size_t ix_page(void)
{
	long page = sysconf(_SC_PAGESIZE);

	if (page <= 0 || (size_t)page > IX_HUGE_ALIGN || (page & (page - 1)))
		return 4096;
	return (size_t)page;
}

/* n rounded up to a whole page. */
static size_t ix_page_up(size_t n)
{
	size_t page = ix_page();

	return (n + page - 1) / page * page;
}

/*
 * Maps at least want bytes, 2 MiB-aligned, with huge pages requested; a
 * reservation (noreserve) is not charged against memory until touched.
 */
static int ix_map(size_t want, int noreserve, struct index_room *b)
{
	/*
	 * A reservation is whole huge pages: the kernel backs none of a
	 * mapping shorter than one, nor its tail past the last whole one, and
	 * a small table on small pages costs a page walk a look-up (index_room.h).
	 */
	size_t len = noreserve ? (want + IX_HUGE_ALIGN - 1) / IX_HUGE_ALIGN * IX_HUGE_ALIGN : ix_page_up(want), lead;
	unsigned char *p, *aligned;

	p = mmap(NULL, len + IX_HUGE_ALIGN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0), -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	aligned = (unsigned char *)(((uintptr_t)p + IX_HUGE_ALIGN - 1) & ~(uintptr_t)(IX_HUGE_ALIGN - 1));
	lead = (size_t)(aligned - p);
	if (lead)
		munmap(p, lead);
	munmap(aligned + len, IX_HUGE_ALIGN - lead);
#ifdef MADV_HUGEPAGE
	madvise(aligned, len, MADV_HUGEPAGE);   /* a refusal is fine: small pages then */
#endif
	b->slots = (struct ix_slot *)aligned;
	b->room = len / sizeof(struct ix_slot);
	b->alloc = len;
	b->mapped = 1;
	b->reserved = noreserve;
	return 0;
}

int index_room_alloc(size_t n, struct index_room *b)
{
	if (n > SIZE_MAX / sizeof(struct ix_slot) / 2)
		return -ENOMEM;
	if (n * sizeof(struct ix_slot) >= IX_HUGE_MIN)
		return ix_map(n * sizeof(struct ix_slot), 0, b);
	*b = (struct index_room){ .slots = calloc(n ? n : 1, sizeof(struct ix_slot)), .room = n,
				  .alloc = n * sizeof(struct ix_slot) };
	return b->slots ? 0 : -ENOMEM;
}

/*
 * Whether address space may be reserved here: not under an address-space
 * limit, and not where memory is never overcommitted (index_room.h).
 */
static int ix_can_reserve(void)
{
	struct rlimit rl;
	char c = 0;
	int fd;

	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		return 0;
	fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = 0;
		close(fd);
	}
	return c != '2';
}

int index_room_reserve(size_t n, struct index_room *b)
{
	if (n > SIZE_MAX / sizeof(struct ix_slot) / 2 || !ix_can_reserve())
		return -ENOMEM;
	return ix_map(n * sizeof(struct ix_slot), 1, b);
}

void index_room_free(const struct index_room *b)
{
	if (b->mapped)
		munmap(b->slots, b->alloc);
	else
		free(b->slots);
}

size_t index_room_bytes(size_t len)
{
	return len ? ix_page_up(len * sizeof(struct ix_slot)) : 0;
}

void index_room_trim(struct ix_slot *slots, size_t keep, size_t used)
{
	size_t from = index_room_bytes(keep), to = index_room_bytes(used);

	if (to > from)
		madvise((unsigned char *)slots + from, to - from, MADV_DONTNEED);
}
