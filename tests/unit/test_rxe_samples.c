/* test_rxe_samples - urnic's decoder and ICRC against real Linux rxe packets, with no VM.
 *
 *   test_rxe_samples SAMPLE.pcap...
 *
 * Each tests/data/rxe-*.pcap was cut from an interop run by tests/interop/samples.sh, which also
 * wrote SAMPLE.fields: what Wireshark's dissector read from every packet (one comma-separated line
 * each, in the column order of FIELDS below; empty where the packet has no such header). For every
 * packet urnic's opcode table must know the opcode and its headers must fit; every header field
 * urnic reads must equal Wireshark's; the ICRC urnic computes over the real IP header must equal
 * the captured one; and the receive check, which predicts the peer's IP ID, must accept it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "pcap.h"
#include "wire/wire.h"

#define MAX_FRAME 65536

enum field {
	F_OPCODE,
	F_DESTQP,
	F_PSN,
	F_ACKREQ,
	F_PADCNT,
	F_RETH_VA, /* Wireshark shows the AtomicETH's address and key under the RETH's names */
	F_RETH_RKEY,
	F_RETH_LEN,
	F_SWAP_ADD,
	F_COMPARE,
	F_AETH_SYNDROME,
	F_AETH_MSN,
	F_ATOMIC_ORIG,
	F_DETH_QKEY,
	F_DETH_SRCQP,
	F_ICRC,
	N_FIELDS
};

struct wireshark_view {
	bool has[N_FIELDS];
	uint64_t v[N_FIELDS];
};

/* One line of SAMPLE.fields; false at the end of the file. Comment lines start with '#'. */
static bool read_view(FILE *f, struct wireshark_view *w)
{
	char line[1024];

	do {
		if (!fgets(line, sizeof(line), f))
			return false;
	} while (line[0] == '#');
	*w = (struct wireshark_view){0};
	char *rest = line, *tok;

	for (int i = 0; i < N_FIELDS && (tok = strsep(&rest, ",\n")); i++) {
		if (!*tok)
			continue;
		w->has[i] = true;
		w->v[i] = strtoull(tok, NULL, 0);
	}
	return true;
}

/* Wireshark's view against urnic's reading of the same bytes, header by header. */
static void compare_headers(const char *name, unsigned n, const uint8_t *bth, size_t len,
			    const struct wireshark_view *w)
{
	const struct urnic_opcode_info *o = urnic_op(bth_opcode(bth));
	struct {
		enum field f;
		bool present;
		uint64_t urnic;
	} got[] = {
	    {F_OPCODE, true, bth_opcode(bth)},
	    {F_DESTQP, true, bth_dqpn(bth)},
	    {F_PSN, true, bth_psn(bth)},
	    {F_ACKREQ, true, bth_ackreq(bth)},
	    {F_PADCNT, true, bth_padcnt(bth)},
	    {F_RETH_VA, o->reth || o->atomiceth,
	     o->reth	    ? reth_va(bth + o->reth)
	     : o->atomiceth ? atomiceth_va(bth + o->atomiceth)
			    : 0},
	    {F_RETH_RKEY, o->reth || o->atomiceth,
	     o->reth	    ? reth_rkey(bth + o->reth)
	     : o->atomiceth ? atomiceth_rkey(bth + o->atomiceth)
			    : 0},
	    {F_RETH_LEN, o->reth != 0, o->reth ? reth_len(bth + o->reth) : 0},
	    {F_SWAP_ADD, o->atomiceth != 0,
	     o->atomiceth ? atomiceth_swap_add(bth + o->atomiceth) : 0},
	    {F_COMPARE, o->atomiceth != 0,
	     o->atomiceth ? atomiceth_compare(bth + o->atomiceth) : 0},
	    {F_AETH_SYNDROME, o->aeth != 0, o->aeth ? aeth_syndrome(bth + o->aeth) : 0},
	    {F_AETH_MSN, o->aeth != 0, o->aeth ? aeth_msn(bth + o->aeth) : 0},
	    {F_ATOMIC_ORIG, o->atomicacketh != 0,
	     o->atomicacketh ? atomicacketh_orig(bth + o->atomicacketh) : 0},
	    {F_DETH_QKEY, o->deth != 0, o->deth ? deth_qkey(bth + o->deth) : 0},
	    {F_DETH_SRCQP, o->deth != 0, o->deth ? deth_srcqp(bth + o->deth) : 0},
	};

	EXPECT(o->mask && o->hdr_len + bth_padcnt(bth) + URNIC_ICRC_LEN <= len,
	       "%s packet %u: opcode %u unknown to urnic or its headers do not fit %zu bytes", name,
	       n, bth_opcode(bth), len);
	if (!o->mask)
		return;
	for (size_t i = 0; i < sizeof(got) / sizeof(got[0]); i++) {
		enum field f = got[i].f;

		EXPECT(got[i].present == w->has[f],
		       "%s packet %u (%s): field %d %s for urnic, %s for Wireshark", name, n,
		       o->name, f, got[i].present ? "present" : "absent",
		       w->has[f] ? "present" : "absent");
		EXPECT(!w->has[f] || !got[i].present || got[i].urnic == w->v[f],
		       "%s packet %u (%s): field %d urnic reads %#" PRIx64 ", Wireshark %#" PRIx64,
		       name, n, o->name, f, got[i].urnic, w->v[f]);
	}
}

