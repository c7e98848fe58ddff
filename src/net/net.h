/* net.h - the interface between the engine and whatever carries its packets (UDP today). */
#ifndef URNIC_NET_H
#define URNIC_NET_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/param.h"
#include "wire/wire.h"

#define URNIC_TX_MAX_IOV (URNIC_MAX_SGE + 2)
#define URNIC_RX_BUF_LEN (URNIC_MAX_HDR_LEN + 4096 + 8 + URNIC_ICRC_LEN)
/* the longest packet a shared-memory ring carries (URNIC_SHM_MTU of payload) */
#define URNIC_SHM_PKT_LEN (URNIC_MAX_HDR_LEN + URNIC_SHM_MTU + 8 + URNIC_ICRC_LEN)

/* One outgoing packet: headers in hdr, payload pointing straight into registered memory, pad and
 * ICRC in trailer. The iovecs stay valid until the send call returns. */
struct urnic_txpkt {
	uint32_t daddr; /* network order */
	uint16_t sport_idx;
	uint16_t iovcnt;
	uint32_t len;	/* BTH through ICRC */
	uint16_t ip_id; /* the IPv4 ID the ICRC is computed for: 0, or its place in a GSO send */
	uint16_t slot;	/* its index in the array urnic_net_send was given (the net layer's) */
	/* sent before (a probe or a go-back): a ring's reader may have stopped reading, so the
	 * ring's doorbell rings even if its reader's engine thread is awake (net/shm.c, produce) */
	bool again;
	uint8_t hdr[URNIC_MAX_HDR_LEN];
	uint8_t trailer[8];
	struct iovec iov[URNIC_TX_MAX_IOV];
};

struct urnic_rxpkt {
	uint32_t saddr, daddr; /* network order */
	uint16_t sport;
	uint16_t seg; /* its place in a GRO receive (0: alone, or the first) */
	bool local;   /* came through a shared-memory ring (net/shm.c): no wire, no ICRC */
	uint32_t len;
	uint8_t *data; /* BTH through ICRC; only the headers when payload is set */
	/* a ring packet's payload read in place, in the sender's registered pages (net/shm.c);
	 * NULL: it follows the headers in data */
	const uint8_t *payload;
};

/* What a send or receive call did, for the device's counters. */
struct urnic_net_tally {
	uint64_t syscalls;
	uint64_t gso_sends;	   /* sends that carried more than one packet */
	uint64_t gro_receives;	   /* datagrams that carried more than one packet */
	uint64_t gro_excess;	   /* packets past URNIC_GSO_MAX_SEGS in one datagram: dropped */
	uint64_t shm_packets;	   /* received through a shared-memory ring */
	uint64_t sock_packets;	   /* received by the socket (before any fault injection) */
};

struct urnic_fault;
struct urnic_shm;
struct urnic_stats_file;

struct urnic_net {
	struct urnic_fault *fault; /* NULL unless URNIC_FAULT asks for injection */
	struct urnic_shm *shm;	   /* the intra-host path (net/shm.c); NULL with URNIC_SHM=0 */
	/* the device's stats file (common/stats.h), for the counters the net layer must count
	 * before a packet can be answered: a ring's packet is processed the moment it is published */
	struct urnic_stats_file *stats;
	uint32_t addr; /* network order */
	int rx_fd;
	int tx_fd[URNIC_TX_SOCKETS];
	uint16_t tx_port[URNIC_TX_SOCKETS];
	/* UDP segmentation offload: runs of equal-sized packets to one peer leave in one send; off
	 * with URNIC_GSO=0, where the kernel lacks it, or after a send the route refused */
	bool gso;
	bool gro; /* the receive socket takes coalesced datagrams (UDP_GRO) */
	/* receive ring: URNIC_RX_SLOTS datagrams of URNIC_RX_SLOT_LEN, and the packets in them */
	uint8_t *rx_bufs;
	struct iovec rx_iov[URNIC_RX_SLOTS];
	struct sockaddr_in rx_from[URNIC_RX_SLOTS];
	union {
		struct cmsghdr hdr;
		uint8_t buf[CMSG_SPACE(sizeof(int))];
	} rx_ctl[URNIC_RX_SLOTS];
	struct urnic_rxpkt *rx_pkts; /* URNIC_RX_BATCH, for the progress_lock holder */
	uint64_t sock_polled_ns;     /* the last recvmmsg of a turn (progress_lock holder) */
	uint64_t sock_poll_gap_ns;   /* and the least time to the next (URNIC_SOCK_POLL_NS..) */
	/* the engine thread saw the socket readable, or woke from a sleep on it: the next turn's
	 * receive reads it whatever the gap (set outside progress_lock) */
	atomic_bool sock_due;
};

int urnic_net_open(struct urnic_net *net, uint32_t addr);
void urnic_net_close(struct urnic_net *net);
/* Sends n packets (batched per source socket, and per GSO run). Returns packets handed over (to
 * the kernel or a ring). A packet's ICRC may be moved to the IP ID of its place in a GSO send, and
 * pkts[] is left in no particular order. held, if not NULL, gets held[i] true for each packet i
 * the local path had no room for at this moment (a full ring, a full socket buffer): it is not
 * lost on any wire, and its sender may keep it and send it again (back-pressure); false for the
 * rest, sent or lost. */
int urnic_net_send(struct urnic_net *net, struct urnic_txpkt *pkts, int n,
		   struct urnic_net_tally *t, bool *held);
/* Receives up to URNIC_RX_BATCH packets without blocking, from the socket and the intra-host
 * rings; fills out[]; returns the count. Their data stays valid until urnic_net_recv_done.
 * now: the caller's clock, or 0 to read it. On a device that reads rings the socket's system
 * call is made at most every URNIC_SOCK_POLL_NS, and less often while it finds nothing (up to
 * URNIC_SOCK_POLL_MAX_NS), unless the engine thread has just seen the socket readable
 * (sock_due). */
int urnic_net_recv(struct urnic_net *net, struct urnic_rxpkt *out, struct urnic_net_tally *t,
		   uint64_t now);
void urnic_net_recv_done(struct urnic_net *net);
/* URNIC_FAULT: when a receive is due at the latest for a packet the injector holds back to arrive
 * (CLOCK_MONOTONIC ns); UINT64_MAX without injection or when none is held. */
uint64_t urnic_net_fault_due(const struct urnic_net *net);
uint16_t urnic_net_sport(const struct urnic_net *net, unsigned idx);

#endif
