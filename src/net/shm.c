/* shm.c - the intra-host path: packets between urnic processes of one host through
 * shared-memory rings instead of UDP sockets.
 *
 * Each device that has the path on publishes an inbox, /dev/shm/urnic-inbox-NETNS-ADDR (NETNS: the
 * network namespace's inode, so only peers that would reach the address over the network
 * namespace's own routes find it). A process sending to ADDR for the first time maps that inbox and
 * creates one ring of its own for the pair, /dev/shm/urnic-ring-NETNS-SADDR-DADDR-PID: a
 * single-producer single-consumer ring of 4 MiB holding packets as records of their own length (an
 * ACK takes 64 bytes, a packet of URNIC_SHM_MTU bytes of payload a little more), the producing
 * process's threads taking a mutex of their own. It tells the receiver with a control datagram on
 * the receiver's UDP port naming the ring; the receiver checks the name, the owner and the header,
 * and maps it. From then on the packets - the same BTH-to-ICRC bytes the wire would carry - are
 * copied into the ring, and the receiver's engine reads them in place, through every check the
 * wire's packets pass except the ICRC (no wire between them), and gives the space back after the
 * batch. A connection's packet that finds the ring full is held back: its requester keeps it and
 * sends it again once the ring has room, without counting a loss (a response or an ACK is lost, as
 * on a full link, and the transport recovers it); a UD datagram takes the UDP socket instead (no
 * order to keep). The transport above (PSNs, ACKs, retransmission, RNR, every error) is the same
 * code on both paths.
 *
 * Waking: a receiver about to sleep on its socket sets inbox->sleeping and looks at its rings
 * once more; a producer publishes, then reads the flag (both with a full fence: neither can miss
 * the other) and, if set, sends the control datagram again as a doorbell. It rings it too for
 * a packet sent again (a probe, a go-back): a standing-back engine thread on rings alone listens
 * for it (engine.c, sleep_until).
 *
 * Trust: files are created 0600 and a ring or inbox is used only if its owner is this process's
 * effective uid, the trust UCX's shared-memory transports assume. A peer with a ring can put any
 * bytes in it; they are checked like any packet, so it writes no memory a packet could not. A
 * record by place makes the consumer look up an fd of the process the ring's name gives
 * (/proc/PID/fd): it is opened only if its name is a urnic memfd of that producer's, and mapped
 * read-only, so a peer can make it read only what that process shares, which the peer could map
 * itself (docs/ARCHITECTURE.md, "Trust model").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/clock.h"
#include "common/dma.h"
#include "common/stats.h"
#include "mem/share.h"
#include "net/shm.h"
#include "net/shm_layout.h"

#define NO_INBOX_RECHECK_NS 1000000000ull /* a destination without an inbox is asked again */
#define FULL_RING_NUDGE_NS 100000000ull	  /* a full ring re-sends its control datagram */

/* The ring bytes a record takes: its header, pad bytes, a packet of len bytes, rounded up. */
static uint32_t rec_size(uint32_t pad, uint32_t len)
{
	return (REC_HDR + pad + len + REC_ALIGN - 1) & ~(REC_ALIGN - 1);
}

/* A destination, as this process's producers see it. */
struct shm_route {
	uint32_t daddr;
	atomic_bool local; /* a urnic inbox is there: packets go through ring */
	_Atomic uint64_t recheck_ns;
	uint64_t nudged_ns;
	struct shm_inbox *inbox;
	struct shm_ring *ring;
	/* the ring's tail as last read (under lock): the consumer moves it after each batch and as
	 * soon as it reads a wrap at it, and reading it costs the producer a cache miss, so it is
	 * read again only when this one leaves no room, or by rewind_if_empty */
	uint64_t tail_seen;
	uint64_t rewind_looked; /* the head when rewind_if_empty last read the tail */
	/* when urnic_shm_behind last rang and looked at the reader, and whether it was alive */
	uint64_t behind_looked_ns;
	bool reader_alive;
	/* the inbox of the reader before the last renewal: a one-sided operation that read it
	 * before may still be using its board (engine/direct.c), so it stays mapped a while */
	struct shm_inbox *retired;
	char name[NAME_LEN];
	pthread_mutex_t lock;
};

/* A producer's shared region (mem/share.h), mapped read-only here: payloads by place are read
 * in it. Unmapped when idle for VIEW_IDLE_NS, or to make room. */
struct shm_view {
	int pid;
	int32_t fd;
	uint32_t serial;
	uint64_t nonce;
	const uint8_t *base; /* NULL: a free entry */
	size_t size;
	uint64_t used_recv; /* the receive that last read through it */
};

/* a view no receive read through between two looks at least this far apart goes */
#define VIEW_IDLE_NS 1000000000ull

static void close_view(struct shm_view *v);
static void drop_idle_pins(struct urnic_shm *s, uint64_t now);

/* A ring peer's shared region mapped read-write for one-sided operations (engine/direct.c):
 * held by users while they copy through it, unmapped only when no one holds it. */
struct urnic_shm_pin {
	int pid;
	uint64_t nonce;
	int32_t fd;
	uint32_t serial;
	uint8_t *base; /* NULL: a free entry */
	size_t size;
	int users;	  /* under pins_lock */
	uint64_t used_ns; /* the last pin */
};

/* A ring some peer fills for this device. */
struct shm_in {
	/* atomic: the engine thread's watch reads it without progress_lock (see `watching`) */
	struct shm_ring *_Atomic ring;
	_Atomic uint64_t key; /* its seals' (shm_layout.h), as read when it was mapped */
	char name[NAME_LEN]; /* as its control datagram named it */
	int pid;	     /* its producer's, from the name */
	uint64_t nonce;	     /* its producer's memfds', as read when it was mapped */
	/* a place of its producer's has been mapped: /proc/PID is the producer (until then, a
	 * place that cannot be found there is a refusal, not a region gone) */
	bool placed_once;
	uint64_t taken;	 /* bytes handed out by the last urnic_shm_recv */
	/* held a record no producer of ours writes: read no more (and it holds nothing to wait
	 * for; set under progress_lock, read by the engine thread's watch and sleep without it) */
	atomic_bool broken;
};

struct urnic_shm {
	unsigned long netns;
	uint32_t addr;
	struct shm_inbox *inbox;
	char inbox_name[NAME_LEN];
	pthread_mutex_t routes_lock; /* creating routes; lookups read `routes` without it */
	_Atomic int nroutes;
	struct shm_route routes[URNIC_SHM_PEERS];
	/* entries are written before nin covers them; one whose producer died is reused once all
	 * are taken, under progress_lock */
	_Atomic int nin;
	struct shm_in in[URNIC_SHM_PEERS];
	/* the engine thread is reading in[].ring without progress_lock (urnic_shm_pending): a
	 * reused entry's old ring is unmapped only once it is not */
	_Atomic int watching;
	int ctl_fd; /* sends the control datagrams */
	/* producers' shared pages mapped here, and the headers of the last receive's packets by
	 * place (their records may change under us): the progress_lock holder's */
	struct shm_view views[URNIC_SHM_VIEWS];
	int nplaced;
	uint8_t placed_hdrs[URNIC_SHM_REFS][URNIC_MAX_HDR_LEN];
	uint64_t recvs;
	uint64_t views_seen_ns, views_seen_recv; /* the last look for idle views */
	/* peers' regions mapped for one-sided operations, by any application thread */
	pthread_mutex_t pins_lock;
	struct urnic_shm_pin pins[URNIC_SHM_VIEWS];
	/* the last peer whose fds could not be opened at all (not dumpable, another PID namespace):
	 * not asked again, or each of its operations would pay the failed look up */
	int refused_pid;
	uint64_t refused_nonce;
	uint64_t pins_swept_ns; /* the last drop_idle_pins (pins_lock) */
};

