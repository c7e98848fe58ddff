/* test_share: an MR's whole pages move onto a memfd a peer can map (mem/share.c), and the
 * application sees no difference: the same bytes at the same addresses, before and after, and
 * ordinary private memory once the last MR over them is gone. One behaviour per function:
 * - pages of private anonymous memory are shared, bytes kept, and found by address;
 * - an MR not page aligned shares only the pages wholly inside it;
 * - a second MR over the same pages shares the region, one overlapping it in part does not;
 * - a small MR is shared when a peer may reach it one-sided (small), not otherwise;
 * - too small, too large, file-backed, shared, or switched off (URNIC_SHM_MR=0): left alone;
 * - the last put makes the pages private again, bytes kept;
 * - memory mapped where a region's pages were (its MR left registered) is not the region's;
 * - a fork's child gets private pages: neither side sees the other's writes. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "expect.h"
#include "mem/share.h"

#define PAGE 4096u
#define SIZE (64u * PAGE)

/* The /proc/self/maps line's path for addr ("" for none), or NULL if addr is not mapped. */
static const char *path_at(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	const char *found = NULL;

	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int at = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) < 2)
			continue;
		if ((uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, len, "%s", at ? line + at : "");
			found = out;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static bool shared_at(const void *addr)
{
	char path[256];

	return path_at(addr, path, sizeof(path)) && strstr(path, "/memfd:" URNIC_SHARE_NAME);
}

static uint8_t *fresh(size_t len)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		abort();
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + 3);
	return p;
}

static bool bytes_kept(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 7 + 3))
			return false;
	return true;
}

static void shares_and_finds(void)
{
	uint8_t *p = fresh(SIZE);
	struct urnic_share_ref ref;
	uint32_t serial = urnic_share_get(p, SIZE, false);

	EXPECT(serial != 0, "private anonymous memory not shared");
	EXPECT(shared_at(p) && shared_at(p + SIZE - 1), "the pages are not the memfd's");
	EXPECT(bytes_kept(p, SIZE), "bytes changed by sharing");
	EXPECT(urnic_share_find(p + 100, 5000, &ref) && ref.off == 100 && ref.serial == serial,
	       "a range inside not found where it is");
	EXPECT(!urnic_share_find(p + SIZE - 10, 11, &ref), "a range past the end found");
	EXPECT(!urnic_share_find(p - 1, 2, &ref), "a range before the start found");
	urnic_share_put(serial);
	munmap(p, SIZE);
}

static void unaligned_shares_whole_pages(void)
{
	uint8_t *p = fresh(SIZE);
	struct urnic_share_ref ref;
	uint32_t serial = urnic_share_get(p + 100, SIZE - 200, false);

	EXPECT(serial != 0, "not shared");
	EXPECT(!shared_at(p) && !shared_at(p + SIZE - 1), "a page partly outside the MR shared");
	EXPECT(shared_at(p + PAGE) && shared_at(p + SIZE - PAGE - 1), "inner pages not shared");
	EXPECT(!urnic_share_find(p + 100, 10, &ref), "bytes of the first page found");
	EXPECT(bytes_kept(p, SIZE), "bytes changed by sharing");
	urnic_share_put(serial);
	munmap(p, SIZE);
}

static void second_mr_joins_overlap_does_not(void)
{
	uint8_t *p = fresh(2 * SIZE);
	uint32_t a = urnic_share_get(p, SIZE, false);
	uint32_t b = urnic_share_get(p + PAGE, SIZE - 2 * PAGE, false);
	uint32_t c = urnic_share_get(p + SIZE / 2, SIZE, false);

	EXPECT(a && b == a, "an MR inside a region got %u, want %u", b, a);
	EXPECT(c == 0, "an MR over part of a region got region %u", c);
	EXPECT(!shared_at(p + SIZE + PAGE), "the partly overlapping MR's pages shared");
	urnic_share_put(a);
	EXPECT(shared_at(p), "the region went with one of its two MRs");
	urnic_share_put(b);
	EXPECT(!shared_at(p) && bytes_kept(p, 2 * SIZE), "the last put left it shared or changed");
	munmap(p, 2 * SIZE);
}

static void small_shared_for_one_sided(void)
{
	uint8_t *p = fresh(PAGE);
	uint32_t serial = urnic_share_get(p, PAGE, true);

	EXPECT(serial != 0 && shared_at(p) && bytes_kept(p, PAGE),
	       "a one-page MR a peer may reach one-sided was not shared");
	urnic_share_put(serial);
	EXPECT(!shared_at(p) && bytes_kept(p, PAGE), "the put left it shared or changed");
	munmap(p, PAGE);
}

