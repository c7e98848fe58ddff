/* test_shm_stream: large packets reach a ring peer byte for byte. A payload from RING_STREAM_MIN
 * bytes up goes into the ring with non-temporal stores (net/shm.c, copy_to_ring): a head copied
 * plainly up to a 16-byte boundary of the record, 64-byte blocks streamed, a tail copied plainly,
 * then a fence before the seal. Packets of several iovecs, of lengths around the threshold and
 * up to the largest a ring carries, from sources at every offset within 16 bytes, each filled
 * with its own bytes, must arrive exactly as sent, in order. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "net/shm.h"
#include "check.h"

#define HDR_LEN 28 /* a BTH and a RETH, as a WRITE's first packet */

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* One packet of total bytes: the header, then the payload cut in `cuts` iovecs from src + off. */
static void send_packet(struct urnic_net *from, uint32_t to, const uint8_t *src, size_t off,
			uint32_t total, int cuts)
{
	struct urnic_txpkt p = {.daddr = to, .len = total};
	struct urnic_net_tally t = {0};
	size_t payload = total - HDR_LEN, at = 0;

	memcpy(p.hdr, src, HDR_LEN);
	p.iov[p.iovcnt++] = (struct iovec){.iov_base = p.hdr, .iov_len = HDR_LEN};
	for (int c = 0; c < cuts; c++) {
		size_t n = c == cuts - 1 ? payload - at : payload / (size_t)cuts + (size_t)c * 7;

		p.iov[p.iovcnt++] = (struct iovec){.iov_base = (void *)(src + HDR_LEN + off + at),
						   .iov_len = n};
		at += n;
	}
	CHECK(urnic_net_send(from, &p, 1, &t, NULL) == 1, "a packet of %u bytes not sent", total);
}

/* What the packet above must read: the header, then the payload bytes in one run. */
static void expect(uint8_t *want, const uint8_t *src, size_t off, uint32_t total)
{
	memcpy(want, src, HDR_LEN);
	memcpy(want + HDR_LEN, src + HDR_LEN + off, total - HDR_LEN);
}

int main(void)
{
	static const uint32_t totals[] = {HDR_LEN + 32767,	     HDR_LEN + 32768,
					  HDR_LEN + 32769,	     HDR_LEN + 40001,
					  HDR_LEN + 65536 - 5,	     HDR_LEN + 65536,
					  HDR_LEN + URNIC_SHM_MTU - 5, HDR_LEN + URNIC_SHM_MTU};
	struct urnic_net consumer, producer;
	struct urnic_net_tally t = {0};
	uint8_t *src = malloc(HDR_LEN + URNIC_SHM_MTU + 64), *want = malloc(HDR_LEN + URNIC_SHM_MTU);
	unsigned sent = 0;

	CHECK(src && want, "malloc");
	setenv("URNIC_SHM", "1", 1);
	CHECK(urnic_net_open(&consumer, addr_of("127.88.3.1")) == 0, "open the consumer");
	CHECK(urnic_net_open(&producer, addr_of("127.88.3.2")) == 0, "open the producer");
	for (size_t k = 0; k < sizeof(totals) / sizeof(totals[0]); k++)
		for (size_t off = 0; off < 16; off++)
			for (int cuts = 1; cuts <= 3; cuts++) {
				uint32_t total = totals[k];
				int n = 0;

				fill(src, HDR_LEN + URNIC_SHM_MTU + 64, sent);
				send_packet(&producer, consumer.addr, src, off, total, cuts);
				expect(want, src, off, total);
				for (int tries = 0; tries < 1000 && n == 0; tries++)
					n = urnic_net_recv(&consumer, consumer.rx_pkts, &t, 0);
				CHECK(n == 1 && consumer.rx_pkts[0].local,
				      "packet %u (%u bytes): %d received", sent, total, n);
				CHECK(consumer.rx_pkts[0].len == total &&
					      memcmp(consumer.rx_pkts[0].data, want, total) == 0,
				      "packet %u (%u bytes, source offset %zu, %d cuts) differs", sent,
				      total, off, cuts);
				urnic_net_recv_done(&consumer);
				sent++;
			}
	urnic_net_close(&producer);
	urnic_net_close(&consumer);
	free(src);
	free(want);
	printf("test_shm_stream: %u packets of %u-%u bytes, byte for byte\n", sent, totals[0],
	       totals[sizeof(totals) / sizeof(totals[0]) - 1]);
	return 0;
}
