/* param.h - the device's limits: one place, reported by ibv_query_device and enforced by verbs. */
#ifndef URNIC_PARAM_H
#define URNIC_PARAM_H

#define URNIC_VENDOR_ID 0x000000 /* no IEEE OUI: urnic is software */
#define URNIC_VENDOR_PART_ID 0x7572 /* "ur" */
#define URNIC_HW_VER 1
#define URNIC_FW_VER "0.1.0"

#define URNIC_MAX_QP 16384
#define URNIC_MAX_QP_WR 16384
#define URNIC_MAX_SGE 16
#define URNIC_MAX_INLINE 512
#define URNIC_MAX_CQ 16384
#define URNIC_MAX_CQE (1 << 20)
#define URNIC_MAX_MR 65536
#define URNIC_MAX_MR_SIZE (1ull << 40)
#define URNIC_MAX_PD 65536
#define URNIC_MAX_AH 65536
/* READs and atomics one QP may have outstanding, each way: rxe's figure (ConnectX: 16). perftest
 * takes it as its outstanding READs: ib_read_bw -s 4096 over UDP, 16 -> 128: 666 -> 1838 MiB/s,
 * medians of 3 (a 4 KiB READ is one request and one response, so 16 of them were 64 KiB in
 * flight). A responder keeps one 40-byte resource per max_dest_rd_atomic the application asks. */
#define URNIC_MAX_QP_RD_ATOM 128
#define URNIC_MAX_SRQ 16384
#define URNIC_MAX_MSG_SIZE (1u << 31) /* an IB message is at most 2^31 bytes */
#define URNIC_PAGE_SIZE_CAP 0xfffff000u
#define URNIC_NUM_COMP_VECTORS 1
#define URNIC_PORT_GID_TBL_LEN 1
#define URNIC_PORT_PKEY_TBL_LEN 1
#define URNIC_MAX_MTU_ENUM 5 /* IBV_MTU_4096 */

/* Transport tuning. */
#define URNIC_TX_WINDOW 128   /* packets a requester has outstanding (incl. READ responses) */
#define URNIC_ACKREQ_EVERY 32 /* AckReq at least this often inside a long message */
/* A READ request asks for at most this share of the window in responses, so that the next
 * request goes while the last one's responses still arrive. With one request per window the
 * window emptied before each request (ib_read_bw -s 1M over UDP, medians of 5: 2698 MiB/s with
 * 1 slice per window, 4481 with 2, 4385 with 4; 64 MiB READ at 1% loss, 5 seeds: 957 -> 1548 MB/s
 * with 4, at 5% loss 259 -> 194: more in flight is more to go back over). */
#define URNIC_READ_SLICES 4
#define URNIC_RX_SLOTS 32     /* datagrams per recvmmsg */
#define URNIC_TX_BATCH 64     /* packets per sendmmsg */
/* UDP GSO/GRO: one send or receive of up to this many packets (the kernel's GRO limit too) ... */
#define URNIC_GSO_MAX_SEGS 64
/* ... and of at most this many bytes of UDP payload (65507 is IPv4's limit) */
#define URNIC_GSO_MAX_BYTES 65000
#define URNIC_SHM_PEERS 256 /* intra-host peers one device can have rings with, each way */
/* An RC or UC QP whose peer is reached through a shared-memory ring (net/shm.c) uses this
 * packet size instead of its path MTU, the same on both ends since each decides it at RTR from
 * the same fact (the other has a ring inbox): a packet's fixed costs come once per 256 KiB, not
 * once per 4 KiB. 64 KiB until payloads went by place; since, 256 KiB took 1 MiB WRITE +8-10%
 * and READ +12-15% (payloads in the ring, URNIC_SHM_MR=0, lost up to 5% for WRITE; 128 KiB:
 * +4%, +5%, and +5% in the ring). Its window of 32 (24, with AckReq twice per window, left the
 * sender waiting for ACKs with the ring empty: 1 MiB WRITE over the rings 21 -> 26 GB/s at 32
 * with AckReq four times per window, with 64 KiB packets) holds more than a 4 MiB ring of
 * payloads in the ring: a full ring holds the rest back (net/shm.c). */
#define URNIC_SHM_MTU (256u << 10)
#define URNIC_SHM_WINDOW 32
/* A receive takes at most this much of a ring at once: the batch's ACKs and the ring space it
 * frees go back when it is done, and a batch of a whole window (1.5 MiB, 80 us of copying)
 * left the sender waiting for both, then the receiver waiting for the next window: 1 MiB WRITE
 * over the rings 11 -> 17 GB/s. */
