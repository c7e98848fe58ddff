/* fault.c - seeded receive-side fault injection: what a lossy, reordering, duplicating and
 * corrupting network would do to the packets, before the engine sees them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "net/fault.h"

static uint64_t next_rand(struct urnic_fault *f)
{
	/* xorshift64*: cheap, and the same seed gives the same run */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 2685821657736338717ull;
}

static bool chance(struct urnic_fault *f, double p)
{
	return p > 0 && (double)(next_rand(f) >> 11) / 9007199254740992.0 < p;
}

static const struct {
	const char *name;
	size_t off;
} knobs[] = {
	{"drop", offsetof(struct urnic_fault, drop)},
	{"dup", offsetof(struct urnic_fault, dup)},
	{"reorder", offsetof(struct urnic_fault, reorder)},
	{"corrupt", offsetof(struct urnic_fault, corrupt)},
};

static int set_knob(struct urnic_fault *f, const char *key, const char *val)
{
	char *end;

	if (strcmp(key, "seed") == 0) {
		f->rng = strtoull(val, &end, 0) | 1;
		return *end ? -EINVAL : 0;
	}
	if (strcmp(key, "depth") == 0) {
		unsigned long d = strtoul(val, &end, 10);

		if (*end || *val == '-' || d < 1 || d > URNIC_FAULT_DEPTH)
			return -EINVAL;
		f->depth = (unsigned)d;
		return 0;
	}
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		if (strcmp(key, knobs[i].name) != 0)
			continue;
		double p = strtod(val, &end);

		if (*end || p < 0 || p > 1)
			return -EINVAL;
		*(double *)(void *)((char *)f + knobs[i].off) = p;
		return 0;
	}
	return -EINVAL;
}

int urnic_fault_config(struct urnic_fault *f, const char *spec)
{
	char buf[256], *save = NULL;

	memset(f, 0, offsetof(struct urnic_fault, held));
	f->rng = 0x9e3779b97f4a7c15ull;
	f->depth = 1;
	atomic_store(&f->due_ns, UINT64_MAX);
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (!eq)
			return -EINVAL;
		*eq = 0;
		if (set_knob(f, kv, eq + 1))
			return -EINVAL;
	}
	f->on = true;
	return 0;
}

/* Keeps a copy of p back, to arrive after 1..depth later packets; false when every slot is
 * taken, or was emptied into this batch (its buffer is in pkts[] until the batch is done). */
static bool hold(struct urnic_fault *f, const struct urnic_rxpkt *p, unsigned busy, uint64_t now)
{
	for (unsigned s = 0; s < URNIC_FAULT_HELD; s++) {
		struct urnic_fault_held *h = &f->held[s];

		if ((f->held_mask | busy) & (1u << s))
			continue;
		memcpy(h->buf, p->data, p->len);
		h->pkt = *p;
		h->pkt.data = h->buf;
		h->wait = f->depth > 1 ? 1 + (unsigned)(next_rand(f) % f->depth) : 1;
		h->until_ns = now + URNIC_FAULT_HOLD_NS;
		f->held_mask |= 1u << s;
		return true;
	}
	return false;
}

/* Appends the held packets that arrive now, while pkts[] has room: those that have waited for
 * enough later packets (one more has just arrived if `arrived`), or their longest time. Returns
 * the count. */
static int release_due(struct urnic_fault *f, struct urnic_rxpkt *pkts, int out, int max,
		       unsigned *released, bool arrived, uint64_t now)
{
	for (unsigned s = 0; s < URNIC_FAULT_HELD; s++) {
		struct urnic_fault_held *h = &f->held[s];

		if (!(f->held_mask & (1u << s)))
			continue;
		if (arrived && h->wait > 0)
			h->wait--;
		if ((h->wait > 0 && now < h->until_ns) || out == max)
			continue;
		pkts[out++] = h->pkt;
		f->held_mask &= ~(1u << s);
		*released |= 1u << s;
	}
	return out;
}

static void note_due(struct urnic_fault *f)
{
	uint64_t due = UINT64_MAX;

	for (unsigned s = 0; s < URNIC_FAULT_HELD; s++)
		if ((f->held_mask & (1u << s)) && f->held[s].until_ns < due)
			due = f->held[s].until_ns;
	atomic_store_explicit(&f->due_ns, due, memory_order_relaxed);
}

uint64_t urnic_fault_due_ns(const struct urnic_fault *f)
{
	return atomic_load_explicit(&f->due_ns, memory_order_relaxed);
}

int urnic_fault_apply(struct urnic_fault *f, struct urnic_rxpkt *pkts, int n, int max)
{
	struct urnic_rxpkt *in = f->in;
	int out = 0, ndup = 0;
	unsigned released = 0; /* slots emptied into pkts[]: their buffers are in use */
	uint64_t now = urnic_mono_ns();

	memcpy(in, pkts, sizeof(*pkts) * (size_t)n);
	for (int i = 0; i < n; i++) {
		struct urnic_rxpkt p = in[i];

		if (chance(f, f->drop)) {
			f->dropped++;
			continue;
		}
		if (p.len && chance(f, f->corrupt)) {
			f->corrupted++;
			if (p.local) /* no ICRC on a ring: corruption is a drop the ICRC would make */
				continue;
			p.data[next_rand(f) % p.len] ^= (uint8_t)(1u << (next_rand(f) % 8));
		}
		if (p.len <= URNIC_RX_BUF_LEN && chance(f, f->reorder) &&
		    hold(f, &p, released, now)) {
			f->reordered++;
			continue;
		}
		if (out == max) { /* duplicates filled the batch: the rest is lost, as on a wire */
			f->dropped++;
			continue;
		}
		pkts[out++] = p;
		out = release_due(f, pkts, out, max, &released, true, now);
		if (out < max && ndup < URNIC_FAULT_DUPS && p.len <= URNIC_RX_BUF_LEN &&
		    chance(f, f->dup)) {
			memcpy(f->dup_buf[ndup], p.data, p.len);
			pkts[out] = p;
			pkts[out++].data = f->dup_buf[ndup++];
			f->duplicated++;
		}
	}
	out = release_due(f, pkts, out, max, &released, false, now);
	note_due(f);
	return out;
}
