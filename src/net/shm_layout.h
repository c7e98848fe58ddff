/* shm_layout.h - the intra-host path's shared files as both processes see them: the inbox a
 * device publishes and the ring a producer fills (net/shm.c). A change here is a change of
 * SHM_VERSION: two urnic builds share a ring only if they agree on all of it. */
#ifndef URNIC_SHM_LAYOUT_H
#define URNIC_SHM_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/param.h"

#define INBOX_MAGIC 0x75726e6963696e62ull /* "urnicinb" */
#define RING_MAGIC 0x75726e696372696eull  /* "urnicrin" */
/* 2: packets of up to URNIC_SHM_MTU between ring peers; 3: records published by their seal;
 * 4: a record's packet may start past a pad; 5: payloads by place (struct shm_place); 6: packets
 * of up to 256 KiB (a version-5 peer would take one for a broken ring); 7: the inbox holds the
 * device's board (one-sided WRITE and READ, engine/direct.c) */
#define SHM_VERSION 7
/* a consumer takes a longer packet for a broken ring: a new size needs a new version */
_Static_assert(URNIC_SHM_MTU == (256u << 10), "a new URNIC_SHM_MTU needs a new SHM_VERSION");
#define RING_BYTES (4u << 20)
#define REC_ALIGN 64u
#define REC_WRAP 0xffffffffu /* the rest of the ring is padding: go on at its start */
#define CONTROL_MAGIC "URNICSHM"
#define NAME_LEN 80
#define REC_HDR 16u

/* A board's MR slot: an MR whose pages are shared (mem/share.h) and that grants remote access,
 * as its ring peers' one-sided WRITEs and READs check it (net/board.c). Published by its key,
 * stored last; taken back by BOARD_GONE in key, after which the owner waits until no peer is
 * busy copying through it. */
struct board_mr {
	_Atomic uint32_t key;	   /* 0: never used; BOARD_GONE: free again */
	_Atomic uint32_t busy;	   /* peers copying through it now */
	_Atomic uint32_t pd;	   /* its PD's id (struct urnic_pd), unique in the owner */
	_Atomic uint32_t access;   /* IBV_ACCESS_* */
	_Atomic uint64_t iova;	   /* the first byte the key reaches ... */
	_Atomic uint64_t length;   /* ... and how many */
	_Atomic uint64_t off;	   /* iova's byte in the region's memfd */
	_Atomic uint32_t serial;   /* the region: its memfd is the owner's fd fd, named */
	_Atomic int32_t fd;	   /* URNIC_SHARE_NAME with the inbox's share_nonce and serial */
	uint8_t reserved[8];
};
#define BOARD_GONE 0xffffffffu /* never a key (mem/mr.c) */
#define BOARD_MRS 2048u	      /* slots, a power of two; at most half of them in use */

/* A board's QP slot, at QPN modulo URNIC_MAX_QP (one live QP each, as in the QP table): what
 * a requester checks before it writes or reads the owner's memory as the QP's peer. Written
 * under a sequence count: odd while it changes. A requester holds it (busy) for its copy; the
 * owner that takes the QP out of RTR and RTS waits until no one does. */
struct board_qp {
	_Atomic uint32_t seq;
	_Atomic uint32_t busy;
	_Atomic uint32_t qpn;
	_Atomic uint32_t state;	   /* enum ibv_qp_state; RESET once destroyed */
	_Atomic uint32_t pd;
	_Atomic uint32_t access;   /* the QP's IBV_ACCESS_REMOTE_* */
	_Atomic uint32_t dest_qpn; /* its peer: QP dest_qpn at peer_addr */
	_Atomic uint32_t peer_addr;
};

struct shm_board {
	struct board_mr mrs[BOARD_MRS];
	struct board_qp qps[URNIC_MAX_QP];
};

struct shm_inbox {
	uint64_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t addr;
	/* one-sided operations into this device are allowed (URNIC_SHM_DIRECT is not 0 here) */
	uint32_t direct;
	uint64_t share_nonce; /* in the owner's memfds' names (mem/share.h) */
	_Alignas(64) _Atomic uint32_t sleeping; /* the owner's engine sleeps on its socket */
	/* held by the owner's engine thread from its start to its end: a robust, process-shared
	 * mutex, whose lock word the kernel marks FUTEX_OWNER_DIED when the thread dies with it, so
	 * a peer learns that the owner lives from one load, no system call (engine/direct.c) */
	_Alignas(64) pthread_mutex_t alive;
	/* peers write its busy counts: they map the inbox read-write */
	_Alignas(64) struct shm_board board;
};

/* One packet in a ring, at a REC_ALIGN-aligned offset. A record is published by its seal,
 * stored last: its place in the ring's stream of bytes (the head before it) XOR the ring's key.
 * The consumer looks at the seal where its next record goes, so a new record costs it one
 * cross-CPU transfer, the record's own line; a seal left from an earlier lap names another
 * place, and stale payload bytes match the random key by chance only. */
struct shm_rec {
	_Atomic uint64_t seal;
	uint32_t len; /* BTH through ICRC; REC_WRAP: padding to the ring's end */
	uint16_t sport;
	/* the packet starts at data + pad (less than REC_ALIGN): a large packet's payload is put at
	 * a REC_ALIGN boundary, so the consumer's copy into the MR goes line to line */
	uint16_t pad;
	uint8_t data[];
};

/* A record's pad of REC_BY_PLACE: its packet's payload is not in the ring but in the producer's
 * shared pages (mem/share.h), and the record holds a struct shm_place, then the packet's headers
 * (no pad bytes, no ICRC: a ring packet has no use for them). len stays the whole packet's. */
#define REC_BY_PLACE 0xffffu

/* Where a payload by place is: len bytes at off in the producer's memfd, open as its fd fd,
 * named URNIC_SHARE_NAME, the ring's share_nonce and serial (the consumer checks the name: an
 * fd number is reused, a serial is not, and the nonce says whose it is). */
struct shm_place {
	uint64_t off;
	uint32_t serial;
	int32_t fd;
	uint32_t len;
	uint16_t hdr_len;
	uint16_t reserved;
};

struct shm_ring {
	uint64_t magic;
	uint32_t version, bytes;
	uint32_t saddr, daddr; /* network order */
	int32_t pid;
	uint64_t key; /* the seals' (struct shm_rec), chosen by the producer, never 0 */
	uint64_t share_nonce; /* in the producer's memfds' names (mem/share.h) */
	/* the consumer cannot map the producer's pages (written once, by the consumer): payloads go
	 * in the ring. On the header's read-mostly line: the producer reads it for every large
	 * packet, and the tail's line changes with every batch. */
	_Atomic uint32_t places_refused;
	_Alignas(64) _Atomic uint64_t head; /* bytes filled, ever (producer) */
	_Alignas(64) _Atomic uint64_t tail; /* bytes given back, ever (consumer) */
	_Alignas(64) uint8_t data[RING_BYTES];
};

#endif
