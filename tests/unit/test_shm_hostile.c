/* test_shm_hostile: a ring producer that writes what no urnic producer writes (a record longer
 * than any packet, a record across the ring's end, a wrap record at the ring's start, a payload
 * by place whose headers or length disagree with its record or that lies past its region's end,
 * or in a memfd that could shrink, each sealed for its place) loses its ring: the consumer reads
 * nothing of it, and nothing beyond it, counts it once in shm_ring_broken, and neither
 * busy-waits on it nor refuses to sleep because of what is left in it. A record by place whose
 * region is gone is a counted drop, not a broken ring; a good one arrives with its payload read
 * in the producer's pages. A device whose inbox names another SHM_VERSION is no ring peer. Each
 * producer is a urnic device of this process whose ring the test then scribbles on through
 * /dev/shm, as a hostile process of this user could. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stats.h"
#include "mem/share.h"
#include "net/net.h"
#include "net/shm.h"
#include "net/shm_layout.h"
#include "check.h"

static struct urnic_stats_file stats; /* the consumer's counters */

static void send_one(struct urnic_net *from, uint32_t to, const char *text)
{
	struct urnic_txpkt p = {.daddr = to, .iovcnt = 1, .len = (uint32_t)strlen(text)};
	struct urnic_net_tally t = {0};

	memcpy(p.hdr, text, p.len);
	p.iov[0] = (struct iovec){.iov_base = p.hdr, .iov_len = p.len};
	CHECK(urnic_net_send(from, &p, 1, &t, NULL) >= 0, "send %s", text);
}

/* Ring packets the consumer takes within ms; true if one of them is text. */
static bool receive(struct urnic_net *n, const char *text, unsigned ms, int *count)
{
	struct urnic_net_tally t = {0};
	bool seen = false;

	*count = 0;
	for (unsigned i = 0; i < ms && !seen; i++) {
		int got = urnic_net_recv(n, n->rx_pkts, &t, 0);

		for (int k = 0; k < got; k++) {
			*count += n->rx_pkts[k].local;
			seen |= n->rx_pkts[k].local && n->rx_pkts[k].len == strlen(text) &&
				memcmp(n->rx_pkts[k].data, text, strlen(text)) == 0;
		}
		urnic_net_recv_done(n);
		usleep(1000);
	}
	return seen;
}

static struct shm_ring *map_ring_of(uint32_t saddr, uint32_t daddr)
{
	struct stat st;
	char name[NAME_LEN];

	CHECK(stat("/proc/self/ns/net", &st) == 0, "stat the network namespace");
	snprintf(name, sizeof(name), "/urnic-ring-%lu-%08x-%08x-%d", (unsigned long)st.st_ino,
		 (unsigned)ntohl(saddr), (unsigned)ntohl(daddr), (int)getpid());
	int fd = shm_open(name, O_RDWR, 0);