#define URNIC_SHM_RX_BYTES (256u << 10)
/* A ring packet of this many bytes or more whose payload lies in a shared MR region (mem/share.c)
 * names its payload by place instead of carrying it: the consumer copies it once, from the
 * producer's pages straight into its own MR. An MR gets a region if it holds this many bytes of
 * whole pages. */
#define URNIC_SHM_REF_MIN 32768u
/* An empty ring whose head stands this far into it or more goes on from its start (net/shm.c,
 * rewind_if_empty): a ping-pong's records stay on the ring's first pages. Until the consumer
 * passes the wrap that rewinds it, the ring has this much room, less the run that rewound it
 * (at most URNIC_SHM_REWIND_RUN), not 4 MiB: still room for a packet of URNIC_SHM_MTU. */
#define URNIC_SHM_REWIND_AT (512u << 10)
#define URNIC_SHM_REWIND_RUN (128u << 10)
#define URNIC_SHARE_REGIONS 256 /* shared regions in one process */
/* and the most bytes one may hold: moving pages needs a copy of them for a moment */
#define URNIC_SHARE_MAX_BYTES (1ull << 30)
#define URNIC_SHM_VIEWS 16	/* peers' regions one device keeps mapped */
#define URNIC_SHM_REFS 64	/* packets by place in one receive */
#define URNIC_RX_SLOT_LEN 65536 /* a receive buffer: one datagram, coalesced or not */
#define URNIC_RX_BATCH (URNIC_RX_SLOTS * URNIC_GSO_MAX_SEGS) /* packets one receive delivers */
/* A request or READ response the local path held back (a full ring or socket buffer) is tried
 * again after this long if nothing runs its QP first: a 4 MiB ring drains in about half a
 * millisecond. */
#define URNIC_TX_HELD_RETRY_NS 50000ull
/* READ response bytes sent per QP per engine turn (64 packets on the wire at a 4 KiB MTU, 1
 * through a ring): QPs answering READs at once take turns, so each sees its responses begin
 * within one round of all of them, not after every earlier QP's whole READ (which, 16 MiB deep
 * through a 4 MiB ring, outlasts the requester's retransmission timer). */
#define URNIC_RESP_BURST_BYTES (256u << 10)
#define URNIC_TX_SOCKETS 8    /* source ports (ECMP entropy), chosen per QP */
#define URNIC_SOCK_BUF (8 << 20)
#define URNIC_RTO_MIN_NS 2000000ull /* fast retransmission timeout floor: scheduling noise */
/* A tail loss probe waits two round trips, but at least this long. Between two processes of
 * one host a round trip can be a few microseconds (rings) while a wake-up of the peer's engine
 * thread takes 25-50 us here and a timer overshoots by 20-30: at 2 srtt alone, ib_send_lat over
 * the rings sent 130-470 probes per 5000 messages (typical one way 14 us; 3-8 us without them).
 * A bulk transfer's round trip is longer than the floor anyway. */
#define URNIC_PROBE_MIN_NS 250000ull
/* The fast timeout is also at least this many times the longest recent silence that ended in
 * progress with no retransmission; that silence is halved every URNIC_SILENCE_HALF_NS. */
#define URNIC_RTO_SILENCE_MULT 2
#define URNIC_SILENCE_HALF_NS 1000000000ull
/* What a timer expiry cuts a QP's congestion window to, in packets (engine/retransmit.c): 1024
 * QPs at this window hold 8 MiB in flight at a 4 KiB MTU, the size of a receive buffer. */
#define URNIC_CWND_MIN 2
/* A request more than this many PSNs ahead of the expected one is dropped without a NAK: a gap
 * that wide means a million packets lost in a row, so the packet is forged or corrupt, and a NAK
 * would make the real requester go back for nothing. */
#define URNIC_RESP_PSN_WINDOW (1 << 20)
/* The senders a UD QP follows the IPv4 IDs of at once (for the ICRC check). A new sender, once
 * a packet of its passes, takes the slot filled longest ago, and the sender there starts unknown
 * again: its next packet is checked at about 15 bits instead of 21-25, once. */
#define URNIC_UD_ID_PEERS 8
/* ibv_post_send sends at once while fewer packets than this are unacknowledged, and otherwise
 * leaves the new WRs to the next ACK (doorbell batching, ACK-clocked). 1: only an idle QP sends
 * at once. 8 measured worse than 1 (ib_write_bw 8 B: 0.19 against 0.47 Mpps): the first WRs of
 * each round trip left one system call and one ACK each, breaking up the batches. */
