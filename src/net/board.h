/* board.h - a device's board: the MRs and QPs its ring peers check before a one-sided WRITE or
 * READ into its memory (engine/direct.c), published in its inbox (net/shm_layout.h). The owner
 * writes it; peers only read it, but for the busy counts they hold while they copy. */
#ifndef URNIC_BOARD_H
#define URNIC_BOARD_H

#include <stdbool.h>
#include <stdint.h>

#include "net/shm_layout.h"

/* An MR slot's facts, as a peer reads them. */
struct urnic_board_mr {
	uint32_t pd, access;
	uint64_t iova, length;
	uint64_t off; /* iova's byte in the region's memfd */
	uint32_t serial;
	int32_t fd;
};

/* A QP slot's facts. */
struct urnic_board_qp {
	uint32_t qpn, state, pd, access, dest_qpn, peer_addr;
};

/* The owner's side (under the device's mr_lock, or the QP's lock). */

/* Publishes MR key; returns its slot + 1, or 0 when the board has no room (the MR is then
 * reached by packets only). */
int urnic_board_mr_add(struct shm_board *b, uint32_t key, const struct urnic_board_mr *m);
/* Takes slot + 1 back: once this returns no peer copies through it, but one that never comes
 * back (stopped, or dead, within its copy) is waited for BOARD_WAIT_NS at most (its slot is
 * then not used again while it stays busy). */
void urnic_board_mr_remove(struct shm_board *b, int slot1);
/* Publishes q; with drain (the QP leaves the states a copy may reach it in), returns once no
 * peer copies for it, or after BOARD_WAIT_NS. */
void urnic_board_qp_publish(struct shm_board *b, const struct urnic_board_qp *q, bool drain);

/* A peer's side. */

/* Finds key's slot and reads its facts, without holding it (they may change at once): NULL if
 * key is not on the board. */
struct board_mr *urnic_board_mr_peek(struct shm_board *b, uint32_t key,
				     struct urnic_board_mr *out);
/* Holds slot, found for key: its facts stay as *out says until urnic_board_mr_release. False
 * if the key is no longer there. */
bool urnic_board_mr_hold(struct board_mr *slot, uint32_t key, struct urnic_board_mr *out);
void urnic_board_mr_release(struct board_mr *slot);
/* QP qpn's facts as of one moment, without holding its slot; false if the slot holds another
 * QP, or changes now. */
bool urnic_board_qp_read(const struct shm_board *b, uint32_t qpn, struct urnic_board_qp *out);
/* Holds QP qpn's slot and reads its facts as of one moment: its owner does not take it out of
 * RTR and RTS until urnic_board_qp_release. NULL if the slot holds another QP. */
struct board_qp *urnic_board_qp_hold(struct shm_board *b, uint32_t qpn,
				     struct urnic_board_qp *out);
void urnic_board_qp_release(struct board_qp *slot);

#endif
