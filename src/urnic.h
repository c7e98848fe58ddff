/* urnic.h - the objects of a urnic device (device, context, PD, MR, CQ, QP) shared by the verbs
 * layer, the engine and memory management. */
#ifndef URNIC_H
#define URNIC_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/param.h"
#include "common/stats.h"
#include "engine/rq.h"
#include "net/net.h"

#define URNIC_EXPORT __attribute__((visibility("default")))
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---------------- device: one running NIC per configured address in this process ---------- */

struct urnic_ibdev {
	struct ibv_device ibdev; /* what ibv_get_device_list hands out */
	struct urnic_dev_config cfg;
	int index;
	uint64_t guid;
};

struct urnic_qp;
struct urnic_mr;

struct urnic_dev {
	struct urnic_ibdev *ibdev;
	int refcnt; /* contexts open on it; protected by the global device lock */
	uint32_t addr; /* network order */
	union ibv_gid gid;
	int active_mtu; /* enum ibv_mtu */
	struct urnic_net net;

	/* QPN -> QP; a slot holds a QP from create to destroy */
	pthread_mutex_t qp_lock;
	struct urnic_qp **qp_table; /* indexed by QPN modulo URNIC_MAX_QP */
	uint16_t qp_gen[URNIC_MAX_QP];
	struct urnic_qp **qps; /* the live QPs, densely, for the engine's timer and TX scans */
	int nqp;

	/* key -> MR; writers (reg/dereg) take it exclusively, every access to MR memory shares it */
	pthread_rwlock_t mr_lock;
	struct urnic_mr **mr_buckets;
	int nmr;

	/* live objects of each kind, held to what ibv_query_device advertises */
	atomic_int ncq, npd, nah, nsrq;

	/* engine */
	pthread_t thread;
	int wake_fd;           /* eventfd: wakes the engine from poll() */
	atomic_bool stop;
	/* deadline the engine sleeps to; UINT64_MAX: none; 0: awake, standing back, or woken */
	_Atomic uint64_t sleep_until_ns;
	_Atomic uint64_t timer_next;     /* no QP timer expires before this */
	pthread_mutex_t progress_lock; /* whoever runs the engine (thread or polling app) */
	_Atomic uint64_t app_poll_ns;   /* last time an application thread drove progress */
	atomic_bool standing_back;      /* engine asleep, leaving the socket to a polling app */
	atomic_bool on_socket;          /* engine asleep on the socket: a packet would wake it */
	/* SCHED_FIFO for the engine thread while it listens for an application that does not poll
	 * (engine.c, engine_rt): rt_ok if URNIC_ENGINE_RT=1 asked for it and it was allowed; rt_now
	 * what it is set to, changed under rt_lock by the engine thread and by an application
	 * thread as its poll sends the engine thread to stand back or as it leaves after a drain */
	bool rt_ok;
	atomic_bool rt_now;
	pthread_mutex_t rt_lock;
	_Atomic uint64_t drained_ns;    /* an app poll emptied a CQ then, and none has come since */
	atomic_uint quick_returns;      /* quick returns after drains less slow ones, 0..MAX */
	_Atomic uint64_t app_polled_ns;  /* the same, but never cleared: see watch() */
	unsigned standbacks;      /* engine thread only: stand-backs in a row (each one longer) */
	_Atomic uint64_t sock_rx_ns; /* a turn last took packets from the socket (not rings) */
	/* a peer's RDMA WRITE (no immediate) or atomic last landed here: no completion tells the
	 * application, which may wait on memory for it (engine.c, stand_back_max) */
	_Atomic uint64_t landed_ns;
	bool sock_woke;           /* engine thread only: the socket ended its last stand-back */
	/* progress_lock holder only */
	bool tx_pending;          /* some QP has READ responses to send */
	int scan_from; /* where the next scan of qps starts: each QP goes first in turn */
	/* when QPs with packets held back try again (all at once) */
	_Atomic uint64_t held_retry_ns;
	struct urnic_qp *ack_list; /* QPs owing an ACK after this receive batch (qp_lock) */
	atomic_bool acks_owed;     /* an application turn left ack_list for the next turn */

	/* stats */
	struct urnic_stats_file *stats;
	char stats_path[96];
};

