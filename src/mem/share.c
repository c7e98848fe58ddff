/* share.c - registered memory a peer process of this host may read in place.
 *
 * At ibv_reg_mr, the whole pages of an MR (of URNIC_SHM_REF_MIN bytes or more, or of any size if
 * it grants remote access) are moved onto a memfd: a new shared mapping of the
 * memfd, holding a copy of the pages, takes their place at the same addresses (mremap), so the
 * application sees the same memory with the same bytes. A packet through a shared-memory ring
 * whose payload lies in such a region then names it by place (memfd, offset) instead of carrying
 * a copy, and the consumer maps the memfd through /proc/PID/fd and copies the payload once,
 * straight into its own MR (net/shm.c); and a ring peer's one-sided WRITE or READ reaches an MR
 * that lies wholly in such a region (engine/direct.c).
 *
 * Only private anonymous memory moves (malloc's and mmap's, not files, not shared memory, not the
 * stack, not huge pages), and at most URNIC_SHARE_MAX_BYTES of it per MR (the pages are doubled
 * while they are copied). MRs over the same pages share one region; an MR whose pages overlap a
 * region only in part keeps its memory as it is (its packets carry their payload, as before).
 * When the last MR over a region is deregistered, the region's pages become private memory again,
 * with the bytes they hold, so memory that was once registered is ordinary memory afterwards. A
 * fork's child gets its own private copy of every region at once (pthread_atfork), as it would
 * of private memory, instead of sharing the parent's pages.
 *
 * What it costs and what it risks (docs/ARCHITECTURE.md): a copy of the pages at registration
 * and at deregistration; a write another thread makes to those pages while they are copied may
 * be lost; a process of the same user that may read this one's /proc/PID/fd can map them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/dma.h"
#include "common/param.h"
#include "mem/share.h"

struct region {
	uint8_t *base;
	size_t size;
	int fd;
	uint32_t serial;
	unsigned mrs; /* MRs over it */
	/* its pages are no longer the memfd's (unmapped by the application, its MRs left): found
	 * by no lookup, kept until those MRs are deregistered */
	bool gone;
};

/* Guards the regions (get, put, find and fork). A mutex, not a rwlock: the fork handlers take
 * it in the parent and let go of it in the child, which glibc's rwlock does not allow (it knows
 * its writer by thread ID, and the child's is another), and re-initialising it instead left
 * ThreadSanitizer taking it for held. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region regions[URNIC_SHARE_REGIONS]; /* disjoint */
static int nregions;
static uint32_t next_serial;
static pthread_once_t forks_watched = PTHREAD_ONCE_INIT;
static pthread_once_t nonce_drawn = PTHREAD_ONCE_INIT;
static uint64_t nonce;

static bool enabled(void)
{
	const char *shm = getenv("URNIC_SHM"), *mr = getenv("URNIC_SHM_MR");

	return !(shm && shm[0] == '0') && !(mr && mr[0] == '0');
}

/* ---- what /proc/self/maps says about a range ---- */

struct maps_line {
	char perms[8];
	unsigned long inode;
	const char *path;
};

typedef bool (*maps_test)(const struct maps_line *l, const void *arg);

/* Whether every byte of [lo, hi) is mapped, by mappings that all pass test. */
static bool mapped_as(uintptr_t lo, uintptr_t hi, maps_test test, const void *arg)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];
	uintptr_t at = lo;

	while (f && at < hi && fgets(line, sizeof(line), f)) {
		struct maps_line l;
		unsigned long start, end;
		int path_at = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &start, &end, l.perms, &l.inode,
			   &path_at) < 4 || path_at == 0)
			continue;
		if (end <= at)
			continue;
		if (start > at)
			break; /* a hole */
		line[strcspn(line, "\n")] = 0;
		l.path = line + path_at;
		if (!test(&l, arg))
			break;
		at = end;
	}
	if (f)
		fclose(f);
	return at >= hi;
}

/* read-write and nothing more: the memfd's mapping would not keep an execute permission */
static bool private_anonymous(const struct maps_line *l, const void *arg)
{
	return strcmp(l->perms, "rw-p") == 0 && l->inode == 0 &&
	       (l->path[0] == 0 || strcmp(l->path, "[heap]") == 0);
}

static bool this_memfd(const struct maps_line *l, const void *arg)
{
	return l->perms[3] == 's' && strcmp(l->path, arg) == 0;
}

static void draw_nonce(void)
{
	while (nonce == 0)
		if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
			nonce = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&nonce;
}

uint64_t urnic_share_nonce(void)
{
	pthread_once(&nonce_drawn, draw_nonce);
	return nonce;
}

static void memfd_name(char *out, size_t len, uint64_t of, uint32_t serial)
{
	snprintf(out, len, URNIC_SHARE_NAME "%016llx-%u", (unsigned long long)of, serial);
}

void urnic_share_link(char *out, size_t len, uint64_t of, uint32_t serial)
{
	char name[48];

	memfd_name(name, sizeof(name), of, serial);
	snprintf(out, len, "/memfd:%s (deleted)", name);
}

/* ---- moving pages ---- */