static unsigned long netns_id(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

static void inbox_name(char *out, unsigned long netns, uint32_t addr)
{
	snprintf(out, NAME_LEN, "/urnic-inbox-%lu-%08x", netns, (unsigned)ntohl(addr));
}

static void ring_name(char *out, unsigned long netns, uint32_t saddr, uint32_t daddr, int pid)
{
	snprintf(out, NAME_LEN, "/urnic-ring-%lu-%08x-%08x-%d", netns, (unsigned)ntohl(saddr),
		 (unsigned)ntohl(daddr), pid);
}

/* Maps a shared-memory file of exactly size bytes owned by this user. Here and in create_mapped,
 * every page is mapped at once (MAP_POPULATE): a ring's pages first touched in traffic each
 * cost a page fault on both sides, and in ib_send_lat's 20,000 round trips over the rings the
 * first lap's faults made 8% of the round trips 10-60 us and half of the average. */
static void *map_owned(const char *name, int flags, size_t size)
{
	int fd = shm_open(name, flags | O_CLOEXEC, 0600);
	struct stat st;
	void *p = MAP_FAILED;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (size_t)st.st_size == size)
		p = mmap(NULL, size, (flags & O_ACCMODE) == O_RDONLY ? PROT_READ
								 : PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* Creates (or, left over by a process that died, replaces) a file of size bytes and maps it. */
static void *create_mapped(const char *name, size_t size)
{
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0 && errno == EEXIST) {
		shm_unlink(name);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return NULL;
	void *p = ftruncate(fd, (off_t)size) == 0
			  ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)
			  : MAP_FAILED;

	close(fd);
	if (p == MAP_FAILED) {
		shm_unlink(name);
		return NULL;
	}
	return p;
}

static bool enabled(void)
{
	const char *v = getenv("URNIC_SHM");

	return !(v && v[0] == '0');
}

/* URNIC_SHM_DIRECT=0: no one-sided operation into this device, nor from it (engine/direct.c) */
static bool direct_enabled(void)
{
	const char *v = getenv("URNIC_SHM_DIRECT");

	return !(v && v[0] == '0');
}

static bool pid_alive(int pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Rings, inboxes and counter files that processes of this user left behind when they died
 * without closing their device (killed): gone, so /dev/shm does not fill up with them. */
static void sweep_dead(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char name[NAME_LEN + 1];
		unsigned long ns;
		unsigned a, b;
		int pid = 0, end = 0;

		size_t len = strlen(e->d_name);

		if (strncmp(e->d_name, "urnic-", 6) != 0 || len >= NAME_LEN)
			continue;
		name[0] = '/';
		memcpy(name + 1, e->d_name, len + 1);
		if (sscanf(name, "/urnic-ring-%lu-%8x-%8x-%d%n", &ns, &a, &b, &pid, &end) == 4 &&
		    !name[end]) {
			struct stat st;

			if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_uid == geteuid() &&
			    !pid_alive(pid))
				shm_unlink(name);
		} else if (sscanf(name, "/urnic-%d-%*[^.].stats%n", &pid, &end) == 1 && !name[end]) {
			struct stat st; /* a device's counters (verbs/device.c) */

			if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_uid == geteuid() &&
			    !pid_alive(pid))
				unlinkat(dirfd(d), e->d_name, 0);
		} else if (sscanf(name, "/urnic-inbox-%lu-%8x%n", &ns, &a, &end) == 2 && !name[end]) {
			/* (a file of an older layout is of another size: left alone) */
			struct shm_inbox *in = map_owned(name, O_RDONLY, sizeof(*in));

			if (in && in->magic == INBOX_MAGIC && !pid_alive(in->pid))
				shm_unlink(name);
			if (in)
				munmap(in, sizeof(*in));
		}
	}
	if (d)
		closedir(d);
}

int urnic_shm_open(struct urnic_net *net)
{
	struct urnic_shm *s;

	net->shm = NULL;
	if (!enabled() || !(s = calloc(1, sizeof(*s))))
		return 0;
	sweep_dead();
	s->netns = netns_id();
	s->addr = net->addr;
	s->ctl_fd = net->tx_fd[0];
	inbox_name(s->inbox_name, s->netns, s->addr);
	s->inbox = create_mapped(s->inbox_name, sizeof(*s->inbox));
	if (!s->inbox) {
		free(s);
		return 0;
	}
	/* the file's zeros are an empty board */
	s->inbox->version = SHM_VERSION;
	s->inbox->pid = (int32_t)getpid();
	s->inbox->addr = s->addr;
	s->inbox->direct = direct_enabled();
	s->inbox->share_nonce = urnic_share_nonce();
	atomic_store_explicit((_Atomic uint64_t *)&s->inbox->magic, INBOX_MAGIC,
			      memory_order_release);
	pthread_mutex_init(&s->routes_lock, NULL);
	pthread_mutex_init(&s->pins_lock, NULL);
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->inbox->alive, &a);
	pthread_mutexattr_destroy(&a);
	net->shm = s;
	return 0;
}

void urnic_shm_close(struct urnic_net *net)
{
	struct urnic_shm *s = net->shm;

	if (!s)
		return;
	shm_unlink(s->inbox_name);
	munmap(s->inbox, sizeof(*s->inbox));
	for (int i = 0; i < atomic_load(&s->nroutes); i++) {
		struct shm_route *r = &s->routes[i];

		if (r->inbox)
			munmap(r->inbox, sizeof(*r->inbox));
		if (r->retired)
			munmap(r->retired, sizeof(*r->retired));
		if (r->ring) {
			shm_unlink(r->name);
			munmap(r->ring, sizeof(*r->ring));
		}
		pthread_mutex_destroy(&r->lock);
	}
	for (int i = 0; i < atomic_load(&s->nin); i++)
		munmap(s->in[i].ring, sizeof(*s->in[i].ring));
	for (int i = 0; i < URNIC_SHM_VIEWS; i++) {
		close_view(&s->views[i]);
		if (s->pins[i].base)
			munmap(s->pins[i].base, s->pins[i].size);
	}
	pthread_mutex_destroy(&s->pins_lock);
	pthread_mutex_destroy(&s->routes_lock);
	free(s);
	net->shm = NULL;
}

/* ---- producing ---- */

/* The control datagram: "URNICSHM", then the ring's name. */
static void send_control(struct urnic_shm *s, struct shm_route *r)
{
	char msg[sizeof(CONTROL_MAGIC) - 1 + NAME_LEN];
	size_t n = strlen(r->name);
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = r->daddr};

	memcpy(msg, CONTROL_MAGIC, sizeof(CONTROL_MAGIC) - 1);
	memcpy(msg + sizeof(CONTROL_MAGIC) - 1, r->name, n);
	if (sendto(s->ctl_fd, msg, sizeof(CONTROL_MAGIC) - 1 + n, 0, (struct sockaddr *)&to,
		   sizeof(to)) < 0)
		r->nudged_ns = 0; /* try again on the next send */
}

/* A ring's key for its seals: from the clock, the pid and the mapping's address, mixed
 * (splitmix64's finaliser), with the top bit set so that no seal is 0, as a fresh page is. It
 * need not be secret from the peer, which could write the ring anyway: it only keeps stale
 * payload bytes from passing for a seal. */
static uint64_t ring_key(const void *ring)
{
	uint64_t z = urnic_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)ring;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) | (1ull << 63);
}