int urnic_dev_get(struct urnic_ibdev *ibdev, struct urnic_dev **out);
void urnic_dev_put(struct urnic_dev *dev);
struct urnic_ibdev *urnic_ibdev_of(struct ibv_device *device);

/* Takes one of max objects counted by n. When all are taken: false, errno ENOMEM, as siw
 * (num_qp > SIW_MAX_QP) and mlx5 (firmware LIM_ERR) report it; rxe's pools say EINVAL. */
static inline bool urnic_take(atomic_int *n, int max)
{
	if (atomic_fetch_add(n, 1) < max)
		return true;
	atomic_fetch_sub(n, 1);
	errno = ENOMEM;
	return false;
}

static inline void urnic_give(atomic_int *n)
{
	atomic_fetch_sub(n, 1);
}

/* RoCEv2 over IPv4: a GID is the IPv4-mapped IPv6 address ::ffff:a.b.c.d (addr in network
 * order). */
static const uint8_t urnic_v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static inline void urnic_gid_from_ipv4(uint32_t addr, union ibv_gid *gid)
{
	memcpy(gid->raw, urnic_v4mapped_prefix, sizeof(urnic_v4mapped_prefix));
	memcpy(&gid->raw[12], &addr, 4);
}

/* false if gid is not IPv4-mapped */
static inline bool urnic_gid_to_ipv4(const union ibv_gid *gid, uint32_t *addr)
{
	if (memcmp(gid->raw, urnic_v4mapped_prefix, sizeof(urnic_v4mapped_prefix)) != 0)
		return false;
	memcpy(addr, &gid->raw[12], 4);
	return true;
}

static inline void urnic_count(struct urnic_dev *dev, enum urnic_counter c, uint64_t n)
{
	urnic_stats_add(dev->stats, c, n);
}

/* ---------------- verbs objects ---------------- */

struct urnic_context {
	struct verbs_context vctx; /* vctx.context is what applications hold */
	struct urnic_dev *dev;
	int async_wfd; /* write end of the async event pipe; context.async_fd is the read end */
};

static inline struct urnic_context *to_uctx(struct ibv_context *c)
{
	return container_of(c, struct urnic_context, vctx.context);
}
static inline struct urnic_dev *ctx_dev(struct ibv_context *c)
{
	return to_uctx(c)->dev;
}

struct urnic_pd {
	struct ibv_pd ibv;
	atomic_int users; /* MRs, QPs, AHs */
	uint32_t id;	  /* unique in this process, never 0: what a device's board names */
};

struct urnic_mr {
	struct ibv_mr ibv;
	struct urnic_mr *next; /* hash chain */
	struct urnic_pd *pd;
	uint8_t *addr;
	uint64_t iova;
	uint64_t length;
	unsigned access;
	uint32_t key;	/* lkey == rkey */
	uint32_t share; /* its pages' shared region (mem/share.h), or 0 */
	int board_slot; /* its slot + 1 on the device's board (engine/direct.h), or 0 */
};

struct urnic_ah {
	struct ibv_ah ibv;
	uint32_t daddr; /* IPv4, network order, from the GRH's destination GID */
};

static inline struct urnic_ah *to_uah(struct ibv_ah *a)
{
	return container_of(a, struct urnic_ah, ibv);
}

struct urnic_channel {
	struct ibv_comp_channel ibv;
	int wfd;
};

struct urnic_cq {
	struct ibv_cq ibv;
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	uint32_t size; /* entries, power of two */
	uint32_t head, tail; /* head: next to poll, tail: next to write */
	/* tail - head, stored under lock as either moves: an empty poll reads it without the lock
	 * (two lock pairs per empty poll were a sixth of its time) */
	_Atomic uint32_t ready;
	int armed; /* 0, or 1 + solicited_only */
	bool overflowed;
	atomic_int users; /* QPs */
};

/* ---------------- QP ---------------- */

enum urnic_swqe_state {
	URNIC_WQE_POSTED,  /* not all packets sent yet */
	URNIC_WQE_SENT,    /* every request packet sent, waiting for ACK/response */
	URNIC_WQE_DONE,    /* acknowledged; completion written */
};

