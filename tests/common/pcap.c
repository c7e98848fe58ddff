/* pcap.c - reads classic libpcap capture files and takes Ethernet/IPv4/UDP frames apart. */
#include "pcap.h"

#include <stdlib.h>

#include <string.h>

#define PCAP_MAGIC_US 0xa1b2c3d4u /* microsecond timestamps */
#define PCAP_MAGIC_NS 0xa1b23c4du /* nanosecond timestamps */
#define PCAP_GLOBAL_LEN 24
#define PCAP_RECORD_LEN 16

static uint32_t get32(const uint8_t *p, bool swapped)
{
	uint32_t le =
	    (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;

	return swapped ? __builtin_bswap32(le) : le;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int test_pcap_open(struct test_pcap *p, const char *path)
{
	uint8_t h[PCAP_GLOBAL_LEN];
	uint32_t magic;

	p->f = fopen(path, "rb");
	if (!p->f)
		return -1;
	if (fread(h, 1, sizeof(h), p->f) != sizeof(h))
		goto bad;
	/* the magic is written in the writer's byte order; read it as little endian first */
	magic = get32(h, false);
	if (magic == PCAP_MAGIC_US || magic == PCAP_MAGIC_NS)
		p->swapped = false;
	else if (__builtin_bswap32(magic) == PCAP_MAGIC_US ||
		 __builtin_bswap32(magic) == PCAP_MAGIC_NS)
		p->swapped = true;
	else
		goto bad;
	p->linktype = get32(h + 20, p->swapped);
	return 0;
bad:
	fclose(p->f);
	p->f = NULL;
	return -1;
}

int test_pcap_next(struct test_pcap *p, uint8_t *buf, size_t cap, size_t *len)
{
	uint8_t r[PCAP_RECORD_LEN];
	size_t got = fread(r, 1, sizeof(r), p->f);
	uint32_t incl;

	if (got == 0 && feof(p->f))
		return 0;
	if (got != sizeof(r))
		return -1;
	incl = get32(r + 8, p->swapped);
	if (incl > cap || fread(buf, 1, incl, p->f) != incl)
		return -1;
	*len = incl;
	return 1;
}

void test_pcap_close(struct test_pcap *p)
{
	if (p->f)
		fclose(p->f);
	p->f = NULL;
}

int test_parse_udp4(const uint8_t *frame, size_t len, struct test_udp4 *out)
{
	size_t off = 14, ihl, ip_len, udp_len;
	uint16_t ethertype;
	const uint8_t *ip, *udp;

	if (len < off)
		return -1;
	ethertype = be16(frame + 12);
	if (ethertype == 0x8100) { /* 802.1Q */
		if (len < off + 4)
			return -1;
		ethertype = be16(frame + 16);
		off += 4;
	}
	if (ethertype != 0x0800 || len < off + 20)
		return -1;
	ip = frame + off;
	ihl = (size_t)(ip[0] & 0xf) * 4;
	ip_len = be16(ip + 2);
	if ((ip[0] >> 4) != 4 || ihl < 20 || ip_len < ihl + 8 || off + ip_len > len || ip[9] != 17)
		return -1;
	out->ip_frag = be16(ip + 6);
	if (out->ip_frag & 0x3fff) /* MF or a fragment offset */
		return -1;
	udp = ip + ihl;
	udp_len = be16(udp + 4);
	if (udp_len < 8 || ihl + udp_len > ip_len)
		return -1;
	out->tos = ip[1];
	out->ttl = ip[8];
	out->ip_id = be16(ip + 4);
	memcpy(&out->saddr, ip + 12, 4);
	memcpy(&out->daddr, ip + 16, 4);
	out->sport = be16(udp);
	out->dport = be16(udp + 2);
	out->payload = udp + 8;
	out->payload_len = udp_len - 8;
	return 0;
}

uint16_t *test_peer_hint(struct test_peers *p, uint32_t saddr)
{
	for (int i = 0; i < p->n; i++)
		if (p->peer[i].saddr == saddr)
			return &p->peer[i].id_hint;
	if (p->n == TEST_MAX_PEERS)
		abort();
	p->peer[p->n].saddr = saddr;
	p->peer[p->n].id_hint = 0;
	return &p->peer[p->n++].id_hint;
}
