/* direct.h - one-sided RDMA WRITE and READ between ring peers (direct.c). */
#ifndef URNIC_DIRECT_H
#define URNIC_DIRECT_H

#include <stdbool.h>

#include "urnic.h"

/* Runs WQE w, just posted on qp (lock held), as a one-sided operation when it can: the caller's
 * thread copies between its MR and the responder's registered pages, after the responder's own
 * checks read off its board, and completes w. True if it did; false leaves w to the packets
 * (and to whatever error the responder then answers). */
bool urnic_direct_run(struct urnic_qp *qp, struct urnic_swqe *w);

/* Publishes what a peer checks of qp (an RC QP's state, PD, access and peer) on its device's
 * board; QP lock held. */
void urnic_direct_publish_qp(struct urnic_qp *qp, bool destroyed);
/* Publishes MR mr on its device's board if its pages are shared and it grants remote access
 * (mr_lock held for writing), and takes it back. */
void urnic_direct_publish_mr(struct urnic_dev *dev, struct urnic_mr *mr);
void urnic_direct_withdraw_mr(struct urnic_dev *dev, struct urnic_mr *mr);

#endif
