/* fault.h - fault injection on the receive path, for tests: drop, duplicate, reorder, corrupt.
 * Configured by URNIC_FAULT="drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=7" (each a
 * probability per received packet; seed makes a run repeatable). */
#ifndef URNIC_FAULT_H
#define URNIC_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "net/net.h"

#define URNIC_FAULT_DUPS 64 /* duplicates one receive batch can get */

struct urnic_fault {
	bool on;
	double drop, dup, reorder, corrupt;
	uint64_t rng;
	bool held; /* a packet kept back to be delivered after the next one */
	struct urnic_rxpkt held_pkt;
	uint8_t held_buf[URNIC_RX_BUF_LEN];
	uint8_t dup_buf[URNIC_FAULT_DUPS][URNIC_RX_BUF_LEN];
	struct urnic_rxpkt in[URNIC_RX_BATCH]; /* the batch as received, while rewriting it */
	uint64_t dropped, duplicated, reordered, corrupted;
};

/* Parses spec (NULL or "" turns injection off). Returns 0 or -EINVAL. */
int urnic_fault_config(struct urnic_fault *f, const char *spec);
/* Rewrites pkts[0..n) in place (capacity max) and returns the new count. */
int urnic_fault_apply(struct urnic_fault *f, struct urnic_rxpkt *pkts, int n, int max);

#endif
