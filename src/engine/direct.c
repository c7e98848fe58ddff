/* direct.c - one-sided RDMA WRITE, READ and atomics between ring peers: no packet, and no CPU of
 * the responder's.
 *
 * When both ends of an RC QP are urnic processes of one host (the rings, net/shm.c) and the
 * responder's MR lives in shared pages (mem/share.h), the requester's thread can reach that MR
 * itself. Each device publishes a board in its inbox (net/board.h): its MRs that grant remote
 * access over shared pages (key, PD, access, bounds, where the pages are) and its RC QPs (state,
 * PD, access flags, peer). A WRITE, READ or atomic posted on a QP with nothing else outstanding is
 * checked here as the responder would check its packet - the responder QP connected to this one
 * and able to receive, remote access on QP and MR, the MR's PD the QP's, the range inside the MR -
 * and then copied straight between the two MRs (an atomic made on the responder's pages), once,
 * and completed. Any check that fails, and anything else (a QP with requests in flight, an MR of
 * private pages, WRITE with immediate), goes by packets as before, and the responder answers it
 * with the NAK and status the wire would get.
 *
 * Order: only a WQE with every earlier one acknowledged goes this way, so the responder has
 * taken every earlier request; a later one is posted after this copy has ended. A WRITE's last
 * byte is stored last, after a fence, so an application that waits on it (ib_write_lat) sees the
 * rest. Deregistration, and a QP's move out of RTR and RTS, wait for copies in progress through
 * the MR or for the QP (board.c). */
#include <string.h>

#include "common/dma.h"
#include "engine/direct.h"
#include "engine/engine.h"
#include "mem/mr.h"
#include "mem/share.h"
#include "net/board.h"
#include "net/shm.h"

#define REMOTE_ACCESS                                                                              \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* Whether w may go this way: an RC WRITE, READ or atomic between ring peers, on a QP with nothing
 * outstanding (w the only WQE, not begun, every PSN sent acknowledged). */
static bool eligible(const struct urnic_qp *qp, const struct urnic_swqe *w)
{
	return qp->ibv.qp_type == IBV_QPT_RC && qp->ibv.state == IBV_QPS_RTS &&
	       (w->opcode == IBV_WR_RDMA_WRITE || wqe_is_rd_atomic(w)) && w->length > 0 &&
	       qp->mtu == URNIC_SHM_MTU && qp->sq_prod - qp->sq_cons == 1 &&
	       qp->sq_next == qp->sq_cons && qp->snd_una == qp->snd_max &&
	       qp->rd_outstanding == 0 && !qp->rnr_deadline && !qp->tx_held;
}

/* The responder QP's checks: it is the peer of qp, can receive, and allows the access. */
static bool responder_accepts(const struct urnic_qp *qp, const struct urnic_board_qp *r,
			      unsigned need)
{
	return urnic_state_takes_requests(r->state) && r->dest_qpn == qp->ibv.qp_num &&
	       r->peer_addr == qp->dev->addr && (r->access & need) == need;
}

/* The MR's checks, as urnic_mr_find makes them on the responder's side. */
static bool mr_grants(const struct urnic_board_mr *m, const struct urnic_board_qp *r,
		      unsigned need, uint64_t va, uint64_t len)
{
	return m->pd == r->pd && (m->access & need) == need && va >= m->iova &&
	       len <= m->length && va - m->iova <= m->length - len;
}

/* The local side of the copy: w's SGEs (or inline bytes) as iovecs, checked as the requester
 * checks them (a READ's sink needs local write). Returns the count, or -1. */
static int local_pieces(struct urnic_qp *qp, struct urnic_swqe *w, struct iovec *iov)
{
	struct urnic_pd *pd = to_upd(qp->ibv.pd);

	if (w->is_inline) {
		iov[0] = (struct iovec){.iov_base = w->inline_buf, .iov_len = w->length};
		return 1;
	}
	if (wqe_is_rd_atomic(w)) /* a READ's or an atomic's sink */
		return urnic_sge_writable_iov(qp->dev, pd, w->sge, w->num_sge, w->length, iov,
					      URNIC_MAX_SGE);
	return urnic_sge_to_iov(qp->dev, pd, w->sge, w->num_sge, 0, w->length, iov,
				URNIC_MAX_SGE);
}

