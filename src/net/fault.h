/* fault.h - fault injection on the receive path, for tests: drop, duplicate, reorder, corrupt.
 * Configured by URNIC_FAULT="drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=7" (each a
 * probability per received packet; seed makes a run repeatable). A reordered packet arrives
 * after the next one, or after 1 to depth later ones with depth=N (at most URNIC_FAULT_DEPTH),
 * and at the latest URNIC_FAULT_HOLD_NS after it came: a network reorders, it does not keep a
 * packet until traffic resumes. Up to URNIC_FAULT_HELD packets are held back at once. */
#ifndef URNIC_FAULT_H
#define URNIC_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/net.h"

#define URNIC_FAULT_DUPS 64   /* duplicates one receive batch can get */
#define URNIC_FAULT_HELD 16   /* packets held back at once */
#define URNIC_FAULT_DEPTH 256 /* the most later packets one may be held behind */
#define URNIC_FAULT_HOLD_NS 1000000ull /* the longest a packet is held back */

struct urnic_fault_held {
	struct urnic_rxpkt pkt; /* .data points at buf */
	unsigned wait;		/* later packets still to arrive before this one */
	uint64_t until_ns;	/* CLOCK_MONOTONIC time it arrives at the latest */
	uint8_t buf[URNIC_RX_BUF_LEN];
};

struct urnic_fault {
	bool on;
	double drop, dup, reorder, corrupt;
	unsigned depth; /* a reordered packet waits for 1..depth later ones */
	uint64_t rng;
	unsigned held_mask; /* held[] slots in use */
	_Atomic uint64_t due_ns; /* the earliest until_ns held, UINT64_MAX if none: read unlocked */
	struct urnic_fault_held held[URNIC_FAULT_HELD];
	uint8_t dup_buf[URNIC_FAULT_DUPS][URNIC_RX_BUF_LEN];
	struct urnic_rxpkt in[URNIC_RX_BATCH]; /* the batch as received, while rewriting it */
	uint64_t dropped, duplicated, reordered, corrupted;
};

/* Parses spec (NULL or "" turns injection off). Returns 0 or -EINVAL. */
int urnic_fault_config(struct urnic_fault *f, const char *spec);
/* Rewrites pkts[0..n) in place (capacity max) and returns the new count: also with n == 0,
 * when held packets may have waited their longest. */
int urnic_fault_apply(struct urnic_fault *f, struct urnic_rxpkt *pkts, int n, int max);
/* When a receive must be made at the latest for a held packet to arrive in time (CLOCK_MONOTONIC
 * ns), UINT64_MAX if none is held. Any thread may ask. */
uint64_t urnic_fault_due_ns(const struct urnic_fault *f);

#endif
