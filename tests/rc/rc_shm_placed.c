/* rc_shm_placed: between ring peers, a packet of 32 KiB or more whose payload lies in the
 * sender's registered pages carries no payload: the receiver copies it once, straight from the
 * sender's pages (mem/share.c, net/shm.c). A WRITE, a READ and a SEND of 1 MiB + 5 bytes, and a
 * WRITE between offsets off any page or line, each land byte for byte with nothing past them,
 * and the receiver's counter shows the payloads read in place. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "common/stats.h"

#define LEN (RC_MIB + 5)
#define ODD_LEN 200003u
#define ODD_LOFF 3u
#define ODD_ROFF 4101u
#define SRC (4 * RC_MIB) /* READ source on the server, READ sink on the client */
#define MIN_PLACED (RC_MIB / URNIC_SHM_MTU) /* each full packet of the 1 MiB */

/* The in-place payloads counted since before. */
static uint64_t placed_since(struct rc *rc, const uint64_t *before)
{
	uint64_t now[URNIC_C_COUNT];

	rc_read_counters(rc, now);
	return now[URNIC_C_shm_rx_placed] - before[URNIC_C_shm_rx_placed];
}

static void check_landed(struct rc *rc, size_t off, size_t len, uint32_t seed, const char *what)
{
	rc_check(rc, rc->buf + off, len, seed, what);
	rc_check_const(rc, rc->buf + off + len, RC_GUARD, 0, "bytes past it");
	if (off)
		rc_check_const(rc, rc->buf + off - 1, 1, 0, "the byte before it");
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT];

	memset(rc->buf, 0, SRC);
	rc_fill(rc->buf + SRC, LEN, 2);
	rc_step(rc, "be written %zu bytes", (size_t)LEN);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc); /* written */
	check_landed(rc, 0, LEN, 1, "written data");
	RC_CHECK(rc, placed_since(rc, before) >= MIN_PLACED, "the WRITE's payloads were copied "
		 "into the ring (%llu in place)", (unsigned long long)placed_since(rc, before));

	rc_step(rc, "be written %u bytes at offset %u", ODD_LEN, ODD_ROFF);
	memset(rc->buf, 0, 2 * RC_MIB);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc);
	check_landed(rc, ODD_ROFF, ODD_LEN, 3, "written data");
	RC_CHECK(rc, placed_since(rc, before) >= 1, "no payload of the odd WRITE in place");

	rc_step(rc, "be read, then receive %zu bytes", (size_t)LEN);
	memset(rc->buf, 0, 2 * RC_MIB);
	rc_post_recv(rc, 0, 7, 0, LEN);
	rc_read_counters(rc, before);
	rc_sync(rc); /* READ done, receive posted */
	struct ibv_wc wc;

	rc_wait(rc, rc->rcq, 7, IBV_WC_RECV, &wc);
	RC_CHECK(rc, wc.byte_len == LEN, "byte_len %u, want %zu", wc.byte_len, (size_t)LEN);
	check_landed(rc, 0, LEN, 4, "received data");
	RC_CHECK(rc, placed_since(rc, before) >= MIN_PLACED, "the SEND's payloads were copied "
		 "into the ring (%llu in place)", (unsigned long long)placed_since(rc, before));
	rc_sync(rc);
	return RC_PASS;
}

static void write_one(struct rc *rc, size_t loff, size_t len, size_t roff, uint32_t seed)
{
	struct rc_wr w;

	rc_fill(rc->buf + loff, len, seed);
	rc_sync(rc);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, seed, loff, len, roff);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, seed, IBV_WC_RDMA_WRITE, NULL);
	rc_sync(rc);
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT];
	struct rc_wr w;

	rc_step(rc, "WRITE %zu bytes", (size_t)LEN);
	write_one(rc, 0, LEN, 0, 1);
	rc_step(rc, "WRITE %u bytes from offset %u to %u", ODD_LEN, ODD_LOFF, ODD_ROFF);
	write_one(rc, ODD_LOFF, ODD_LEN, ODD_ROFF, 3);

	rc_step(rc, "READ %zu bytes", (size_t)LEN);
	memset(rc->buf + SRC, 0, 2 * RC_MIB);
	rc_read_counters(rc, before);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 5, SRC, LEN, SRC);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 5, IBV_WC_RDMA_READ, NULL);
	check_landed(rc, SRC, LEN, 2, "read data");
	RC_CHECK(rc, placed_since(rc, before) >= MIN_PLACED, "the READ's payloads were copied "
		 "into the ring (%llu in place)", (unsigned long long)placed_since(rc, before));

	rc_step(rc, "SEND %zu bytes", (size_t)LEN);
	rc_fill(rc->buf, LEN, 4);
	rc_sync(rc);
	rc_wr(rc, &w, IBV_WR_SEND, 6, 0, LEN, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 6, IBV_WC_SEND, NULL);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_placed");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM_DIRECT", "0", 1); /* WRITEs and READs as packets (not one-sided) */
	o.buf_size = 8 * RC_MIB;
	return rc_run(&o, server, client);
}
