/* recv.c - receive dispatch: every check a packet must pass, in order, before the responder or
 * completer sees it. A failed check is a counted drop, never a crash and never trusted. */
#include "engine/engine.h"

struct rx_ctx {
	struct urnic_dev *dev;
	const struct urnic_rxpkt *pkt;
	const struct urnic_opcode_info *op;
	struct urnic_qp *qp;
};

/* Each check returns 0 to pass or the counter naming why the packet is dropped. */
typedef int (*rx_check)(struct rx_ctx *c);

#define PASS 0
#define DROP(reason) (URNIC_C_##reason + 1)

static int check_length(struct rx_ctx *c)
{
	return c->pkt->len < URNIC_BTH_LEN + URNIC_ICRC_LEN ? DROP(drop_short) : PASS;
}

static int check_opcode(struct rx_ctx *c)
{
	c->op = urnic_op(bth_opcode(c->pkt->data));
	return c->op->mask == 0 ? DROP(drop_opcode) : PASS;
}

static int check_header(struct rx_ctx *c)
{
	const uint8_t *bth = c->pkt->data;

	if (bth_tver(bth) != 0 || (bth_pkey(bth) & 0x7fff) != (URNIC_DEFAULT_PKEY & 0x7fff))
		return DROP(drop_bad_header);
	if (c->pkt->len < (uint32_t)c->op->hdr_len + bth_padcnt(bth) + URNIC_ICRC_LEN)
		return DROP(drop_length);
	return PASS;
}

static int check_qp(struct rx_ctx *c)
{
	uint32_t qpn = bth_dqpn(c->pkt->data);
	struct urnic_qp *qp = c->dev->qp_table[qpn % URNIC_MAX_QP];

	if (!qp || qp->ibv.qp_num != qpn)
		return DROP(drop_no_qp);
	c->qp = qp;
	pthread_mutex_lock(&qp->lock);
	return PASS;
}

/* The record of the sender's IPv4 IDs to check a packet against, or NULL for none kept: an RC
 * or UC QP keeps its peer's; a UD QP one for each of URNIC_UD_ID_PEERS senders. A packet from
 * an address without one is checked as from an unknown peer. For an RC or UC QP it teaches
 * nothing (check_peer drops it later): a forger's ID 0 would make the QP take its rxe peer for
 * a urnic one. */
static struct urnic_ip_id_track *peer_ip_ids(struct urnic_qp *qp, uint32_t saddr)
{
	if (qp->ibv.qp_type != IBV_QPT_UD)
		return saddr == qp->peer_addr ? &qp->peer_ip_id : NULL;
	for (int i = 0; i < URNIC_UD_ID_PEERS; i++)
		if (qp->ud_ip_ids[i].addr == saddr)
			return &qp->ud_ip_ids[i].ids;
	return NULL;
}

/* A UD QP's new sender, once a packet of its passed: its record takes the slot filled longest
 * ago. Not before, or corrupt or forged datagrams from made-up addresses would push the real
 * senders' records out. */
static void ud_ip_ids_add(struct urnic_qp *qp, uint32_t saddr, const struct urnic_ip_id_track *t)
{
	qp->ud_ip_ids[qp->ud_ip_ids_next] = (struct urnic_ip_id_peer){.addr = saddr, .ids = *t};
	qp->ud_ip_ids_next = (uint8_t)((qp->ud_ip_ids_next + 1) % URNIC_UD_ID_PEERS);
}

static int check_icrc(struct rx_ctx *c)
{
	if (c->pkt->local) /* from a shared-memory ring: no wire to corrupt it (net/shm.c) */
		return PASS;
	struct urnic_ip_id_track scratch = {0};
	struct urnic_ip_id_track *ids = peer_ip_ids(c->qp, c->pkt->saddr);
	struct urnic_ip4_flow flow = {
		.saddr = c->pkt->saddr,
		.daddr = c->pkt->daddr,
		.sport = c->pkt->sport,
		.dport = URNIC_ROCEV2_PORT,
	};

	if (!urnic_icrc_check_track(&flow, c->pkt->data, c->pkt->len, c->pkt->seg,
				    ids ? ids : &scratch))
		return DROP(drop_icrc);
	if (!ids && c->qp->ibv.qp_type == IBV_QPT_UD)
		ud_ip_ids_add(c->qp, c->pkt->saddr, &scratch);
	return PASS;
}

static int check_transport(struct rx_ctx *c)
{
	static const uint32_t qp_type_mask[] = {
		[IBV_QPT_RC] = URNIC_M_RC, [IBV_QPT_UC] = URNIC_M_UC, [IBV_QPT_UD] = URNIC_M_UD};
	enum ibv_qp_type t = c->qp->ibv.qp_type;

	if (t > IBV_QPT_UD || !(c->op->mask & qp_type_mask[t]))
		return DROP(drop_opcode);
	return PASS;
}

/* Requests need RTR or later; responses are only awaited in RTS. */
static int check_state(struct rx_ctx *c)
{
	enum ibv_qp_state s = c->qp->ibv.state;

	if (c->op->mask & URNIC_M_REQ)
		return urnic_state_takes_requests(s) ? PASS : DROP(drop_qp_state);
	return s == IBV_QPS_RTS ? PASS : DROP(drop_qp_state);
}

/* An RC or UC peer is its address (the UDP source port is entropy and may vary); a UD QP
 * takes datagrams from anyone. */
static int check_peer(struct rx_ctx *c)
{
	if (c->qp->ibv.qp_type == IBV_QPT_UD)
		return PASS;
	return c->pkt->saddr == c->qp->peer_addr ? PASS : DROP(drop_peer);
}

static const rx_check rx_checks[] = {
	check_length, check_opcode, check_header, check_qp,
	check_icrc,   check_transport, check_state, check_peer,
};

void urnic_recv_packet(struct urnic_dev *dev, const struct urnic_rxpkt *pkt,
		       struct urnic_txbatch *b)
{
	struct rx_ctx c = {.dev = dev, .pkt = pkt};

	if (urnic_trace && pkt->len >= URNIC_BTH_LEN)
		urnic_trace_pkt("rx", dev, pkt->data, pkt->len, pkt->saddr);
	urnic_count(dev, URNIC_C_rx_packets, 1);
	urnic_count(dev, URNIC_C_rx_bytes, pkt->len);
	for (size_t i = 0; i < sizeof(rx_checks) / sizeof(rx_checks[0]); i++) {
		int drop = rx_checks[i](&c);

		if (drop) {
			if (c.qp) {
				urnic_qp_count(c.qp, (enum urnic_counter)(drop - 1), 1);
				pthread_mutex_unlock(&c.qp->lock);
			} else {
				urnic_count(dev, (enum urnic_counter)(drop - 1), 1);
			}
			return;
		}
	}
	if (c.qp->stats)
		urnic_stats_qp_add(c.qp->stats, URNIC_C_rx_packets, 1); /* under the QP's lock */
	if (c.op->mask & URNIC_M_REQ)
		urnic_resp_rx(c.qp, pkt, b);
	else
		urnic_comp_rx(c.qp, pkt, b);
	pthread_mutex_unlock(&c.qp->lock);
}