/* A memfd of size bytes that cannot shrink or grow (a peer's mapping of it stays whole). */
static int make_memfd(uint32_t serial, size_t size)
{
	char name[48];
	int fd;

	memfd_name(name, sizeof(name), urnic_share_nonce(), serial);
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Puts in place of [base, base+size) a new mapping holding the bytes it holds: of memfd fd, or
 * private anonymous memory with fd -1. By system call, not through libc's mmap and mremap:
 * libraries that hook those to drop their registration caches (UCX's ucm) would take the move
 * for the application's unmapping of memory it is registering. */
static bool replace(uint8_t *base, size_t size, int fd)
{
	int flags = fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS;
	/* every argument a long: syscall() reads each as one, and an int's upper half is undefined
	 * (a file offset of garbage made the copy fault) */
	void *fresh = (void *)syscall(SYS_mmap, 0L, (long)size, (long)(PROT_READ | PROT_WRITE),
				      (long)flags, (long)fd, 0L);

	if (fresh == MAP_FAILED)
		return false;
	URNIC_DMA_BEGIN(); /* the application's memory */
	memcpy(fresh, base, size);
	URNIC_DMA_END();
	if ((void *)syscall(SYS_mremap, (long)fresh, (long)size, (long)size,
			    (long)(MREMAP_MAYMOVE | MREMAP_FIXED), (long)base) == MAP_FAILED) {
		syscall(SYS_munmap, (long)fresh, (long)size);
		return false;
	}
	return true;
}

/* Moves [lo, hi) onto a new memfd; its region's serial, or 0. */
static uint32_t share(uintptr_t lo, uintptr_t hi)
{
	size_t size = hi - lo;
	uint32_t serial = ++next_serial ? next_serial : ++next_serial;
	int fd;

	if (nregions == URNIC_SHARE_REGIONS || !mapped_as(lo, hi, private_anonymous, NULL))
		return 0;
	fd = make_memfd(serial, size);
	if (fd < 0)
		return 0;
	if (!replace((uint8_t *)lo, size, fd)) {
		close(fd);
		return 0;
	}
	regions[nregions++] = (struct region){
		.base = (uint8_t *)lo, .size = size, .fd = fd, .serial = serial, .mrs = 1};
	return serial;
}

/* Whether r's pages are still its memfd's: the application may have unmapped them (freed the
 * memory, its MRs left registered), and something else taken their place. */
static bool still_mapped(const struct region *r)
{
	char path[80];

	urnic_share_link(path, sizeof(path), urnic_share_nonce(), r->serial);
	return mapped_as((uintptr_t)r->base, (uintptr_t)r->base + r->size, this_memfd, path);
}

/* Makes r's pages private memory again, if they are still its memfd's, and lets go of the
 * memfd: peers that map it keep the bytes it held. */
static void release_pages(struct region *r)
{
	if (!r->gone && still_mapped(r))
		replace(r->base, r->size, -1);
	close(r->fd);
}

/* ---- fork ---- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

/* The child would share the parent's pages of every region: it gets a private copy of each, as
 * of any private memory (bytes the parent writes meanwhile may be in it). */
static void fork_child(void)
{
	for (int i = 0; i < nregions; i++)
		release_pages(&regions[i]);
	nregions = 0;
	pthread_mutex_unlock(&lock);
}

static void watch_forks(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- the interface ---- */

uint32_t urnic_share_get(void *addr, size_t len, bool small)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)addr + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)addr + len) & ~(page - 1);
	uint32_t serial = 0;
	int i;

	if (!enabled() || hi <= lo)
		return 0;
	pthread_once(&forks_watched, watch_forks);
	pthread_mutex_lock(&lock);
	/* whatever its size, new memory where a region's pages were is not the region's */
	for (i = 0; i < nregions; i++) {
		uintptr_t b = (uintptr_t)regions[i].base, e = b + regions[i].size;

		if (regions[i].gone || lo >= e || hi <= b)
			continue;
		if (still_mapped(&regions[i]))
			break;
		regions[i].gone = true;
	}
	if ((hi - lo < URNIC_SHM_REF_MIN && !small) || hi - lo > URNIC_SHARE_MAX_BYTES) {
		serial = 0; /* stays as it is */
	} else if (i == nregions) {
		serial = share(lo, hi);
	} else if (lo >= (uintptr_t)regions[i].base &&
		   hi <= (uintptr_t)regions[i].base + regions[i].size) {
		regions[i].mrs++; /* regions are disjoint: the one it overlaps holds it all */
		serial = regions[i].serial;
	}
	pthread_mutex_unlock(&lock);
	return serial;
}

void urnic_share_put(uint32_t serial)
{
	if (!serial)
		return;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nregions; i++) {
		if (regions[i].serial != serial)
			continue;
		if (--regions[i].mrs == 0) {
			release_pages(&regions[i]);
			regions[i] = regions[--nregions];
		}
		break;
	}
	pthread_mutex_unlock(&lock);
}

bool urnic_share_find(const void *p, size_t len, struct urnic_share_ref *ref)
{
	uintptr_t a = (uintptr_t)p;
	bool found = false;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nregions && !found; i++) {
		uintptr_t b = (uintptr_t)regions[i].base;

		if (!regions[i].gone && a >= b && len <= regions[i].size &&
		    a - b <= regions[i].size - len) {
			*ref = (struct urnic_share_ref){
				.off = a - b, .serial = regions[i].serial, .fd = regions[i].fd};
			found = true;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}
