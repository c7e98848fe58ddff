/* stats.h - live counters of a urnic device, published in a shared-memory file for `urnic stats`. */
#ifndef URNIC_STATS_H
#define URNIC_STATS_H

#include <stdint.h>
#include <sys/types.h>

/* Every counter once: its identifier and the name `urnic stats` prints. Device-wide and per-QP
 * counters share the list; a counter that has no meaning for a QP simply stays 0 there. */
#define URNIC_COUNTERS(X)                                                                          \
	X(tx_packets, "tx_packets")                                                                \
	X(tx_bytes, "tx_bytes")                                                                    \
	X(rx_packets, "rx_packets")                                                                \
	X(rx_bytes, "rx_bytes")                                                                    \
	X(tx_syscalls, "tx_syscalls")                                                              \
	X(rx_syscalls, "rx_syscalls")                                                              \
	X(retransmits, "retransmitted_packets")                                                    \
	X(timeouts, "ack_timeouts")                                                                \
	X(rto_expiries, "retransmit_timer_expiries")                                               \
	X(cwnd_cuts, "congestion_window_cuts")                                                     \
	X(spurious_gobacks, "spurious_go_backs")                                                   \
	X(tail_probes, "tail_loss_probes")                                                         \
	X(ring_waits, "retransmit_waits_for_ring_reader")                                          \
	X(acks_sent, "acks_sent")                                                                  \
	X(acks_rcvd, "acks_received")                                                              \
	X(acks_with_requests, "acks_with_requests")                                                \
	X(nak_seq_sent, "nak_psn_seq_err_sent")                                                    \
	X(nak_seq_rcvd, "nak_psn_seq_err_received")                                                \
	X(stale_naks, "nak_psn_seq_err_stale")                                                     \
	X(held_naks, "nak_psn_seq_err_held")                                                       \
	X(held_read_gaps, "read_response_gaps_held")                                               \
	X(nak_inv_sent, "nak_invalid_request_sent")                                                \
	X(nak_inv_rcvd, "nak_invalid_request_received")                                            \
	X(nak_acc_sent, "nak_remote_access_sent")                                                  \
	X(nak_acc_rcvd, "nak_remote_access_received")                                              \
	X(nak_op_sent, "nak_remote_op_err_sent")                                                   \
	X(nak_op_rcvd, "nak_remote_op_err_received")                                               \
	X(rnr_nak_sent, "rnr_nak_sent")                                                            \
	X(rnr_nak_rcvd, "rnr_nak_received")                                                        \
	X(dup_requests, "duplicate_requests")                                                      \
	X(out_of_seq, "out_of_sequence_requests")                                                  \
	X(read_gaps, "read_response_gaps")                                                         \
	X(uc_dropped_msgs, "uc_messages_dropped")                                                  \
	X(drop_short, "drop_truncated")                                                            \
	X(drop_icrc, "drop_bad_icrc")                                                              \
	X(drop_bad_header, "drop_bad_header")                                                      \
	X(drop_opcode, "drop_bad_opcode")                                                          \
	X(drop_no_qp, "drop_unknown_qp")                                                           \
	X(drop_qp_state, "drop_qp_state")                                                          \
	X(drop_peer, "drop_wrong_peer")                                                            \
	X(drop_psn, "drop_psn_out_of_window")                                                      \
	X(drop_length, "drop_bad_length")                                                          \
	X(drop_qkey, "drop_bad_qkey")                                                              \
	X(drop_no_recv, "drop_no_receive_wqe")                                                     \
	X(drop_stale_rd_atomic, "drop_stale_read_atomic")                                          \
	X(cq_overflow, "cq_overflow")                                                              \
	X(gso_sends, "tx_gso_sends")                                                               \
	X(gro_receives, "rx_gro_receives")                                                         \
	X(drop_gro_excess, "drop_gro_excess")                                                      \
	X(shm_tx_packets, "shm_tx_packets")                                                        \
	X(shm_rx_packets, "shm_rx_packets")                                                        \
	X(shm_ring_full, "shm_ring_full")                                                          \
	X(tx_held, "tx_held_back")                                                                 \
	X(shm_doorbells, "shm_doorbells")                                                          \
	X(shm_ring_broken, "shm_ring_broken")                                                      \
	X(shm_rx_placed, "shm_rx_payloads_in_place")                                               \
	X(shm_place_stale, "drop_shm_place_stale")                                                 \
	X(shm_place_refused, "shm_place_refused")                                                  \
	X(engine_wakes_poll, "engine_wakes_by_poll")                                               \
	X(engine_wakes_drain, "engine_wakes_by_drain")                                             \
	X(engine_rechecks, "engine_stand_back_rechecks")                                           \
	X(direct_writes, "direct_writes")                                                          \
	X(direct_reads, "direct_reads")                                                            \
	X(direct_atomics, "direct_atomics")                                                        \
	X(direct_bytes, "direct_bytes")