	CHECK(fd >= 0, "open %s", name);
	void *p = mmap(NULL, sizeof(struct shm_ring), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	close(fd);
	CHECK(p != MAP_FAILED, "map %s", name);
	return p;
}

/* A producer at src sends a good packet, which arrives; spoil() then writes into its ring. */
static void case_broken(struct urnic_net *a, const char *src, const char *what,
			void (*spoil)(struct shm_ring *), uint64_t nbroken)
{
	struct urnic_net b;
	int n;

	CHECK(urnic_net_open(&b, addr_of(src)) == 0, "open a producer at %s", src);
	send_one(&b, a->addr, "first, fine");
	CHECK(receive(a, "first, fine", 2000, &n), "%s: a good packet did not arrive", what);
	struct shm_ring *ring = map_ring_of(b.addr, a->addr);

	spoil(ring);
	CHECK(!receive(a, "", 50, &n) && n == 0, "%s: %d packets read from a spoiled ring", what, n);
	uint64_t counters[URNIC_C_COUNT];

	urnic_stats_fold(&stats, counters);
	CHECK(counters[URNIC_C_shm_ring_broken] == nbroken, "%s: shm_ring_broken %llu, want %llu",
	      what, (unsigned long long)counters[URNIC_C_shm_ring_broken],
	      (unsigned long long)nbroken);
	CHECK(!urnic_shm_pending(a), "%s: the broken ring still counts as pending", what);
	CHECK(!urnic_shm_sleep(a), "%s: the engine would not sleep because of a broken ring", what);
	urnic_shm_awake(a);
	send_one(&b, a->addr, "after");
	CHECK(!receive(a, "after", 50, &n) && n == 0, "%s: a broken ring was read again", what);
	munmap(ring, sizeof(*ring));
	urnic_net_close(&b);
}

/* A device whose inbox says another SHM_VERSION (a urnic build of another ring layout or packet
 * size) is no ring peer: a producer that has not met it yet does not reach it through a ring,
 * and its packets take the socket. */
static void case_old_version(const char *consumer, const char *producer)
{
	struct urnic_net c, b;
	struct stat st;
	char name[NAME_LEN];
	int n;

	CHECK(urnic_net_open(&c, addr_of(consumer)) == 0, "open a consumer at %s", consumer);
	CHECK(urnic_net_open(&b, addr_of(producer)) == 0, "open a producer at %s", producer);
	CHECK(stat("/proc/self/ns/net", &st) == 0, "stat the network namespace");
	snprintf(name, sizeof(name), "/urnic-inbox-%lu-%08x", (unsigned long)st.st_ino,
		 (unsigned)ntohl(c.addr));
	int fd = shm_open(name, O_RDWR, 0);

	CHECK(fd >= 0, "open %s", name);
	struct shm_inbox *in = mmap(NULL, sizeof(*in), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	close(fd);
	CHECK(in != MAP_FAILED, "map %s", name);
	CHECK(in->version == SHM_VERSION, "inbox version %u, this build's %u", in->version,
	      SHM_VERSION);
	in->version = SHM_VERSION - 1;
	CHECK(!urnic_shm_reaches(&b, c.addr), "a version-%u inbox taken for a ring peer",
	      SHM_VERSION - 1);
	send_one(&b, c.addr, "over the socket");
	CHECK(!receive(&c, "over the socket", 50, &n) && n == 0,
	      "%d packets came through a ring to a version-%u inbox", n, SHM_VERSION - 1);
	in->version = SHM_VERSION;
	munmap(in, sizeof(*in));
	urnic_net_close(&b);
	urnic_net_close(&c);
}

/* Writes a record of length len after pad bytes at stream offset at and seals it there. */
static void sealed_padded(struct shm_ring *ring, uint64_t at, uint32_t pad, uint32_t len)
{
	struct shm_rec *rec = (struct shm_rec *)(ring->data + at % RING_BYTES);

	rec->len = len;
	rec->pad = (uint16_t)pad;
	atomic_store(&rec->seal, at ^ ring->key);
}

static void sealed_record(struct shm_ring *ring, uint64_t at, uint32_t len)
{
	sealed_padded(ring, at, 0, len);
}

static void too_long(struct shm_ring *ring)
{
	sealed_record(ring, atomic_load(&ring->tail), URNIC_SHM_PKT_LEN + 1);
}

/* A record that starts in the ring's last slot and runs past its end: the tail moved there, as
 * only a process writing the ring by hand can. */
static void across_end(struct shm_ring *ring)
{
	uint64_t at = (atomic_load(&ring->tail) / RING_BYTES + 1) * RING_BYTES - REC_ALIGN;

	sealed_record(ring, at, 256); /* its slot holds REC_ALIGN bytes */
	atomic_store(&ring->tail, at);
}

/* A pad of a whole line or more: a producer pads a payload to the next line only. */
static void pad_too_long(struct shm_ring *ring)
{
	sealed_padded(ring, atomic_load(&ring->tail), REC_ALIGN, 256);
}

/* A record whose pad takes it across the ring's end, its packet alone fitting the slot. */
static void pad_across_end(struct shm_ring *ring)
{
	uint64_t at = (atomic_load(&ring->tail) / RING_BYTES + 1) * RING_BYTES - 2 * REC_ALIGN;

	sealed_padded(ring, at, REC_ALIGN - 1, 2 * REC_ALIGN - REC_HDR - 8);
	atomic_store(&ring->tail, at);
}

/* A wrap record at the ring's start, which would skip a whole lap: a producer wraps when a
 * record does not fit before the end, or to go on from the start of an empty ring, never at
 * the start itself. */
static void wrap_at_start(struct shm_ring *ring)
{
	uint64_t at = (atomic_load(&ring->tail) / RING_BYTES + 1) * RING_BYTES;

	sealed_record(ring, at, REC_WRAP);
	atomic_store(&ring->tail, at);
}

/* ---- payloads by place ---- */

#define REGION_LEN (64u << 10)
#define OP_SEND_ONLY 0x04	 /* RC SEND only: a BTH, 12 bytes */
#define OP_WRITE_FIRST 0x06 /* RC RDMA WRITE first: BTH and RETH, 28 bytes */

static uint8_t *region; /* this process's shared pages, for records by place */
static struct urnic_share_ref region_ref;

/* Seals at the tail a record by place: a BTH of opcode as its headers (hdr_len bytes), len as
 * the packet's length, the payload where place says. */
static void sealed_place(struct shm_ring *ring, uint8_t opcode, uint16_t hdr_len, uint32_t len,
			 struct shm_place place)
{
	uint64_t at = atomic_load(&ring->tail);
	struct shm_rec *rec = (struct shm_rec *)(ring->data + at % RING_BYTES);
	uint8_t hdr[64] = {opcode};

	place.hdr_len = hdr_len;
	rec->len = len;
	rec->pad = REC_BY_PLACE;
	memcpy(rec->data, &place, sizeof(place));
	memcpy(rec->data + sizeof(place), hdr, hdr_len);
	atomic_store(&rec->seal, at ^ ring->key);
}

static struct shm_place in_region(uint64_t off, uint32_t len)
{
	return (struct shm_place){.off = off, .serial = region_ref.serial, .fd = region_ref.fd,
				  .len = len};
}

/* Headers of 12 bytes where the opcode's are 28. */
static void place_short_headers(struct shm_ring *ring)
{
	sealed_place(ring, OP_WRITE_FIRST, 12, 12 + 4096 + 4, in_region(0, 4096));
}

/* A packet length that is not headers, payload and ICRC. */
static void place_wrong_length(struct shm_ring *ring)
{
	sealed_place(ring, OP_SEND_ONLY, 12, 12 + 4096 + 4 + 64, in_region(0, 4096));
}

/* A payload that runs past its region's end. */
static void place_past_region(struct shm_ring *ring)
{
	sealed_place(ring, OP_SEND_ONLY, 12, 12 + 8192 + 4, in_region(REGION_LEN - 4096, 8192));
}

/* A memfd by the right name that could shrink under the consumer's mapping. */
static void place_unsealed(struct shm_ring *ring)
{
	static int fd = -1;

	if (fd < 0) {
		char name[64];

		snprintf(name, sizeof(name), URNIC_SHARE_NAME "%016llx-999999",
			 (unsigned long long)urnic_share_nonce());
		fd = memfd_create(name, MFD_CLOEXEC);
		CHECK(fd >= 0 && ftruncate(fd, REGION_LEN) == 0, "an unsealed memfd");
	}
	sealed_place(ring, OP_SEND_ONLY, 12, 12 + 4096 + 4,
		     (struct shm_place){.serial = 999999, .fd = fd, .len = 4096});
}

/* Waits for one packet from a ring; returns it (NULL if none came in 2 s). */
static const struct urnic_rxpkt *one_packet(struct urnic_net *a)
{
	struct urnic_net_tally t = {0};

	for (int i = 0; i < 2000; i++) {
		if (urnic_net_recv(a, a->rx_pkts, &t, 0) == 1)
			return &a->rx_pkts[0];
		urnic_net_recv_done(a);
		usleep(1000);
	}
	return NULL;
}

static uint64_t counter(enum urnic_counter c)
{
	uint64_t counters[URNIC_C_COUNT];

	urnic_stats_fold(&stats, counters);
	return counters[c];
}

/* A good record by place arrives with its payload read in the producer's pages; then records
 * whose region is gone (no such fd, then a live fd of another serial) are lost and counted,
 * and the ring is not broken. */
static void case_places(struct urnic_net *a, const char *src)
{
	struct urnic_net b;
	struct shm_place gone[2] = {in_region(0, 4096), in_region(0, 4096)};
	int n;

	gone[0].fd = 1000;
	gone[1].serial++;
	CHECK(urnic_net_open(&b, addr_of(src)) == 0, "open a producer at %s", src);
	send_one(&b, a->addr, "first, fine");
	CHECK(receive(a, "first, fine", 2000, &n), "places: a good packet did not arrive");
	struct shm_ring *ring = map_ring_of(b.addr, a->addr);

	sealed_place(ring, OP_SEND_ONLY, 12, 12 + 40000 + 4, in_region(96, 40000));
	const struct urnic_rxpkt *p = one_packet(a);

	CHECK(p && p->local && p->len == 12 + 40000 + 4 && p->data[0] == OP_SEND_ONLY,
	      "the good record by place did not arrive");
	CHECK(p->payload && memcmp(p->payload, region + 96, 40000) == 0,
	      "its payload is not the producer's bytes");
	urnic_net_recv_done(a);
	CHECK(counter(URNIC_C_shm_rx_placed) == 1, "in place %llu, want 1",
	      (unsigned long long)counter(URNIC_C_shm_rx_placed));
	for (int i = 0; i < 2; i++) {
		sealed_place(ring, OP_SEND_ONLY, 12, 12 + 4096 + 4, gone[i]);
		CHECK(!receive(a, "", 50, &n) && n == 0, "a payload in a region gone was read");
	}
	CHECK(counter(URNIC_C_shm_place_stale) == 2 && counter(URNIC_C_shm_place_refused) == 0 &&
		      counter(URNIC_C_shm_ring_broken) == 0 && !atomic_load(&ring->places_refused),
	      "regions gone: %llu stale (want 2), %llu refused, %llu broken",
	      (unsigned long long)counter(URNIC_C_shm_place_stale),
	      (unsigned long long)counter(URNIC_C_shm_place_refused),
	      (unsigned long long)counter(URNIC_C_shm_ring_broken));
	munmap(ring, sizeof(*ring));
	urnic_net_close(&b);
}

/* A ring whose producer's first place cannot be found where its PID says is refused once: the
 * flag in the ring, one count, nothing read. (As when the PID names another process, in another
 * PID namespace: the consumer cannot tell that from a region gone, so before any place of this
 * producer's was found it takes it for a refusal, and the producer's payloads then go in the
 * ring instead of being resent by place until its retries run out.) */
static void case_place_refused(struct urnic_net *a, const char *src)
{
	struct urnic_net b;
	struct shm_place nowhere = in_region(0, 4096);
	uint64_t refused = counter(URNIC_C_shm_place_refused);
	int n;

	nowhere.fd = 1000;
	CHECK(urnic_net_open(&b, addr_of(src)) == 0, "open a producer at %s", src);
	send_one(&b, a->addr, "first, fine");
	CHECK(receive(a, "first, fine", 2000, &n), "refused: a good packet did not arrive");
	struct shm_ring *ring = map_ring_of(b.addr, a->addr);

	sealed_place(ring, OP_SEND_ONLY, 12, 12 + 4096 + 4, nowhere);
	CHECK(!receive(a, "", 50, &n) && n == 0, "a place found nowhere was read");
	CHECK(atomic_load(&ring->places_refused) &&
		      counter(URNIC_C_shm_place_refused) == refused + 1,
	      "not refused: flag %u, %llu counted", atomic_load(&ring->places_refused),
	      (unsigned long long)(counter(URNIC_C_shm_place_refused) - refused));
	munmap(ring, sizeof(*ring));
	urnic_net_close(&b);
}

int main(void)
{
	struct urnic_net a;

	setenv("URNIC_SHM", "1", 1);
	CHECK(urnic_net_open(&a, addr_of("127.88.1.1")) == 0, "open the consumer");
	a.stats = &stats;
	region = mmap(NULL, REGION_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (unsigned i = 0; i < REGION_LEN; i++)
		region[i] = (uint8_t)(i * 13 + 1);
	CHECK(urnic_share_get(region, REGION_LEN, false) &&
		      urnic_share_find(region, REGION_LEN, &region_ref),
	      "share this process's pages");
	case_old_version("127.88.1.13", "127.88.1.14");
	case_places(&a, "127.88.1.10");
	case_place_refused(&a, "127.88.1.12");
	case_broken(&a, "127.88.1.2", "a record longer than any packet", too_long, 1);
	case_broken(&a, "127.88.1.3", "a record across the ring's end", across_end, 2);
	case_broken(&a, "127.88.1.4", "a wrap record at the ring's start", wrap_at_start, 3);
	case_broken(&a, "127.88.1.5", "a pad of a whole line", pad_too_long, 4);
	case_broken(&a, "127.88.1.6", "a pad that runs across the ring's end", pad_across_end, 5);
	case_broken(&a, "127.88.1.7", "headers by place shorter than the opcode's",
		    place_short_headers, 6);
	case_broken(&a, "127.88.1.8", "a packet by place of the wrong length", place_wrong_length,
		    7);
	case_broken(&a, "127.88.1.9", "a payload by place past its region", place_past_region, 8);
	case_broken(&a, "127.88.1.11", "a payload by place in a memfd that can shrink",
		    place_unsealed, 9);
	urnic_net_close(&a);
	return 0;
}
