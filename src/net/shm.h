/* shm.h - the intra-host path: packets between urnic processes of one host (and one network
 * namespace) through shared-memory rings instead of UDP sockets. See shm.c. */
#ifndef URNIC_SHM_H
#define URNIC_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "net/net.h"

/* Publishes this device's inbox unless URNIC_SHM=0; without it (or on failure) the device keeps
 * to UDP, and so do peers sending to it. Returns 0 (failure to publish is not an error). */
int urnic_shm_open(struct urnic_net *net);
void urnic_shm_close(struct urnic_net *net);

/* Whether packets to daddr go through a ring: a urnic device of this user listens there (its
 * inbox is found now, if it was not before). */
bool urnic_shm_reaches(struct urnic_net *net, uint32_t daddr);

/* Sends the packets of pkts[0..n) bound for a urnic peer of this host through its ring (in
 * order), moves the others, in order, to the front of pkts, and returns how many those are: the
 * UDP path's share. A connection's packet that finds the ring full is marked in held (by its
 * slot; see urnic_net_send), or lost, as on a full link, where held is NULL. */
int urnic_shm_divert(struct urnic_net *net, struct urnic_txpkt *pkts, int n, bool *held);

/* Where the ring to daddr has been filled up to, in its stream of bytes: a mark behind every
 * packet sent to daddr so far (0: daddr is not reached through a ring). */
uint64_t urnic_shm_mark(struct urnic_net *net, uint32_t daddr);
/* Whether the ring to daddr holds records before mark that its reader, alive, has not taken
 * yet: a packet sent before the mark may be waiting there, not lost. False once the reader has
 * taken them, once its process is found dead, or where the ring's head is behind the mark (a
 * ring made since, for a new reader). Rings the reader's doorbell, at most every
 * URNIC_PROBE_MIN_NS (now: ns, for that). */
bool urnic_shm_behind(struct urnic_net *net, uint32_t daddr, uint64_t mark, uint64_t now);

/* ---- one-sided operations (engine/direct.c) ---- */
struct shm_board;
struct shm_inbox;
struct urnic_shm_pin;

/* This device's board, where its MRs and QPs are published for its ring peers (net/board.h);
 * NULL without the intra-host path. */
struct shm_board *urnic_shm_board(struct urnic_net *net);
/* Called by the device's engine thread as it starts (live) and ends: while it runs, peers find
 * this device alive (urnic_shm_peer); a process that dies ends it. */
void urnic_shm_live(struct urnic_net *net, bool live);
/* The inbox (and board) of the device at daddr, if it is a ring peer, its engine thread alive,
 * and both ends allow one-sided operations (URNIC_SHM_DIRECT); NULL otherwise. It stays mapped
 * across a renewal of the route for longer than any operation. */
const struct shm_inbox *urnic_shm_peer(struct urnic_net *net, uint32_t daddr);
/* Maps the peer's region serial, its fd fd (named by a board's MR slot), read-write, and holds it
 * mapped until urnic_shm_unpin: *base and *size. NULL if it cannot be (the fd closed or reused,
 * or not a urnic region of the peer's, or the peer's /proc/PID/fd out of reach). */
struct urnic_shm_pin *urnic_shm_pin(struct urnic_net *net, const struct shm_inbox *peer,
				    int32_t fd, uint32_t serial, uint8_t **base, size_t *size);
void urnic_shm_unpin(struct urnic_net *net, struct urnic_shm_pin *pin);

/* Up to max packets from the inbound rings into out[] (data points into the rings until
 * urnic_shm_release). Returns the count. */
int urnic_shm_recv(struct urnic_net *net, struct urnic_rxpkt *out, int max);
/* Gives the slots of the last urnic_shm_recv back to their producers. */
void urnic_shm_release(struct urnic_net *net);

/* A datagram that is urnic's own control message (a new ring to map, or a doorbell), not a
 * packet: handled and true, or false. */
bool urnic_shm_control(struct urnic_net *net, const uint8_t *data, uint32_t len, uint32_t saddr);

/* Before the engine sleeps on its socket: tells producers to ring the doorbell. True if a ring
 * already holds packets (then it must not sleep). urnic_shm_awake undoes it. */
bool urnic_shm_sleep(struct urnic_net *net);
/* How many peers' rings this device reads. */
int urnic_shm_rings_in(const struct urnic_net *net);
/* Whether a ring holds packets not yet taken: a few loads, no system call. */
bool urnic_shm_pending(struct urnic_net *net);
void urnic_shm_awake(struct urnic_net *net);

#endif
