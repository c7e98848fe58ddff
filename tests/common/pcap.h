/* pcap.h - a minimal reader of classic libpcap files, and an Ethernet/IPv4/UDP frame parser. */
#ifndef URNIC_TEST_PCAP_H
#define URNIC_TEST_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct test_pcap {
	FILE *f;
	bool swapped;	   /* file written on a host of the other byte order */
	uint32_t linktype; /* 1: Ethernet */
};

/* 0, or -1 if the file cannot be opened or is not a classic pcap file. */
int test_pcap_open(struct test_pcap *p, const char *path);
/* Reads the next frame into buf (cap bytes). 1: a frame (*len bytes), 0: end of file, -1: error. */
int test_pcap_next(struct test_pcap *p, uint8_t *buf, size_t cap, size_t *len);
void test_pcap_close(struct test_pcap *p);

/* A UDP datagram in an IPv4 packet in an Ethernet frame (an 802.1Q tag is skipped). */
struct test_udp4 {
	uint32_t saddr, daddr;	 /* network order */
	uint16_t sport, dport;	 /* host order */
	uint16_t ip_id, ip_frag; /* host order; ip_frag holds the flags too */
	uint8_t tos, ttl;
	const uint8_t *payload; /* points into the frame */
	size_t payload_len;
};

/* 0, or -1 if the frame is not an unfragmented Ethernet/IPv4/UDP frame that fits in len. */
int test_parse_udp4(const uint8_t *frame, size_t len, struct test_udp4 *out);

/* What a receiver keeps per sender for the ICRC check: its IP ID prediction (0: none yet). */
#define TEST_MAX_PEERS 4
struct test_peers {
	int n;
	struct {
		uint32_t saddr;
		uint16_t id_hint;
	} peer[TEST_MAX_PEERS];
};

/* The sender's hint, a new one (0) for a sender not seen before; aborts past TEST_MAX_PEERS. */
uint16_t *test_peer_hint(struct test_peers *p, uint32_t saddr);

#endif