/* The part of a ring that a ping-pong's records use: its first URNIC_SHM_REWIND_AT bytes, and as
 * far again when a rewind is missed (rewind_if_empty). */
#define PING_PONG_BYTES (2 * URNIC_SHM_REWIND_AT)
_Static_assert(PING_PONG_BYTES < RING_BYTES, "a ping-pong stays inside the ring");

/* Touches each page of that part once, at set-up, the pages of both its ends included (data does
 * not start a page, so data + PING_PONG_BYTES lies in one more): the producer writes it, the
 * consumer reads it.
 * In this virtual machine the host shadows the guest's page tables, and a process's first write
 * to each page of a new mapping traps to the host (8 us a page here), as does its first read of
 * one page in eight (the rest come along): MAP_POPULATE and MADV_POPULATE_WRITE leave both. A
 * ping-pong round trip that met such a page in traffic took 10-18 us, one in 32 over a ring's
 * first lap. Zeros go on zeros, before the ring is announced. About 2 ms and 0.3 ms a ring. */
static void touch_pages(struct shm_ring *ring, bool write)
{
	volatile uint8_t *data = ring->data;

	for (size_t off = 0; off <= PING_PONG_BYTES; off += 4096) {
		if (write)
			data[off] = 0;
		else
			(void)data[off];
	}
}

/* An inbox is there, of a live urnic process of this user: make our ring for it. */
static bool connect_route(struct urnic_shm *s, struct shm_route *r)
{
	char name[NAME_LEN];
	struct shm_inbox *in;

	inbox_name(name, s->netns, r->daddr);
	in = map_owned(name, O_RDWR, sizeof(*in)); /* peers write its board's busy counts */
	if (!in)
		return false;
	if (atomic_load_explicit((_Atomic uint64_t *)&in->magic, memory_order_acquire) !=
		    INBOX_MAGIC ||
	    in->version != SHM_VERSION || in->addr != r->daddr ||
	    !pid_alive(in->pid)) {
		munmap(in, sizeof(*in));
		return false;
	}
	ring_name(r->name, s->netns, s->addr, r->daddr, (int)getpid());
	r->ring = create_mapped(r->name, sizeof(*r->ring));
	if (!r->ring) {
		munmap(in, sizeof(*in));
		return false;
	}
	touch_pages(r->ring, true);
	r->ring->version = SHM_VERSION;
	r->ring->bytes = RING_BYTES;
	r->ring->saddr = s->addr;
	r->ring->daddr = r->daddr;
	r->ring->pid = (int32_t)getpid();
	r->ring->key = ring_key(r->ring);
	r->ring->share_nonce = urnic_share_nonce();
	atomic_store(&r->ring->head, 0);
	r->tail_seen = r->rewind_looked = 0;
	atomic_store(&r->ring->tail, 0);
	atomic_store_explicit((_Atomic uint64_t *)&r->ring->magic, RING_MAGIC,
			      memory_order_release);
	r->inbox = in;
	send_control(s, r);
	r->nudged_ns = urnic_mono_ns();
	return true;
}

static struct shm_route *find_route(struct urnic_shm *s, uint32_t daddr)
{
	int n = atomic_load_explicit(&s->nroutes, memory_order_acquire);

	for (int i = 0; i < n; i++)
		if (s->routes[i].daddr == daddr)
			return &s->routes[i];
	return NULL;
}

/* The route to daddr, made on first use; NULL when the table is full (UDP then). */
static struct shm_route *route_of(struct urnic_shm *s, uint32_t daddr)
{
	struct shm_route *r = find_route(s, daddr);

	if (r && (atomic_load(&r->local) || urnic_mono_ns() < atomic_load(&r->recheck_ns)))
		return r;
	pthread_mutex_lock(&s->routes_lock);
	r = find_route(s, daddr);
	if (!r && atomic_load(&s->nroutes) < URNIC_SHM_PEERS) {
		r = &s->routes[atomic_load(&s->nroutes)];
		r->daddr = daddr;
		atomic_store(&r->local, false);
		atomic_store(&r->recheck_ns, 0);
		pthread_mutex_init(&r->lock, NULL);
		atomic_fetch_add_explicit(&s->nroutes, 1, memory_order_release);
	}
	if (r && !atomic_load(&r->local) && urnic_mono_ns() >= atomic_load(&r->recheck_ns)) {
		pthread_mutex_lock(&r->lock);
		bool local = connect_route(s, r);

		atomic_store(&r->recheck_ns, urnic_mono_ns() + NO_INBOX_RECHECK_NS);
		atomic_store(&r->local, local);
		pthread_mutex_unlock(&r->lock);
	}
	pthread_mutex_unlock(&s->routes_lock);
	return r;
}

static void count(struct urnic_net *net, enum urnic_counter c, uint64_t n)
{
	if (net->stats && n)
		urnic_stats_add(net->stats, c, n);
}

/* A route to daddr that goes through a ring, with its lock held; NULL if there is none. */
static struct shm_route *ring_route_locked(struct urnic_net *net, uint32_t daddr)
{
	struct shm_route *r = net->shm ? find_route(net->shm, daddr) : NULL;

	if (!r || !atomic_load(&r->local))
		return NULL;
	pthread_mutex_lock(&r->lock);
	return r;
}

uint64_t urnic_shm_mark(struct urnic_net *net, uint32_t daddr)
{
	struct shm_route *r = ring_route_locked(net, daddr);
	uint64_t head;

	if (!r)
		return 0;
	head = atomic_load_explicit(&r->ring->head, memory_order_relaxed);
	pthread_mutex_unlock(&r->lock);
	return head;
}

/* A reader that is behind may be an engine thread standing back for an application that has
 * stopped polling (engine.c): it listens for the doorbell that a probe or a go-back would have
 * rung, and gets it here instead. The reader's process may also have died, with the ring's
 * bytes never to be taken: then the timers act, as on a path that lost them. Both at most
 * every URNIC_PROBE_MIN_NS per route, whatever the number of QPs asking. Holds r->lock. */
static bool reader_waited_for(struct urnic_net *net, struct shm_route *r, uint64_t now)
{
	if (now - r->behind_looked_ns >= URNIC_PROBE_MIN_NS) {
		r->behind_looked_ns = now;
		r->reader_alive = pid_alive(r->inbox->pid);
		if (r->reader_alive) {
			send_control(net->shm, r);
			count(net, URNIC_C_shm_doorbells, 1);
		}
	}
	return r->reader_alive;
}

bool urnic_shm_behind(struct urnic_net *net, uint32_t daddr, uint64_t mark, uint64_t now)
{
	struct shm_route *r = mark ? ring_route_locked(net, daddr) : NULL;
	bool behind;

	if (!r)
		return false;
	uint64_t head = atomic_load_explicit(&r->ring->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->ring->tail, memory_order_acquire);

	behind = mark <= head && tail < mark && /* head only grows, in one ring */
		 reader_waited_for(net, r, now);
	pthread_mutex_unlock(&r->lock);
	return behind;
}

/* The process whose inbox r's ring was announced to has died: if a new one listens at its
 * address now, a new ring (same name) is made for it and the old one goes. With nobody there the
 * old ring stays: its packets are lost, as they would be on the way to a dead host, and the
 * route keeps to one path (a connection's 256 KiB packets have no other). Holds r->lock. */