struct urnic_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned send_flags;
	uint32_t imm; /* network order, as the application gave it */
	uint64_t raddr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t ud_daddr, ud_dqpn, ud_qkey; /* UD: where this datagram goes */
	uint32_t length;
	int num_sge;
	bool is_inline;
	enum urnic_swqe_state state;
	uint32_t first_psn; /* PSNs first_psn .. first_psn + npkts - 1 */
	uint32_t npkts;
	uint32_t sent;      /* packets (or, for READ, response PSNs requested) sent so far */
	uint32_t rcvd;      /* READ: response packets placed so far */
	uint32_t read_slice; /* READ: responses per request, fixed at the first (0: none yet) */
	struct ibv_sge *sge; /* num_sge entries; for inline, one entry pointing at the inline copy */
	uint8_t *inline_buf;
};

struct urnic_srq {
	struct ibv_srq ibv;
	struct urnic_rq rq;
	atomic_int users; /* QPs */
};

/* The receive WQE a message in progress is landing in, taken off its queue at FIRST/ONLY. */
struct urnic_cur_recv {
	bool taken;
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge sge[URNIC_MAX_SGE];
};

/* A READ or atomic the responder still has to answer (IBTA: responder resources). */
struct urnic_rd_res {
	bool busy;
	bool atomic;
	bool replay; /* answering a duplicate request again */
	uint32_t psn;    /* first response PSN */
	uint32_t npkts;
	uint32_t sent;
	uint64_t va;
	uint32_t rkey;
	uint32_t length;
	uint64_t orig;   /* atomic: original value, replayed for a duplicate */
};

/* Round-trip estimate and the retransmission timer it drives, below the IB ACK timeout. */
struct urnic_rtx {
	uint64_t srtt_ns, rttvar_ns; /* smoothed round trip and its variation; 0: no sample yet */
	uint64_t sample_sent_ns;     /* when sample_psn left; 0: no sample being timed */
	uint32_t sample_psn;
	uint32_t recover_psn; /* after a retransmission, samples wait until this is acknowledged */
	bool recovering;
	unsigned backoff;  /* consecutive expiries without progress: the timeout doubles each */
	uint64_t deadline; /* ns; 0 when the timer does not run */
	/* the PSN the requester last went back for (a NAK's), where its cursor went (a READ's
	 * first missing response, which may lie before it), and when */
	uint32_t goback_psn, goback_to;
	uint64_t goback_ns;
	uint64_t nak_held_at; /* ns: when a NAK held as maybe stale is judged; 0: none held */
	bool held_read_gap;   /* what is held is a READ response gap, not a NAK */
	uint32_t held_psn;    /* the latest PSN held (a NAK's, or a gap's expected one) */
	uint64_t probe_at;    /* ns: when a tail loss probe goes; 0: none due */
	uint64_t probe_from;  /* ns: the progress (or send into an idle QP) it is timed from */
	bool probed;          /* a probe went since the last progress: no sample, no other probe */
	/* silences: how long the peer may go quiet without loss (a stalled guest, a busy CPU) */
	uint64_t quiet_since_ns; /* last progress, or the send into an idle QP; 0: not timed */
	uint64_t silence_ns;	 /* the longest such silence, decayed */
	uint64_t silence_at_ns;	 /* when silence_ns was last decayed */
	/* congestion window in packets, under qp->window; 0: not reduced (the whole window) */
	uint32_t cwnd, ssthresh;
	uint32_t cwnd_acked; /* packets acknowledged towards the next step of cwnd */
	uint32_t cwnd_prior, ssthresh_prior; /* before the cut: back if it proves spurious */
	bool window_cut; /* cut since the last progress: ssthresh is already set */
	/* the ring's mark after the last request sent through one (net/shm.h); 0: none */
	uint64_t ring_mark;
};

/* A UD QP's record of one sender's IPv4 IDs: each peer stamps its own kind (a urnic peer 0, an
 * rxe peer a counter), so one record for all of them would drop the first packet of one peer
 * after another's. */
struct urnic_ip_id_peer {
	uint32_t addr; /* network order; 0: free */
	struct urnic_ip_id_track ids;
};