/* One copy through the caches. glibc's memcpy streams a copy this long past them (non-temporal
 * stores above its threshold, a fraction of the cache), and the next operation's bytes then come
 * from memory: 1 MiB ib_read_bw 46.9-47.1 GB/s with memcpy, 54.4-54.9 with `rep movsb`
 * (pinned, alternating, 2026-12-08); WRITE 54.0-54.7 -> 54.9-55.1, 8 MiB READ +5-7%, WRITE
 * +3-20%, 64 KiB and 4 KiB the same or better. */
static void copy_bytes(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	memcpy(dst, src, n);
#endif
}

/* WRITE: the pieces into remote, the last byte last (see the top). */
static void put(uint8_t *remote, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++) {
		size_t len = iov[i].iov_len;
		bool last = i == n - 1;

		copy_bytes(remote, iov[i].iov_base, last ? len - 1 : len);
		if (last) {
			atomic_thread_fence(memory_order_seq_cst); /* orders streaming stores too */
			remote[len - 1] = ((const uint8_t *)iov[i].iov_base)[len - 1];
		}
		remote += len;
	}
}

static void get(const uint8_t *remote, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++) {
		copy_bytes(iov[i].iov_base, remote, iov[i].iov_len);
		remote += iov[i].iov_len;
	}
}

/* An atomic, with the instruction the responder's engine uses on the same pages (responder.c):
 * atomic with respect to it and to every other requester, and made once. Its original value
 * goes to the sink. */
