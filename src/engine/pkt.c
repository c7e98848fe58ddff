/* pkt.c - assembling outgoing packets: BTH, pad, ICRC, and the batch they leave in. */
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "net/shm.h"

#include <arpa/inet.h>
#include <stdio.h>

bool urnic_trace;

/* One line per packet, written with one call so that threads' lines never interleave. */
void urnic_trace_pkt(const char *dir, const struct urnic_dev *dev, const uint8_t *bth,
		     uint32_t len, uint32_t peer)
{
	char a[INET_ADDRSTRLEN], line[256];
	const struct urnic_opcode_info *op = urnic_op(bth_opcode(bth));
	int n;

	inet_ntop(AF_INET, &peer, a, sizeof(a));
	n = snprintf(line, sizeof(line), "urnic %d %s %s %-24s qpn %06x psn %06x len %u%s",
		     (int)getpid(), dir, a, op->name ? op->name : "?", bth_dqpn(bth), bth_psn(bth),
		     len, bth_ackreq(bth) ? " ackreq" : "");
	if (op->aeth && n < (int)sizeof(line))
		n += snprintf(line + n, sizeof(line) - (size_t)n, " aeth %02x msn %u",
			      aeth_syndrome(bth + op->aeth), aeth_msn(bth + op->aeth));
	if (op->reth && n < (int)sizeof(line))
		n += snprintf(line + n, sizeof(line) - (size_t)n, " reth va %llx len %u",
			      (unsigned long long)reth_va(bth + op->reth), reth_len(bth + op->reth));
	if (n < (int)sizeof(line)) { /* monotonic microseconds, to read latencies off a trace */
		uint64_t ns = urnic_now_ns();

		n += snprintf(line + n, sizeof(line) - (size_t)n, " t %llu.%03llu",
			      (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
	}
	if (n >= (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void urnic_tx_init(struct urnic_txbatch *b, struct urnic_dev *dev)
{
	b->dev = dev;
	b->n = 0;
}

/* A flush's ring mark for its packets to daddr (urnic_shm_mark), read once per peer in a row. */
struct flush_mark {
	uint32_t daddr;
	uint64_t mark;
	bool known;
};

static uint64_t flush_mark(struct urnic_txbatch *b, struct flush_mark *m, uint32_t daddr)
{
	if (!m->known || m->daddr != daddr)
		*m = (struct flush_mark){daddr, urnic_shm_mark(&b->dev->net, daddr), true};
	return m->mark;
}

void urnic_tx_flush(struct urnic_txbatch *b)
{
	struct urnic_net_tally t = {0};
	struct flush_mark m = {0};

	if (b->n == 0)
		return;
	urnic_net_send(&b->dev->net, b->pkts, b->n, &t, b->held);
	urnic_count(b->dev, URNIC_C_tx_syscalls, t.syscalls);
	if (t.gso_sends)
		urnic_count(b->dev, URNIC_C_gso_sends, t.gso_sends);
	/* Held back: an RC request goes back to its requester and a READ response to its
	 * responder resource (in the order they were built, which per QP is PSN order; both are
	 * flushed under their QP's lock, see urnic_req_run and urnic_resp_tx), and the QP tries
	 * again at the device's held-retry time if nothing else runs it first. Anything else (an
	 * ACK, an atomic response, UC, UD) is lost, as on a full link. A request that went into a
	 * ring leaves its QP the ring's mark, for its timers (retransmit.c). */
	for (int i = 0; i < b->n; i++) {
		const struct urnic_txsrc *src = &b->src[i];

		if (!src->qp || src->qp->ibv.qp_type != IBV_QPT_RC)
			continue;
		uint32_t mask = urnic_op(src->opcode)->mask;

		if (!b->held[i]) {
			if (mask & URNIC_M_REQ)
				src->qp->rtx.ring_mark = flush_mark(b, &m, src->qp->peer_addr);
			continue;
		}
		if (mask & URNIC_M_REQ)
			urnic_req_held(src->qp, src->psn, src->opcode);
		else if (mask & URNIC_M_READ)
			urnic_resp_held(src->qp, src->psn);
		else
			continue;
		urnic_qp_count(src->qp, URNIC_C_tx_held, 1);
		if (!src->qp->held_until)
			src->qp->held_until = urnic_engine_held_retry(b->dev);
	}
	b->n = 0;
}

struct urnic_txpkt *urnic_tx_begin(struct urnic_txbatch *b, struct urnic_qp *qp, uint8_t opcode,
				   uint32_t psn, bool ackreq, bool se)
{
	if (b->n == URNIC_TX_BATCH)
		urnic_tx_flush(b);
	b->src[b->n] = (struct urnic_txsrc){.qp = qp, .psn = psn, .opcode = opcode};
	struct urnic_txpkt *p = &b->pkts[b->n++];
	const struct urnic_opcode_info *op = urnic_op(opcode);
	struct urnic_bth_fields f = {
		.opcode = opcode,
		.se = se,
		.ackreq = ackreq,
		.pkey = URNIC_DEFAULT_PKEY,
		.dqpn = qp->attr.dest_qp_num,
		.psn = psn,
	};

	memset(p->hdr, 0, op->hdr_len);
	urnic_bth_build(p->hdr, &f);
	p->daddr = qp->peer_addr;
	p->sport_idx = qp->sport_idx;
	p->again = false;
	p->iov[0] = (struct iovec){.iov_base = p->hdr, .iov_len = op->hdr_len};
	p->iovcnt = 1;
	return p;
}

void urnic_tx_finish(struct urnic_qp *qp, struct urnic_txpkt *p, uint32_t payload_len)
{
	struct urnic_dev *dev = qp->dev;
	unsigned pad = (4 - (payload_len & 3)) & 3;
	uint32_t hdr_len = (uint32_t)p->iov[0].iov_len;

	p->hdr[1] = (uint8_t)((p->hdr[1] & ~0x30) | pad << 4);
	memset(p->trailer, 0, sizeof(p->trailer));
	p->len = hdr_len + payload_len + pad + URNIC_ICRC_LEN;
	/* the ICRC is the net layer's: a packet for a ring needs none (urnic_net_send) */
	p->iov[p->iovcnt++] = (struct iovec){.iov_base = p->trailer, .iov_len = pad + URNIC_ICRC_LEN};
	if (urnic_trace)
		urnic_trace_pkt("tx", dev, p->hdr, p->len, p->daddr);
	urnic_qp_count(qp, URNIC_C_tx_packets, 1);
	urnic_qp_count(qp, URNIC_C_tx_bytes, p->len);
}