static void renew_if_dead(struct urnic_shm *s, struct shm_route *r)
{
	struct shm_inbox *old_inbox = r->inbox;
	struct shm_ring *old_ring = r->ring;

	if (pid_alive(old_inbox->pid))
		return;
	if (!connect_route(s, r)) {
		r->inbox = old_inbox;
		r->ring = old_ring;
		return;
	}
	if (r->retired) /* two renewals ago: no operation is that long */
		munmap(r->retired, sizeof(*r->retired));
	r->retired = old_inbox;
	munmap(old_ring, sizeof(*old_ring));
}

bool urnic_shm_reaches(struct urnic_net *net, uint32_t daddr)
{
	struct shm_route *r = net->shm ? route_of(net->shm, daddr) : NULL;

	if (!r || !atomic_load(&r->local))
		return false;
	/* a QP being connected: the peer there now may not be the one the ring was made for */
	pthread_mutex_lock(&r->lock);
	if (atomic_load(&r->local))
		renew_if_dead(net->shm, r);
	pthread_mutex_unlock(&r->lock);
	return atomic_load(&r->local);
}

/* The record at stream offset at. */
static struct shm_rec *rec_at(struct shm_ring *ring, uint64_t at)
{
	return (struct shm_rec *)(ring->data + at % RING_BYTES);
}

/* Publishes the record at stream offset at. */
static void seal(struct shm_ring *ring, uint64_t at)
{
	atomic_store_explicit(&rec_at(ring, at)->seal, at ^ ring->key, memory_order_release);
}

/* A payload of RING_STREAM_MIN bytes or more goes into the ring with non-temporal stores: the
 * consumer's CPU then reads the lines from the shared cache or memory instead of pulling each
 * one out of this CPU's cache, and the producer does not first fetch lines the consumer's copy
 * last touched: 1 MiB WRITE over the rings faster in 15 of 17 alternating runs, by 18% at the
 * median, READ by 11% (docs/PERFORMANCE.md). Smaller packets (ACKs, latency tests' payloads)
 * keep plain stores: the consumer wants them in a cache, at once. The consumer's own copy, into
 * the MR, stays plain: streamed, it was slower (the MR's lines were in its cache). */
#define RING_STREAM_MIN 32768u

static void copy_to_ring(uint8_t *dst, const uint8_t *src, size_t n)
{
#if defined(__SSE2__)
	if (n >= RING_STREAM_MIN) {
		size_t k = (16 - ((uintptr_t)dst & 15)) & 15;

		memcpy(dst, src, k);
		for (; k + 64 <= n; k += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)(src + k));
			__m128i b = _mm_loadu_si128((const __m128i *)(src + k + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(src + k + 32));
			__m128i d = _mm_loadu_si128((const __m128i *)(src + k + 48));

			_mm_stream_si128((__m128i *)(dst + k), a);
			_mm_stream_si128((__m128i *)(dst + k + 16), b);
			_mm_stream_si128((__m128i *)(dst + k + 32), c);
			_mm_stream_si128((__m128i *)(dst + k + 48), d);
		}
		memcpy(dst + k, src + k, n - k);
		_mm_sfence(); /* streamed stores are not ordered before the seal's plain one */
		return;
	}
#endif
	memcpy(dst, src, n);
}

/* The pad before packet p in its record: for a streamed packet, what puts the payload (what
 * follows its first iovec, the headers) at a REC_ALIGN boundary. The consumer's copy into the
 * MR (rep movsb here) ran at half speed from a source 44 bytes off the line of an aligned
 * destination: 1 MiB WRITE over the rings +8% aligned (docs/PERFORMANCE.md). */
static uint32_t payload_pad(const struct urnic_txpkt *p)
{
	if (p->len < RING_STREAM_MIN || p->iovcnt < 2)
		return 0;
	return (uint32_t)(REC_ALIGN - (REC_HDR + p->iov[0].iov_len) % REC_ALIGN) % REC_ALIGN;
}

/* Writes packet p as the record at stream offset at, after pad bytes (not sealed). */
static void copy_packet(struct shm_ring *ring, uint64_t at, const struct urnic_txpkt *p,
			uint16_t sport, uint32_t pad)
{
	struct shm_rec *rec = rec_at(ring, at);
	size_t off = 0;

	rec->len = p->len;
	rec->sport = sport;
	rec->pad = (uint16_t)pad;
	URNIC_DMA_BEGIN(); /* the payload iovec points into an MR */
	for (int i = 0; i < p->iovcnt && off < p->len; i++) {
		size_t n = p->iov[i].iov_len < p->len - off ? p->iov[i].iov_len : p->len - off;

		copy_to_ring(rec->data + pad + off, p->iov[i].iov_base, n);
		off += n;
	}
	URNIC_DMA_END();
}

/* An RC packet of URNIC_SHM_REF_MIN bytes or more whose payload is one piece (headers, payload,
 * trailer) in a shared region of this process goes by place: ref says where (not copied here;
 * the consumer copies it once, into its MR). Unless the consumer has said it cannot map our
 * pages. RC only: its sender completes nothing before the ACK, which comes after the copy; a UC
 * sender completes when the packet leaves, and may then reuse or deregister the pages. */
static bool payload_place(const struct shm_ring *ring, const struct urnic_txpkt *p,
			  struct urnic_share_ref *ref)
{
	return p->len >= URNIC_SHM_REF_MIN && p->iovcnt == 3 &&
	       (urnic_op(bth_opcode(p->hdr))->mask & URNIC_M_RC) &&
	       !atomic_load_explicit(&ring->places_refused, memory_order_relaxed) &&
	       urnic_share_find(p->iov[1].iov_base, p->iov[1].iov_len, ref);
}

static uint32_t place_bytes(const struct urnic_txpkt *p)
{
	return (uint32_t)(sizeof(struct shm_place) + p->iov[0].iov_len);
}

/* Writes packet p, its payload at ref, as the record at stream offset at (not sealed). */
static void place_packet(struct shm_ring *ring, uint64_t at, const struct urnic_txpkt *p,
			 uint16_t sport, const struct urnic_share_ref *ref)
{
	struct shm_rec *rec = rec_at(ring, at);
	struct shm_place place = {.off = ref->off,
				  .serial = ref->serial,
				  .fd = ref->fd,
				  .len = (uint32_t)p->iov[1].iov_len,
				  .hdr_len = (uint16_t)p->iov[0].iov_len};

	rec->len = p->len;
	rec->sport = sport;
	rec->pad = REC_BY_PLACE;
	memcpy(rec->data, &place, sizeof(place));
	memcpy(rec->data + sizeof(place), p->iov[0].iov_base, p->iov[0].iov_len);
}

/* A wrap record at *head, sealed unless it is at first (a run's first record is sealed last, by
 * produce): the rest of the lap is padding, and *head goes on from the ring's start. */
static void put_wrap(struct shm_ring *ring, uint64_t *head, uint64_t first)
{
	rec_at(ring, *head)->len = REC_WRAP;
	if (*head != first)
		seal(ring, *head);
	*head += RING_BYTES - *head % RING_BYTES;
}

/* Room for a record of need bytes at *head (moved past a wrap record if one is needed), or
 * false. */
static bool reserve(struct shm_ring *ring, uint64_t *head, uint64_t tail, uint32_t need,
		    uint64_t first)
{
	uint32_t pad = RING_BYTES - (uint32_t)(*head % RING_BYTES);

	if (pad < need) { /* the record would cross the end: pad to it, start over at 0 */
		if (*head + pad + need - tail > RING_BYTES)
			return false;
		put_wrap(ring, head, first);
	}
	return *head + need - tail <= RING_BYTES;
}