static void atomic(uint8_t *remote, const struct urnic_swqe *w, const struct iovec *iov, int n)
{
	uint64_t *target = (uint64_t *)(void *)remote, orig = w->compare_add;

	if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		orig = __atomic_fetch_add(target, w->compare_add, __ATOMIC_SEQ_CST);
	else
		__atomic_compare_exchange_n(target, &orig, w->swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	get((const uint8_t *)&orig, iov, n);
}

/* Copies w between its local pieces and the responder's bytes at `at` in the region mapped at
 * base (size bytes); false if they are not inside it. */
static bool copy(struct urnic_swqe *w, uint8_t *base, size_t size, uint64_t at,
		 const struct iovec *iov, int n)
{
	if (at > size || w->length > size - at ||
	    (wqe_is_atomic(w) && (uintptr_t)(base + at) % 8 != 0))
		return false;
	URNIC_DMA_BEGIN();
	if (w->opcode == IBV_WR_RDMA_WRITE)
		put(base + at, iov, n);
	else if (w->opcode == IBV_WR_RDMA_READ)
		get(base + at, iov, n);
	else
		atomic(base + at, w, iov, n);
	URNIC_DMA_END();
	return true;
}

static bool same_place(const struct urnic_board_mr *a, const struct urnic_board_mr *b)
{
	return a->pd == b->pd && a->access == b->access && a->iova == b->iova &&
	       a->length == b->length && a->off == b->off && a->serial == b->serial &&
	       a->fd == b->fd;
}

/* Holds the responder QP's slot and the MR's, checks that neither changed since they were read
 * (r, m), and copies; false if they changed. The owner does not take the QP out of RTR or RTS
 * (to ERR, or destroyed) nor deregister the MR before the copy has ended. */
static bool copy_held(struct urnic_qp *qp, struct urnic_swqe *w, struct shm_board *board,
		      const struct urnic_board_qp *r, struct board_mr *mslot,
		      const struct urnic_board_mr *m, uint8_t *base, size_t size,
		      const struct iovec *iov, int n)
{
	struct urnic_board_qp r_now;
	struct urnic_board_mr m_now;
	struct board_qp *qslot = urnic_board_qp_hold(board, qp->attr.dest_qp_num, &r_now);
	bool done = false;

	if (!qslot)
		return false;
	if (memcmp(&r_now, r, sizeof(r_now)) == 0 && urnic_board_mr_hold(mslot, w->rkey, &m_now)) {
		done = same_place(&m_now, m) &&
		       copy(w, base, size, m->off + (w->raddr - m->iova), iov, n);
		urnic_board_mr_release(mslot);
	}
	urnic_board_qp_release(qslot);
	return done;
}

/* The responder's checks, on its board as read now; the region mapped; then the copy, with
 * both slots held for it alone (a deregistration or an error waits for no system call of
 * ours). Local keys are checked under mr_lock (the caller's): a deregistration here (mr_lock
 * held to write) may wait for a peer's copy through this device's board, so a copy never waits
 * for mr_lock while it holds a peer's slot. */
static bool run(struct urnic_qp *qp, struct urnic_swqe *w, const struct shm_inbox *peer,
		unsigned need)
{
	struct shm_board *board = (struct shm_board *)&peer->board;
	struct urnic_board_qp r;
	struct urnic_board_mr m;
	struct board_mr *mslot;
	struct iovec iov[URNIC_MAX_SGE];
	uint8_t *base;
	size_t size;
	int n;

	if (wqe_is_atomic(w) && (w->raddr & 7))
		return false; /* the responder's invalid request NAK */
	if (!urnic_board_qp_read(board, qp->attr.dest_qp_num, &r) ||
	    !responder_accepts(qp, &r, need) || !(mslot = urnic_board_mr_peek(board, w->rkey, &m)) ||
	    !mr_grants(&m, &r, need, w->raddr, w->length) || (n = local_pieces(qp, w, iov)) <= 0)
		return false;
	struct urnic_shm_pin *pin = urnic_shm_pin(&qp->dev->net, peer, m.fd, m.serial, &base,
						  &size);

	if (!pin)
		return false;
	bool done = copy_held(qp, w, board, &r, mslot, &m, base, size, iov, n);

	urnic_shm_unpin(&qp->dev->net, pin);
	return done;
}

static unsigned access_needed(const struct urnic_swqe *w)
{
	if (w->opcode == IBV_WR_RDMA_WRITE)
		return IBV_ACCESS_REMOTE_WRITE;
	return w->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_ATOMIC;
}

static enum urnic_counter counter_of(const struct urnic_swqe *w)
{
	if (w->opcode == IBV_WR_RDMA_WRITE)
		return URNIC_C_direct_writes;
	return w->opcode == IBV_WR_RDMA_READ ? URNIC_C_direct_reads : URNIC_C_direct_atomics;
}

bool urnic_direct_run(struct urnic_qp *qp, struct urnic_swqe *w)
{
	const struct shm_inbox *peer;

	if (!eligible(qp, w) || !(peer = urnic_shm_peer(&qp->dev->net, qp->peer_addr)))
		return false;
	unsigned need = access_needed(w);

	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	bool done = run(qp, w, peer, need);

	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (!done)
		return false;
	urnic_qp_count(qp, counter_of(w), 1);
	urnic_qp_count(qp, URNIC_C_direct_bytes, w->length);
	urnic_complete_send(qp, w, IBV_WC_SUCCESS);
	qp->sq_next++;
	qp->sq_cons++;
	return true;
}

void urnic_direct_publish_qp(struct urnic_qp *qp, bool destroyed)
{
	struct shm_board *b = urnic_shm_board(&qp->dev->net);

	if (!b || qp->ibv.qp_type != IBV_QPT_RC)
		return;
	struct urnic_board_qp q = {
		.qpn = qp->ibv.qp_num,
		.state = destroyed ? IBV_QPS_RESET : qp->ibv.state,
		.pd = to_upd(qp->ibv.pd)->id,
		.access = qp->attr.qp_access_flags & REMOTE_ACCESS,
		.dest_qpn = qp->attr.dest_qp_num,
		.peer_addr = qp->peer_addr,
	};

	urnic_board_qp_publish(b, &q, !urnic_state_takes_requests(q.state));
}

void urnic_direct_publish_mr(struct urnic_dev *dev, struct urnic_mr *mr)
{
	struct shm_board *b = urnic_shm_board(&dev->net);
	struct urnic_share_ref ref;

	mr->board_slot = 0;
	if (!b || !mr->share || !(mr->access & REMOTE_ACCESS) || mr->length == 0 ||
	    !urnic_share_find(mr->addr, mr->length, &ref))
		return;
	struct urnic_board_mr m = {.pd = mr->pd->id,
				   .access = mr->access,
				   .iova = mr->iova,
				   .length = mr->length,
				   .off = ref.off,
				   .serial = ref.serial,
				   .fd = ref.fd};

	mr->board_slot = urnic_board_mr_add(b, mr->key, &m);
}

void urnic_direct_withdraw_mr(struct urnic_dev *dev, struct urnic_mr *mr)
{
	struct shm_board *b = urnic_shm_board(&dev->net);

	if (b && mr->board_slot)
		urnic_board_mr_remove(b, mr->board_slot);
	mr->board_slot = 0;
}