enum urnic_counter {
#define URNIC_COUNTER_ENUM(id, name) URNIC_C_##id,
	URNIC_COUNTERS(URNIC_COUNTER_ENUM)
#undef URNIC_COUNTER_ENUM
	URNIC_C_COUNT
};

extern const char *const urnic_counter_names[URNIC_C_COUNT];

/* Layout of the file /dev/shm/urnic-<pid>-<device>.stats (one per device a process opened).
 * A device-wide counter is the sum of its shards: each thread that counts has one of its own
 * (URNIC_STATS_SHARDS of them, in every device's file), which it adds to with a plain load and
 * store; threads past those share c[], with locked adds. A locked add costs 10-20 ns here, and a
 * ring's round trip made about ten (ring send_lat 0.93-0.99 -> 0.88-0.90 us without them). A
 * QP's counters are written under its lock, with plain adds too. Readers copy the file, fold the
 * shards (urnic_stats_fold) and may see a counter a few events behind. Version bumps whenever
 * this layout changes. */
#define URNIC_STATS_MAGIC 0x75726e6963737461ull /* "urnicsta" */
#define URNIC_STATS_VERSION 15
#define URNIC_STATS_QP_SLOTS 1024
#define URNIC_STATS_SHARDS 16

struct urnic_stats_qp {
	uint32_t qpn;    /* 0: slot free */
	uint32_t state;  /* enum ibv_qp_state */
	uint32_t type;   /* enum ibv_qp_type */
	uint32_t dest_qpn;
	uint32_t peer_addr; /* IPv4, network order */
	uint32_t pad;
	uint64_t c[URNIC_C_COUNT];
};

struct urnic_stats_shard { /* one thread's; a line of its own from its neighbours' */
	_Alignas(64) uint64_t c[URNIC_C_COUNT];
};

struct urnic_stats_file {
	uint64_t magic;
	uint32_t version;
	uint32_t pid;
	char dev_name[16];
	uint32_t addr; /* IPv4, network order */
	uint32_t counter_count;  /* URNIC_C_COUNT of the writer */
	uint64_t c[URNIC_C_COUNT]; /* the threads' past the shards */
	uint32_t qp_slots;
	uint32_t shard_count; /* URNIC_STATS_SHARDS of the writer */
	struct urnic_stats_shard shard[URNIC_STATS_SHARDS];
	struct urnic_stats_qp qp[URNIC_STATS_QP_SLOTS];
};

/* A device's counters, shards summed, into out. s may be live: each word is read whole. */
static inline void urnic_stats_fold(const struct urnic_stats_file *s, uint64_t *out)
{
	for (int i = 0; i < URNIC_C_COUNT; i++) {
		uint64_t v = __atomic_load_n(&s->c[i], __ATOMIC_RELAXED);

		for (int k = 0; k < URNIC_STATS_SHARDS; k++)
			v += __atomic_load_n(&s->shard[k].c[i], __ATOMIC_RELAXED);
		out[i] = v;
	}
}

/* The calling thread's shard (1..URNIC_STATS_SHARDS), 0 before its first count, -1 if it has
 * none (common/stats.c). */
extern _Thread_local int urnic_stats_shard_idx __attribute__((tls_model("initial-exec")));

/* Gives the calling thread a shard if it has none yet and one is free; returns its index. */
int urnic_stats_shard_claim(void);
void urnic_stats_add_shared(struct urnic_stats_file *s, enum urnic_counter c, uint64_t n);

/* Adds n to a counter word whose writers never run at once (one thread's shard, or a QP's
 * counters under its lock): a plain load and store, each whole for a live reader. */
static inline void urnic_stats_word_add(uint64_t *p, uint64_t n)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* Adds n to counter c of a device's file, in the calling thread's shard. */
static inline void urnic_stats_add(struct urnic_stats_file *s, enum urnic_counter c, uint64_t n)
{
	int k = urnic_stats_shard_idx;

	if (k > 0)
		urnic_stats_word_add(&s->shard[k - 1].c[c], n);
	else
		urnic_stats_add_shared(s, c, n);
}

/* The word counter c of s that the calling thread adds to: a delta of it is this thread's own. */
static inline const uint64_t *urnic_stats_mine(struct urnic_stats_file *s, enum urnic_counter c)
{
	int k = urnic_stats_shard_idx ? urnic_stats_shard_idx : urnic_stats_shard_claim();

	return k > 0 ? &s->shard[k - 1].c[c] : &s->c[c];
}

/* The calling thread's kernel id, as glibc's mutexes record their owner (gettid(), once per
 * thread and again in a fork's child). */
pid_t urnic_thread_id(void);

/* Adds n to a QP's counter c; the QP's lock serializes its writers. */
static inline void urnic_stats_qp_add(struct urnic_stats_qp *q, enum urnic_counter c, uint64_t n)
{
	urnic_stats_word_add(&q->c[c], n);
}

#endif