/* An empty ring whose head stands URNIC_SHM_REWIND_AT or more into it goes on from its start: a
 * wrap record at the head (sealed last, with the run it starts). A ping-pong's records then stay
 * on the ring's first pages instead of going through all 4 MiB, where every round trip that
 * crossed into a page not used before in the run took 10-18 us (docs/PERFORMANCE.md). Until the
 * consumer passes the wrap, the producer has only the room before it (the wrap's bytes count as
 * taken), so it rewinds only for a consumer that is awake (not asleep on its socket: its next
 * receive gives the wrap back as soon as it reads it) and before a run of packets pkts[0..n)
 * of at most URNIC_SHM_REWIND_RUN, which leaves room for the largest record. Meanwhile a packet
 * that finds no room is held back or lost as at a full ring. The tail, the consumer's line, is
 * read for it once per URNIC_SHM_REWIND_AT of stream (into r->tail_seen). */
_Static_assert(URNIC_SHM_REWIND_AT - URNIC_SHM_REWIND_RUN >=
		       REC_HDR + REC_ALIGN + URNIC_SHM_PKT_LEN,
	       "after a rewind, the room left must take a packet of any length");

static void rewind_if_empty(struct shm_route *r, struct shm_ring *ring, uint64_t *head,
			    const struct urnic_txpkt *pkts, int n)
{
	uint32_t pos = (uint32_t)(*head % RING_BYTES), run = 0;

	if (pos < URNIC_SHM_REWIND_AT || *head - r->rewind_looked < URNIC_SHM_REWIND_AT ||
	    atomic_load_explicit(&r->inbox->sleeping, memory_order_relaxed))
		return;
	for (int i = 0; i < n && run <= URNIC_SHM_REWIND_RUN; i++)
		run += rec_size(REC_ALIGN - 1, pkts[i].len); /* a record by place is less */
	if (run > URNIC_SHM_REWIND_RUN)
		return;
	r->rewind_looked = *head;
	r->tail_seen = atomic_load_explicit(&ring->tail, memory_order_acquire);
	if (r->tail_seen != *head)
		return;
	put_wrap(ring, head, *head); /* the run's first record: sealed last, with the run */
}

/* Whether one of pkts[0..n) was sent before: its first sending has gone unanswered for a probe's
 * wait or a timer's, and the reader's application, taken for a busy poller, may have stopped
 * polling to wait on memory with its engine thread standing back; a doorbell ends that stand-back
 * (engine.c, sleep_until). */
static bool sent_again(const struct urnic_txpkt *pkts, int n)
{
	for (int i = 0; i < n; i++)
		if (pkts[i].again)
			return true;
	return false;
}

/* Copies the run pkts[0..n) (all to r) into r's ring and publishes it; returns how many fitted.
 * The run's first record is sealed last, so the consumer takes the run whole: an ACK and the
 * WRITE that follows it in one flush, seen apart, let a poll return the ACK's completion while
 * the WRITE waited in the ring for no one (ib_write_lat's application then spins on memory):
 * 25-50 tail-loss probes per 20,000 round trips. */
static int produce(struct urnic_shm *s, struct shm_route *r, struct urnic_net *net,
		   struct urnic_txpkt *pkts, int n)
{
	struct shm_ring *ring;

	pthread_mutex_lock(&r->lock);
	ring = r->ring; /* under the lock: renew_if_dead may replace it */
	uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed), first = head;
	int k = 0;

	rewind_if_empty(r, ring, &head, pkts, n); /* may read the tail again */
	uint64_t tail = r->tail_seen;

	for (; k < n; k++) {
		struct urnic_share_ref ref;
		bool placed = payload_place(ring, &pkts[k], &ref);
		uint32_t pad = placed ? 0 : payload_pad(&pkts[k]);
		uint32_t need = placed ? rec_size(0, place_bytes(&pkts[k]))
				       : rec_size(pad, pkts[k].len);
		uint16_t sport = urnic_net_sport(net, pkts[k].sport_idx);

		if (pkts[k].len > URNIC_SHM_PKT_LEN)
			break;
		if (!reserve(ring, &head, tail, need, first)) {
			tail = r->tail_seen = atomic_load_explicit(&ring->tail, memory_order_acquire);
			if (!reserve(ring, &head, tail, need, first))
				break;
		}
		if (placed)
			place_packet(ring, head, &pkts[k], sport, &ref);
		else
			copy_packet(ring, head, &pkts[k], sport, pad);
		if (head != first)
			seal(ring, head);
		head += need;
	}
	if (head != first) /* k > 0, or a rewind's wrap alone */
		seal(ring, first);
	/* counted before they are published: the answer may come back before this returns */
	count(net, URNIC_C_shm_tx_packets, (uint64_t)k);
	count(net, URNIC_C_shm_ring_full, (uint64_t)(n - k));
	atomic_store_explicit(&ring->head, head, memory_order_relaxed); /* ours alone: a record's
									 * seal publishes it */
	atomic_thread_fence(memory_order_seq_cst); /* the seals before the flag: see the top */
	uint64_t now = k < n ? urnic_mono_ns() : 0;

	if (atomic_load_explicit(&r->inbox->sleeping, memory_order_relaxed) ||
	    sent_again(pkts, k) || (k < n && now - r->nudged_ns > FULL_RING_NUDGE_NS)) {
		send_control(s, r);
		r->nudged_ns = now ? now : r->nudged_ns;
		count(net, URNIC_C_shm_doorbells, 1);
		if (k < n) /* a ring that stays full may have lost its reader for good */
			renew_if_dead(s, r);
	}
	pthread_mutex_unlock(&r->lock);
	return k;
}

/* *dst = *src (dst at or before src), its iovecs into its own hdr and trailer moved along. */
static void move_packet(struct urnic_txpkt *dst, const struct urnic_txpkt *src)
{
	if (dst == src)
		return;
	memmove(dst, src, sizeof(*dst));
	for (int v = 0; v < dst->iovcnt; v++) {
		const uint8_t *base = dst->iov[v].iov_base;

		if (base >= (const uint8_t *)src && base < (const uint8_t *)(src + 1))
			dst->iov[v].iov_base = (uint8_t *)dst + (base - (const uint8_t *)src);
	}
}

int urnic_shm_divert(struct urnic_net *net, struct urnic_txpkt *pkts, int n, bool *held)
{
	struct urnic_shm *s = net->shm;
	int udp = 0;

	for (int i = 0; i < n;) {
		struct shm_route *r = route_of(s, pkts[i].daddr);
		int k = 1;

		while (i + k < n && pkts[i + k].daddr == pkts[i].daddr)
			k++;
		bool ring = r && atomic_load(&r->local);
		int fitted = ring ? produce(s, r, net, pkts + i, k) : 0;

		/* The rest goes by UDP, in order: all of it if no ring is there. What did not fit a
		 * full ring goes only if it is a datagram (UD): a connection's packets split across
		 * two paths would arrive out of order in bulk, so they are held back for their
		 * sender to send again when the ring has room (or lost, as on a full link). */
		for (int j = fitted; j < k; j++) {
			if (!ring || (urnic_op(bth_opcode(pkts[i + j].hdr))->mask & URNIC_M_UD))
				move_packet(&pkts[udp++], &pkts[i + j]);
			else if (held)
				held[pkts[i + j].slot] = true;
		}
		i += k;
	}
	return udp;
}

/* ---- consuming ---- */

/* A producer wrote what no urnic producer writes: its ring is read no more (counted once). */
static void mark_broken(struct urnic_net *net, struct shm_in *in)
{
	if (!atomic_exchange_explicit(&in->broken, true, memory_order_relaxed))
		count(net, URNIC_C_shm_ring_broken, 1);
}