struct urnic_qp {
	struct ibv_qp ibv;
	pthread_mutex_t lock;
	struct urnic_dev *dev;
	struct urnic_stats_qp *stats;
	struct ibv_qp_attr attr; /* what modify_qp set; state lives in ibv.state */
	unsigned attr_mask_set;
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	uint32_t peer_addr; /* network order, from the AV's GID */
	uint16_t sport_idx;
	struct urnic_ip_id_track peer_ip_id; /* ICRC: the peer's IPv4 IDs as seen (RC, UC) */
	uint32_t mtu;       /* bytes: the path MTU, or URNIC_SHM_MTU between ring peers */
	uint32_t window;    /* packets the requester may have outstanding */

	/* send queue: cons <= next <= prod, all counting WQEs modulo 2^32 */
	struct urnic_swqe *sq;
	uint32_t sq_size;   /* power of two */
	uint32_t sq_prod, sq_next, sq_cons;

	/* receive queue: the QP's own, or its SRQ's */
	struct urnic_rq own_rq;
	struct urnic_rq *rq;
	struct urnic_srq *srq;
	struct urnic_cur_recv cur_recv;

	/* requester */
	uint32_t snd_nxt;   /* PSN of the next new packet */
	uint32_t snd_una;   /* oldest PSN not yet acknowledged */
	uint32_t snd_max;   /* one past the highest PSN ever sent (snd_nxt, but for go-backs) */
	uint32_t last_ackreq;
	int rd_outstanding; /* READ/atomic requests in flight */
	bool read_gap_asked; /* a READ response gap was already answered with a new request */
	int retry_left, rnr_left;
	uint64_t ack_deadline; /* ns; 0 when no timer runs */
	uint64_t rnr_deadline; /* ns; 0 unless waiting out an RNR NAK */
	uint64_t held_until;   /* ns; 0 unless a packet was held back (urnic_tx_flush) */
	bool tx_held;	       /* the last flush held some of this QP's requests back */
	bool resp_held;	       /* ... or some of its READ responses */
	struct urnic_rtx rtx;  /* the fast retransmission timer (retransmit.c) */

	/* responder */
	uint32_t epsn;       /* next expected request PSN */
	uint32_t msn;
	bool nak_sent;       /* a NAK for epsn went out: stay quiet until epsn arrives */
	bool ack_pending;
	uint32_t ack_psn, ack_msn;
	bool nak_pending;    /* a PSN-sequence or RNR NAK waiting behind responses */
	uint8_t nak_type, nak_value;
	uint32_t nak_psn, nak_msn;
	bool in_send, in_write; /* inside a multi-packet message */
	uint32_t recv_off;
	uint64_t write_va;
	uint32_t write_rkey;
	uint32_t write_left;
	uint32_t write_len;
	struct urnic_rd_res *rd; /* max_dest_rd_atomic entries, used as a ring */
	int rd_size, rd_head, rd_count;
	bool uc_dropping;    /* UC: a packet of this message was lost; skip to the next */

	struct urnic_qp *ack_next; /* engine's list of QPs with an ACK to send this turn */
	uint64_t req_sent_ns;    /* ns; when the requester last sent a packet */
	uint64_t ack_hold_until; /* ns; an owed ACK waits until then for a request to carry it */
	bool on_ack_list;
	int live_idx; /* index in dev->qps */

	/* a UD QP's, one per sender whose packet passed (recv.c, check_icrc) */
	struct urnic_ip_id_peer ud_ip_ids[URNIC_UD_ID_PEERS];
	uint8_t ud_ip_ids_next; /* the slot the next new sender takes */
};

static inline struct urnic_qp *to_uqp(struct ibv_qp *q)
{
	return container_of(q, struct urnic_qp, ibv);
}
static inline struct urnic_cq *to_ucq(struct ibv_cq *c)
{
	return container_of(c, struct urnic_cq, ibv);
}
static inline struct urnic_pd *to_upd(struct ibv_pd *p)
{
	return container_of(p, struct urnic_pd, ibv);
}
static inline struct urnic_mr *to_umr(struct ibv_mr *m)
{
	return container_of(m, struct urnic_mr, ibv);
}

uint64_t urnic_now_ns(void);
uint64_t urnic_clock_ns(void);

#endif