#define URNIC_POST_DEFER_INFLIGHT 1
/* An ACK to an idle QP that sent a request itself less than URNIC_ACK_HOLD_WINDOW_NS ago (a
 * ping-pong of WRITEs) waits up to URNIC_ACK_HOLD_NS for the application's next request on the
 * QP to carry it (engine.c, hold_ack). */
#define URNIC_ACK_HOLD_NS 20000ull
#define URNIC_ACK_HOLD_WINDOW_NS 1000000ull
#define URNIC_APP_POLL_NS 50000ull /* engine thread stands back this long after an app poll */
/* While the application keeps polling, each stand-back sleeps twice as long as the one before,
 * up to URNIC_APP_POLL_NS << URNIC_APP_POLL_BACKOFF (1.6 ms): a wake-up for nothing takes the
 * polling application's CPU, some 45 us of it on this machine's virtual CPUs (bench/wakeup.c:
 * a spinner lost 8.8% of its time to a thread re-checking every 400 us beside it, 4.3% at
 * 1.6 ms, 2.7% alone), and an application that still polls has the socket anyway. The price is
 * paid by an application that stops polling without a drain that hands the socket back: what
 * comes for it waits up to this long for the engine thread. One that waits on memory for a
 * peer's WRITE is such an application whenever the WRITE comes after the drain: ib_write_lat's
 * slowest samples followed the ceiling (over UDP about 230 us at 400 us, 450-880 at 800 us,
 * 0.8-2.2 ms at 1.6 ms). So where a WRITE without immediate or an atomic landed in the last
 * 1.6 ms the ceiling is URNIC_APP_POLL_NS << URNIC_APP_POLL_BACKOFF_LANDED (400 us), as it was
 * everywhere before. A 1.6 ms ceiling for all (3eb6f96) had made rc_ack_hold_udp under TSan
 * fail 5 of 30 runs and was taken back. */
#define URNIC_APP_POLL_BACKOFF 5u
#define URNIC_APP_POLL_BACKOFF_LANDED 3u
/* An application that emptied its CQ and polls again within URNIC_APP_RETURN_NS returned
 * quickly. The count of quick returns (one more for each, up to URNIC_APP_RETURNS_MAX; one less
 * for each slow return) at URNIC_APP_RETURNS or above marks an application busy-polling its CQs
 * (perftest's bandwidth and send latency loops): its next drain leaves the socket to it. Any
 * other application gets the engine thread back on the socket as it drains, since it may now
 * wait on memory (perftest's write latency loop, whose returns are all slow). Counting down
 * rather than resetting keeps the socket with a busy poller through a slow return or two:
 * giving it back costs a wake-up of the engine thread at the drain and another at the next poll,
 * either of which can make the next return slow, and resetting fed itself (ib_send_lat: one
 * return in ten was slow). */
#define URNIC_APP_RETURN_NS 20000ull
#define URNIC_APP_RETURNS 2u
#define URNIC_APP_RETURNS_MAX 4u
/* An idle engine thread watches its rings and its socket this long before it sleeps: a peer's
 * next packet is usually that close, and a wake-up (a doorbell datagram or the packet itself,
 * then the scheduler) costs more than the whole 1 MiB message it would bring. */
#define URNIC_WATCH_NS 50000ull
/* An application polling a device that reads rings, and an engine thread watching or reading
 * them, make the socket's system call at most this often (unless the engine thread has just seen
 * the socket readable). The gap doubles with each call that finds nothing, up to
 * URNIC_SOCK_POLL_MAX_NS: below the tail-loss probe's floor, so that a peer over UDP of a device
 * busy with ring peers waits for its ACK no longer than its own probe. */
#define URNIC_SOCK_POLL_NS 20000ull
#define URNIC_SOCK_POLL_MAX_NS 160000ull
#define URNIC_WATCH_QUIET_NS 1000000ull /* ... unless an application polled this recently */
/* With URNIC_ENGINE_RT=1, where it may (root, or RLIMIT_RTPRIO), the engine thread runs
 * SCHED_FIFO at this priority while it listens for an application that does not poll, like a
 * NIC's interrupt: a packet then preempts whatever the application does on that CPU. A busy
 * engine thread goes back to the default class after URNIC_ENGINE_RT_NS of work. */
#define URNIC_ENGINE_RT_PRIO 1
#define URNIC_ENGINE_RT_NS 200000ull

#endif