/* The record at stream offset at of a ring with key key, if its seal says it is published. */
static struct shm_rec *sealed_at(struct shm_ring *ring, uint64_t key, uint64_t at)
{
	struct shm_rec *rec = rec_at(ring, at);

	return atomic_load_explicit(&rec->seal, memory_order_acquire) == (at ^ key) ? rec : NULL;
}

/* ---- payloads by place ---- */

/* the fault injector copies each packet it holds back or doubles, and takes only short ones: a
 * packet by place is never one of them */
_Static_assert(URNIC_SHM_REF_MIN > URNIC_RX_BUF_LEN, "a packet by place would be copied");

enum place_outcome {
	PLACE_OK,     /* the packet is out, its payload in a view */
	PLACE_SKIP,   /* the producer's pages cannot be read: the packet is lost (counted) */
	PLACE_BROKEN, /* what no producer of ours writes */
	PLACE_WAIT,   /* no room for it in this receive: it stays for the next */
};

/* Whether the link at path names want. */
static bool link_is(const char *path, const char *want)
{
	char link[80];
	ssize_t n = readlink(path, link, sizeof(link) - 1);

	link[n > 0 ? n : 0] = 0;
	return n > 0 && strcmp(link, want) == 0;
}

/* Maps region serial of the process pid (whose memfds' names carry nonce), its fd fd, into
 * *base and *size, read-write if writable: PLACE_OK; PLACE_SKIP when it is not there (*refused
 * when it cannot be opened at all); PLACE_BROKEN when it is not what a urnic process shares (a
 * sealed memfd on tmpfs of this user, at most URNIC_SHARE_MAX_BYTES). The fd's name is checked
 * before it is opened: an open can block (a FIFO) or have effects (a tty), and a peer names any
 * fd it likes. */
static enum place_outcome map_region(int pid, uint64_t nonce, int32_t fdnum, uint32_t serial,
				     bool writable, uint8_t **base, size_t *size, bool *refused)
{
	char path[64], want[80];
	struct stat st;
	struct statfs fs;
	int fd, seals;

	urnic_share_link(want, sizeof(want), nonce, serial);
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, (int)fdnum);
	errno = 0;
	if (!link_is(path, want)) { /* the fd closed or reused, or not the producer's */
		*refused = errno && errno != ENOENT;
		return PLACE_SKIP;
	}
	fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		*refused = errno != ENOENT;
		return PLACE_SKIP;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (!link_is(path, want)) { /* the same file as the name checked */
		close(fd);
		return PLACE_SKIP;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) != 0 || fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC ||
	    !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size <= 0 ||
	    (uint64_t)st.st_size > URNIC_SHARE_MAX_BYTES || seals < 0 ||
	    !(seals & F_SEAL_SHRINK)) { /* it could shrink under a mapping: a read would fault */
		close(fd);
		return PLACE_BROKEN;
	}
	/* populated, once per view: left to fault in on the copies, 1 MiB ib_write_bw averaged
	 * 24-28 GB/s instead of 41-44 (the first view of a 1 GiB region costs tens of ms here) */
	void *p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
		       MAP_SHARED | MAP_POPULATE, fd, 0);

	close(fd);
	if (p == MAP_FAILED) {
		*refused = true;
		return PLACE_SKIP;
	}
	*base = p;
	*size = (size_t)st.st_size;
	return PLACE_OK;
}

/* Maps the region a place of ring in's producer names into v (map_region). A region not found
 * before any place of this producer's ever was is a refusal: /proc/PID may be another process,
 * in another PID namespace, or none. */
static enum place_outcome open_view(struct shm_view *v, const struct shm_in *in,
				    const struct shm_place *place, bool *refused)
{
	uint8_t *base;
	size_t size;
	enum place_outcome o = map_region(in->pid, in->nonce, place->fd, place->serial, false,
					  &base, &size, refused);

	if (o == PLACE_SKIP && !in->placed_once)
		*refused = true;
	if (o != PLACE_OK)
		return o;
	*v = (struct shm_view){.pid = in->pid, .fd = place->fd, .serial = place->serial,
			       .nonce = in->nonce, .base = base, .size = size};
	return PLACE_OK;
}

static void close_view(struct shm_view *v)
{
	if (v->base)
		munmap((void *)v->base, v->size);
	v->base = NULL;
}

/* The view of the region a place names, mapped now if it was not: an entry not read in this
 * receive makes room, the least recently used. */
static enum place_outcome view_of(struct urnic_shm *s, const struct shm_in *in,
				  const struct shm_place *place, bool *refused, struct shm_view **out)
{
	struct shm_view *spare = NULL;

	for (int i = 0; i < URNIC_SHM_VIEWS; i++) {
		struct shm_view *v = &s->views[i];

		if (v->base && v->pid == in->pid && v->nonce == in->nonce && v->fd == place->fd &&
		    v->serial == place->serial) {
			*out = v;
			return PLACE_OK;
		}
		if (!v->base)
			spare = v;
		else if (v->used_recv != s->recvs &&
			 (!spare || (spare->base && v->used_recv < spare->used_recv)))
			spare = v;
	}
	if (!spare)
		return PLACE_WAIT;
	close_view(spare);
	*out = spare;
	return open_view(spare, in, place, refused);
}

/* Unmaps the views no receive has read through since the last look, VIEW_IDLE_NS or more ago:
 * their regions may be gone (a deregistered MR's memfd lives on while it is mapped here). */
static void drop_idle_views(struct urnic_shm *s, uint64_t now)
{
	if (now - s->views_seen_ns < VIEW_IDLE_NS)
		return;
	for (int i = 0; i < URNIC_SHM_VIEWS; i++)
		if (s->views[i].base && s->views[i].used_recv <= s->views_seen_recv)
			close_view(&s->views[i]);
	pthread_mutex_lock(&s->pins_lock);
	drop_idle_pins(s, now);
	pthread_mutex_unlock(&s->pins_lock);
	s->views_seen_ns = now;
	s->views_seen_recv = s->recvs;
}

/* The packet of a record by place: its headers copied out of the ring (the producer could change
 * them under the checks), its payload where place says, in a view. */
static enum place_outcome take_placed(struct urnic_net *net, struct shm_in *in,
				      const struct shm_rec *rec, uint32_t pos, uint32_t len,
				      struct urnic_rxpkt *out, uint32_t *bytes)
{
	struct urnic_shm *s = net->shm;
	struct shm_place place;
	struct shm_view *v = NULL;
	bool refused = false;

	memcpy(&place, rec->data, sizeof(place));
	if (place.hdr_len < URNIC_BTH_LEN || place.hdr_len > URNIC_MAX_HDR_LEN ||
	    pos + rec_size(0, sizeof(place) + place.hdr_len) > RING_BYTES)
		return PLACE_BROKEN;
	*bytes = rec_size(0, sizeof(place) + place.hdr_len);
	if (s->nplaced == URNIC_SHM_REFS)
		return PLACE_WAIT;
	uint8_t *hdr = s->placed_hdrs[s->nplaced];

	memcpy(hdr, rec->data + sizeof(place), place.hdr_len);
	/* the packet is its headers, the payload, pad and ICRC, nothing else: its checks (recv.c)
	 * then find the payload exactly place.len long */
	if (urnic_op(bth_opcode(hdr))->hdr_len != place.hdr_len ||
	    len != (uint64_t)place.hdr_len + place.len + bth_padcnt(hdr) + URNIC_ICRC_LEN)
		return PLACE_BROKEN;
	enum place_outcome o = view_of(s, in, &place, &refused, &v);