static void left_alone(void)
{
	uint8_t *small = fresh(URNIC_SHM_REF_MIN - PAGE);
	uint8_t *shared =
		mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char name[] = "/tmp/test_share_XXXXXX";
	int fd = mkstemp(name);
	uint8_t *file = MAP_FAILED;

	if (fd >= 0 && ftruncate(fd, SIZE) == 0)
		file = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	EXPECT(urnic_share_get(small, URNIC_SHM_REF_MIN - PAGE, false) == 0, "a small MR shared");
	EXPECT(urnic_share_get(small + 1, PAGE - 1, true) == 0,
	       "an MR holding no whole page shared");
	/* never touched, so never copied: the size check comes first */
	size_t huge_len = URNIC_SHARE_MAX_BYTES + 2 * PAGE;
	uint8_t *huge = mmap(NULL, huge_len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	EXPECT(huge != MAP_FAILED && urnic_share_get(huge, huge_len, true) == 0,
	       "an MR over the cap");
	EXPECT(shared != MAP_FAILED && urnic_share_get(shared, SIZE, true) == 0,
	       "shared memory moved");
	EXPECT(file != MAP_FAILED && urnic_share_get(file, SIZE, true) == 0,
	       "a file mapping moved");
	setenv("URNIC_SHM_MR", "0", 1);
	uint8_t *off = fresh(SIZE);

	EXPECT(urnic_share_get(off, SIZE, true) == 0 && !shared_at(off),
	       "shared with URNIC_SHM_MR=0");
	unsetenv("URNIC_SHM_MR");
	if (fd >= 0) {
		close(fd);
		unlink(name);
	}
}

static void put_makes_private(void)
{
	uint8_t *p = fresh(SIZE);
	uint32_t serial = urnic_share_get(p, SIZE, false);
	char path[256];

	p[5] = 0x55;
	urnic_share_put(serial);
	p[5] = (uint8_t)(5 * 7 + 3);
	EXPECT(path_at(p, path, sizeof(path)) && path[0] == 0, "after the last put: \"%s\"", path);
	EXPECT(bytes_kept(p, SIZE), "bytes changed by unsharing");
	munmap(p, SIZE);
}

static void new_memory_in_old_place(void)
{
	uint8_t *p = fresh(SIZE);
	uint32_t old = urnic_share_get(p, SIZE, false);
	struct urnic_share_ref ref;

	/* freed without its MR deregistered, and new memory at the same addresses */
	uint8_t *q = mmap(p, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			  -1, 0);
	uint32_t again = q == p ? urnic_share_get(p, SIZE, false) : 0;

	EXPECT(old && again && again != old, "the new memory's MR got region %u (old %u)", again,
	       old);
	EXPECT(urnic_share_find(p, SIZE, &ref) && ref.serial == again,
	       "found in region %u, want the new %u", ref.serial, again);
	urnic_share_put(old);
	EXPECT(shared_at(p), "the old MR's dereg moved the new region's pages");
	urnic_share_put(again);
	EXPECT(!shared_at(p), "the new region's pages still shared");
	munmap(p, SIZE);
}

static void fork_child_is_private(void)
{
	uint8_t *p = fresh(SIZE);
	uint32_t serial = urnic_share_get(p, SIZE, false);
	int ready[2], done[2];

	if (pipe(ready) != 0 || pipe(done) != 0)
		abort();
	pid_t child = fork();
	char c = 0;

	if (child == 0) { /* its pages are its own: the parent's write does not reach them */
		p[1] = 0x11;
		c = !shared_at(p) ? 'r' : 's';
		if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) != 1)
			_exit(3);
		_exit(p[0] == (uint8_t)3 && p[1] == 0x11 ? 0 : 4);
	}
	EXPECT(read(ready[0], &c, 1) == 1 && c == 'r', "the child's pages are still shared");
	p[0] = 0x22;
	EXPECT(p[1] == (uint8_t)(1 * 7 + 3), "the child's write reached the parent");
	if (write(done[1], &c, 1) != 1)
		abort();
	int status = 0;

	waitpid(child, &status, 0);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw the parent's write"
	       " (status %d)", status);
	EXPECT(shared_at(p), "the parent's region went with the fork");
	urnic_share_put(serial);
	munmap(p, SIZE);
}

int main(void)
{
	unsetenv("URNIC_SHM");
	unsetenv("URNIC_SHM_MR");
	shares_and_finds();
	unaligned_shares_whole_pages();
	second_mr_joins_overlap_does_not();
	small_shared_for_one_sided();
	left_alone();
	put_makes_private();
	new_memory_in_old_place();
	fork_child_is_private();
	return test_failures ? 1 : 0;
}
