/* rc_gso_gro: large WRITE, READ and SEND leave in UDP GSO sends (runs of equal packets, each
 * segment's ICRC for the IP ID the kernel gives it) and arrive as GRO datagrams that the
 * receiver cuts back into packets; every byte lands, no ICRC fails. With --gso-off (URNIC_GSO=0)
 * the same traffic goes one datagram per packet: no GSO send, so no GRO receive either. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define LEN (4 * RC_MIB) /* 1024 packets at a 4096-byte MTU */
#define SEND_LEN (256u << 10)

static bool gso_off;

struct tally {
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
};

static uint64_t delta(const struct tally *t, enum urnic_counter c)
{
	return t->after[c] - t->before[c];
}

/* Both sides send (requests one way, READ responses the other) and both receive. */
static void check_offload(struct rc *rc, const struct tally *t)
{
	uint64_t gso = delta(t, URNIC_C_gso_sends), gro = delta(t, URNIC_C_gro_receives);

	RC_CHECK(rc, delta(t, URNIC_C_drop_icrc) == 0, "%llu packets failed the ICRC",
		 (unsigned long long)delta(t, URNIC_C_drop_icrc));
	RC_CHECK(rc, delta(t, URNIC_C_drop_gro_excess) == 0, "GRO segments dropped");
	if (gso_off) {
		RC_CHECK(rc, gso == 0 && gro == 0, "URNIC_GSO=0, yet %llu GSO sends, %llu GRO receives",
			 (unsigned long long)gso, (unsigned long long)gro);
		return;
	}
	RC_CHECK(rc, gso > 0, "no GSO send among %llu packets",
		 (unsigned long long)delta(t, URNIC_C_tx_packets));
	RC_CHECK(rc, gro > 0, "no GRO receive among %llu packets",
		 (unsigned long long)delta(t, URNIC_C_rx_packets));
}

static int server(struct rc *rc)
{
	struct tally t;
	struct ibv_wc wc;

	rc_read_counters(rc, t.before);
	rc_step(rc, "be written %zu bytes", (size_t)LEN);
	memset(rc->buf, 0, LEN);
	rc_post_recv(rc, 0, 9, LEN, SEND_LEN);
	rc_sync(rc);
	rc_sync(rc); /* the WRITE completed */
	rc_check(rc, rc->buf, LEN, 31, "written data");
	rc_fill(rc->buf, LEN, 32);
	rc_sync(rc); /* the client may read */
	rc_step(rc, "receive a %u-byte SEND", SEND_LEN);
	rc_wait(rc, rc->rcq, 9, IBV_WC_RECV, &wc);
	RC_CHECK(rc, wc.byte_len == SEND_LEN, "SEND byte_len %u", wc.byte_len);
	rc_check(rc, rc->buf + LEN, SEND_LEN, 33, "SEND payload");
	rc_read_counters(rc, t.after);
	check_offload(rc, &t);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct tally t;
	struct rc_wr w;
	struct ibv_wc wc;

	rc_read_counters(rc, t.before);
	rc_step(rc, "write %zu bytes", (size_t)LEN);
	rc_fill(rc->buf, LEN, 31);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, LEN, 0);
	rc_sync(rc);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rc_sync(rc);
	rc_sync(rc);
	rc_step(rc, "read %zu bytes", (size_t)LEN);
	memset(rc->buf, 0, LEN);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 2, 0, LEN, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rc_check(rc, rc->buf, LEN, 32, "read data");
	rc_step(rc, "send %u bytes", SEND_LEN);
	rc_fill(rc->buf + LEN, SEND_LEN, 33);
	rc_wr(rc, &w, IBV_WR_SEND, 3, LEN, SEND_LEN, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 3, IBV_WC_SUCCESS, IBV_WC_SEND);
	rc_read_counters(rc, t.after);
	check_offload(rc, &t);
	rc_sync(rc);
	return RC_PASS;
}

int main(int argc, char **argv)
{
	struct rc_opts o = rc_defaults(argc > 1 && !strcmp(argv[1], "--gso-off") ? "rc_gso_off"
										 : "rc_gso_gro");

	gso_off = argc > 1 && !strcmp(argv[1], "--gso-off");
	if (gso_off)
		setenv("URNIC_GSO", "0", 1);
	setenv("URNIC_TEST_PATH", "udp", 1); /* GSO is the UDP path's */
	o.buf_size = LEN + SEND_LEN + RC_GUARD;
	return rc_run(&o, server, client);
}