	if (refused && !atomic_exchange_explicit(&in->ring->places_refused, 1,
						 memory_order_relaxed))
		count(net, URNIC_C_shm_place_refused, 1);
	else if (o == PLACE_SKIP && !refused)
		count(net, URNIC_C_shm_place_stale, 1);
	if (o != PLACE_OK)
		return o;
	if (place.off > v->size || place.len > v->size - place.off)
		return PLACE_BROKEN;
	in->placed_once = true;
	v->used_recv = s->recvs;
	s->nplaced++;
	*out = (struct urnic_rxpkt){
		.saddr = in->ring->saddr,
		.daddr = s->addr,
		.sport = rec->sport,
		.local = true,
		.len = len,
		.data = hdr,
		.payload = v->base + place.off,
	};
	count(net, URNIC_C_shm_rx_placed, 1);
	return PLACE_OK;
}

/* The records of one ring, from its tail up to max packets; returns how many. */
static int consume(struct urnic_net *net, struct shm_in *in, struct urnic_rxpkt *out, int max)
{
	struct urnic_shm *s = net->shm;
	struct shm_ring *ring = in->ring;
	uint64_t key = atomic_load_explicit(&in->key, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed), at = tail;
	struct shm_rec *rec;
	int got = 0;
	uint64_t placed_bytes = 0; /* payloads by place count towards the receive's share */

	/* the line after the next record's on its way with it: a request that carries an ACK is
	 * two records, and the second one's line, read after the first, was a second cross-CPU
	 * transfer in a row */
	__builtin_prefetch(ring->data + (at + REC_ALIGN) % RING_BYTES);
	while (!atomic_load_explicit(&in->broken, memory_order_relaxed) && got < max &&
	       at - tail + placed_bytes < URNIC_SHM_RX_BYTES && (rec = sealed_at(ring, key, at))) {
		uint32_t pos = (uint32_t)(at % RING_BYTES);
		uint32_t len = atomic_load_explicit((_Atomic uint32_t *)&rec->len,
						    memory_order_relaxed);
		uint32_t pad = atomic_load_explicit((_Atomic uint16_t *)&rec->pad,
						    memory_order_relaxed);

		if (len == REC_WRAP && pos != 0) {
			bool first = at == tail;

			at += RING_BYTES - pos; /* the rest of the ring is padding */
			if (first) { /* nothing taken before it: it goes back now, and its room */
				tail = at;
				atomic_store_explicit(&ring->tail, tail, memory_order_release);
			}
			continue;
		}
		if (pad == REC_BY_PLACE && len <= URNIC_SHM_PKT_LEN) {
			uint32_t bytes = 0;
			enum place_outcome o =
				take_placed(net, in, rec, pos, len, &out[got], &bytes);

			if (o == PLACE_BROKEN)
				mark_broken(net, in);
			if (o == PLACE_BROKEN || o == PLACE_WAIT)
				break;
			got += o == PLACE_OK;
			placed_bytes += len;
			at += bytes;
			continue;
		}
		/* what no producer of ours writes: a record too long for any packet, padded a line
		 * or more, or across the ring's end, or a wrap at the ring's start (it would skip a
		 * lap) */
		if (len > URNIC_SHM_PKT_LEN || pad >= REC_ALIGN ||
		    pos + rec_size(pad, len) > RING_BYTES) {
			mark_broken(net, in);
			break;
		}
		out[got++] = (struct urnic_rxpkt){
			.saddr = ring->saddr,
			.daddr = s->addr,
			.sport = rec->sport,
			.local = true,
			.len = len,
			.data = rec->data + pad,
		};
		at += rec_size(pad, len);
	}
	in->taken = at - tail;
	return got;
}

int urnic_shm_recv(struct urnic_net *net, struct urnic_rxpkt *out, int max)
{
	struct urnic_shm *s = net->shm;
	int nin = atomic_load_explicit(&s->nin, memory_order_acquire), got = 0;

	s->nplaced = 0; /* the last receive's packets are done with */
	if ((++s->recvs & 4095) == 0)
		drop_idle_views(s, urnic_mono_ns());
	for (int i = 0; i < nin && got < max; i++)
		got += consume(net, &s->in[i], out + got, max - got);
	return got;
}

void urnic_shm_release(struct urnic_net *net)
{
	struct urnic_shm *s = net->shm;
	int nin = atomic_load_explicit(&s->nin, memory_order_acquire);

	for (int i = 0; i < nin; i++) {
		if (!s->in[i].taken)
			continue;
		struct shm_ring *ring = s->in[i].ring;

		/* the one consumer: a store, not a locked add */
		atomic_store_explicit(&ring->tail,
				      atomic_load_explicit(&ring->tail, memory_order_relaxed) +
					      s->in[i].taken,
				      memory_order_release);
		s->in[i].taken = 0;
	}
}

/* The ring a control datagram names, if it is one for us from saddr: mapped, or NULL. */
static struct shm_ring *map_ring(struct urnic_shm *s, const char *name, uint32_t saddr, int *pid)
{
	unsigned long netns;
	unsigned src, dst;
	int end = 0;

	if (sscanf(name, "/urnic-ring-%lu-%8x-%8x-%d%n", &netns, &src, &dst, pid, &end) != 4 ||
	    name[end] != 0 || netns != s->netns || htonl(src) != saddr || htonl(dst) != s->addr)
		return NULL;
	struct shm_ring *ring = map_owned(name, O_RDWR, sizeof(*ring));

	if (ring && (atomic_load_explicit((_Atomic uint64_t *)&ring->magic,
					  memory_order_acquire) != RING_MAGIC ||
		     ring->version != SHM_VERSION || ring->bytes != RING_BYTES ||
		     ring->saddr != saddr || ring->daddr != s->addr)) {
		munmap(ring, sizeof(*ring));
		ring = NULL;
	}
	if (ring)
		touch_pages(ring, false);
	return ring;
}

/* Every entry is taken: one whose producer has died, or -1. */
static int dead_slot(struct urnic_shm *s)
{
	for (int i = 0; i < URNIC_SHM_PEERS; i++)
		if (!pid_alive(atomic_load(&s->in[i].ring)->pid))
			return i;
	return -1;
}

bool urnic_shm_control(struct urnic_net *net, const uint8_t *data, uint32_t len, uint32_t saddr)
{
	struct urnic_shm *s = net->shm;
	const size_t magic_len = sizeof(CONTROL_MAGIC) - 1;
	char name[NAME_LEN];

	if (len <= magic_len || len - magic_len >= NAME_LEN ||
	    memcmp(data, CONTROL_MAGIC, magic_len) != 0)
		return false;
	if (!s)
		return true; /* the path is off here: the peer's packets wait, then go by UDP */
	memcpy(name, data + magic_len, len - magic_len);
	name[len - magic_len] = 0;
	int nin = atomic_load(&s->nin);

	for (int i = 0; i < nin; i++)
		if (strcmp(s->in[i].name, name) == 0)
			return true; /* a doorbell: the engine is awake now */
	int slot = nin < URNIC_SHM_PEERS ? nin : dead_slot(s);
	int pid = 0;
	struct shm_ring *ring = slot >= 0 ? map_ring(s, name, saddr, &pid) : NULL;

	if (!ring)
		return true;
	struct shm_ring *old = slot < nin ? s->in[slot].ring : NULL;

	atomic_store(&s->in[slot].broken, false);
	atomic_store(&s->in[slot].key, ring->key);
	s->in[slot].taken = 0;
	memcpy(s->in[slot].name, name, sizeof(name));
	s->in[slot].pid = pid;
	s->in[slot].nonce = ring->share_nonce;
	s->in[slot].placed_once = false;
	atomic_store(&s->in[slot].ring, ring);
	if (old) { /* the watch may still hold the old pointer: wait until it is out (ns) */
		while (atomic_load(&s->watching))
			;
		munmap(old, sizeof(*old));
	} else {
		atomic_store_explicit(&s->nin, nin + 1, memory_order_release);
	}
	return true;
}