static void check_icrc(const char *name, unsigned n, const struct test_udp4 *u,
		       const struct wireshark_view *w, uint16_t *hint)
{
	struct urnic_ip4_flow flow = {
	    .saddr = u->saddr, .daddr = u->daddr, .sport = u->sport, .dport = u->dport};
	size_t body = u->payload_len - URNIC_ICRC_LEN;
	struct iovec iov = {.iov_base = (void *)u->payload, .iov_len = body};
	uint8_t icrc[4];

	urnic_icrc_compute_ipid(&flow, u->ip_id, u->ip_frag, &iov, 1, body, icrc);
	EXPECT(!memcmp(icrc, u->payload + body, 4),
	       "%s packet %u: urnic's ICRC differs (IP ID %#x)", name, n, u->ip_id);
	EXPECT(w->has[F_ICRC] && urnic_get32(u->payload + body) == (uint32_t)w->v[F_ICRC],
	       "%s packet %u: the ICRC Wireshark read is not the one in the packet", name, n);
	EXPECT(urnic_icrc_check(&flow, u->payload, u->payload_len, hint),
	       "%s packet %u: the receive check rejects it (IP ID %#x)", name, n, u->ip_id);
}

static unsigned check_sample(const char *path)
{
	char fields_path[4096];
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t stem = strlen(path) - (strlen(path) > 5 ? 5 : 0); /* without ".pcap" */
	struct test_pcap p;
	struct test_peers peers = {0};
	unsigned n = 0;
	static uint8_t frame[MAX_FRAME];
	size_t len;
	struct wireshark_view w;

	snprintf(fields_path, sizeof(fields_path), "%.*s.fields", (int)stem, path);
	FILE *f = fopen(fields_path, "r");

	if (test_pcap_open(&p, path) || !f) {
		printf("FAIL: cannot open %s or %s\n", path, fields_path);
		test_failures++;
		return 0;
	}
	while (test_pcap_next(&p, frame, sizeof(frame), &len) == 1) {
		struct test_udp4 u;

		n++;
		if (test_parse_udp4(frame, len, &u) || u.dport != 4791) {
			EXPECT(0, "%s packet %u: not RoCEv2", name, n);
			continue;
		}
		if (!read_view(f, &w)) {
			EXPECT(0, "%s: %s has no line for packet %u", name, fields_path, n);
			break;
		}
		compare_headers(name, n, u.payload, u.payload_len, &w);
		check_icrc(name, n, &u, &w, test_peer_hint(&peers, u.saddr));
	}
	EXPECT(!read_view(f, &w), "%s: %s has more lines than the capture has packets", name,
	       fields_path);
	EXPECT(n > 0, "%s: no packet", name);
	fclose(f);
	test_pcap_close(&p);
	printf("%s: %u rxe packets decoded and ICRC-checked\n", name, n);
	return n;
}

int main(int argc, char **argv)
{
	unsigned total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SAMPLE.pcap...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		total += check_sample(argv[i]);
	printf("%u packets in %d samples, %d test_failures\n", total, argc - 1, test_failures);
	return test_failures ? 1 : 0;
}