int urnic_shm_rings_in(const struct urnic_net *net)
{
	return net->shm ? atomic_load_explicit(&net->shm->nin, memory_order_acquire) : 0;
}

bool urnic_shm_pending(struct urnic_net *net)
{
	struct urnic_shm *s = net->shm;
	int nin = s ? atomic_load_explicit(&s->nin, memory_order_acquire) : 0;
	bool pending = false;

	if (!nin)
		return false;
	atomic_store(&s->watching, 1); /* before the pointers are read: see urnic_shm_control */
	for (int i = 0; i < nin && !pending; i++) {
		struct shm_ring *ring = atomic_load(&s->in[i].ring);

		pending = !atomic_load_explicit(&s->in[i].broken, memory_order_relaxed) &&
			  sealed_at(ring, atomic_load_explicit(&s->in[i].key, memory_order_relaxed),
				    atomic_load_explicit(&ring->tail, memory_order_relaxed));
	}
	atomic_store(&s->watching, 0);
	return pending;
}

bool urnic_shm_sleep(struct urnic_net *net)
{
	struct urnic_shm *s = net->shm;

	if (!s)
		return false;
	atomic_store_explicit(&s->inbox->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst); /* the flag before the seals: see the top */
	if (urnic_shm_pending(net)) { /* a broken ring's leftovers do not count: it is read no more */
		atomic_store_explicit(&s->inbox->sleeping, 0, memory_order_relaxed);
		return true;
	}
	return false;
}

void urnic_shm_awake(struct urnic_net *net)
{
	if (net->shm)
		atomic_store_explicit(&net->shm->inbox->sleeping, 0, memory_order_relaxed);
}

/* ---- one-sided operations (engine/direct.c) ---- */

/* Not in a fork's child: the inbox it inherited is its parent's, and so is the board. */
struct shm_board *urnic_shm_board(struct urnic_net *net)
{
	return net->shm && net->shm->inbox->pid == getpid() ? &net->shm->inbox->board : NULL;
}

void urnic_shm_live(struct urnic_net *net, bool live)
{
	if (!net->shm)
		return;
	struct shm_inbox *in = net->shm->inbox;

	if (!live) {
		pthread_mutex_unlock(&in->alive);
		return;
	}
	pthread_mutex_lock(&in->alive);
	/* peer_alive reads the lock word as glibc's robust mutex has it: the owner's TID. A libc
	 * whose mutex is laid out otherwise keeps one-sided operations off. */
	if ((uint32_t)atomic_load((_Atomic int32_t *)&in->alive) != (uint32_t)gettid())
		in->direct = 0;
}

/* The lock word of the peer's `alive` (glibc's robust mutex: its first int, the owner's TID, or
 * FUTEX_OWNER_DIED once the kernel found the owner dead): one load. */
static bool peer_alive(const struct shm_inbox *in)
{
	uint32_t word = (uint32_t)atomic_load_explicit((_Atomic int32_t *)&in->alive,
						       memory_order_acquire);

	return (word & FUTEX_TID_MASK) != 0 && !(word & FUTEX_OWNER_DIED);
}

const struct shm_inbox *urnic_shm_peer(struct urnic_net *net, uint32_t daddr)
{
	struct shm_route *r = net->shm && net->shm->inbox->direct ? find_route(net->shm, daddr)
								   : NULL;

	if (!r || !atomic_load(&r->local))
		return NULL;
	pthread_mutex_lock(&r->lock); /* renew_if_dead may replace it */
	const struct shm_inbox *in = r->inbox;

	pthread_mutex_unlock(&r->lock);
	return in->direct && peer_alive(in) ? in : NULL;
}

static struct urnic_shm_pin *find_pin(struct urnic_shm *s, const struct shm_inbox *peer,
				      int32_t fd, uint32_t serial)
{
	for (int i = 0; i < URNIC_SHM_VIEWS; i++) {
		struct urnic_shm_pin *p = &s->pins[i];

		if (p->base && p->pid == peer->pid && p->nonce == peer->share_nonce &&
		    p->fd == fd && p->serial == serial)
			return p;
	}
	return NULL;
}

/* Unmaps the pins no one has held for VIEW_IDLE_NS: their regions may be gone (a memfd lives on
 * while it is mapped). With the idle views, and by a pin a second after the last look; pins_lock
 * held. */
static void drop_idle_pins(struct urnic_shm *s, uint64_t now)
{
	for (int i = 0; i < URNIC_SHM_VIEWS; i++) {
		struct urnic_shm_pin *p = &s->pins[i];

		if (p->base && !p->users && now - p->used_ns >= VIEW_IDLE_NS) {
			munmap(p->base, p->size);
			p->base = NULL;
		}
	}
	s->pins_swept_ns = now;
}

/* A free entry, or the least recently pinned one no one holds; its old mapping goes. */
static struct urnic_shm_pin *spare_pin(struct urnic_shm *s)
{
	struct urnic_shm_pin *spare = NULL;

	for (int i = 0; i < URNIC_SHM_VIEWS; i++) {
		struct urnic_shm_pin *p = &s->pins[i];

		if (p->users)
			continue;
		if (!spare || (spare->base && (!p->base || p->used_ns < spare->used_ns)))
			spare = p;
	}
	if (spare && spare->base) {
		munmap(spare->base, spare->size);
		spare->base = NULL;
	}
	return spare;
}

struct urnic_shm_pin *urnic_shm_pin(struct urnic_net *net, const struct shm_inbox *peer,
				    int32_t fd, uint32_t serial, uint8_t **base, size_t *size)
{
	struct urnic_shm *s = net->shm;
	uint64_t now = urnic_mono_ns();
	bool refused = false;

	struct urnic_shm_pin *p;

	pthread_mutex_lock(&s->pins_lock);
	if (now - s->pins_swept_ns >= VIEW_IDLE_NS)
		drop_idle_pins(s, now);
	p = find_pin(s, peer, fd, serial);
	bool refused_before = s->refused_pid == peer->pid && s->refused_nonce == peer->share_nonce;

	if (!p && !refused_before && (p = spare_pin(s))) {
		*p = (struct urnic_shm_pin){.pid = peer->pid, .nonce = peer->share_nonce,
					    .fd = fd, .serial = serial};
		if (map_region(peer->pid, peer->share_nonce, fd, serial, true, &p->base, &p->size,
			       &refused) != PLACE_OK) {
			p->base = NULL;
			p = NULL;
		}
		if (refused && (errno == EACCES || errno == EPERM)) { /* not EMFILE, ENOMEM */
			s->refused_pid = peer->pid;
			s->refused_nonce = peer->share_nonce;
		}
	}
	if (p) {
		p->users++;
		p->used_ns = now;
		*base = p->base;
		*size = p->size;
	}
	pthread_mutex_unlock(&s->pins_lock);
	return p;
}

void urnic_shm_unpin(struct urnic_net *net, struct urnic_shm_pin *p)
{
	pthread_mutex_lock(&net->shm->pins_lock);
	p->users--;
	pthread_mutex_unlock(&net->shm->pins_lock);
}
