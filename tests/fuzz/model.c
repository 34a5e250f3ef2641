// SPDX-License-Identifier: GPL-2.0
/*
 * The oracle of sockmap_fuzz, receiving side: streams, lanes and the
 * check of every read.
 *
 * Each socket sends one stream at a time (a new one when it is created,
 * and when the model lost track of where its bytes went, see sim.c). Byte
 * o of stream sid is (slot << 5) | pattern(seed, sid, o): the top three
 * bits name the sending socket's slot, the low five a pseudo-random
 * pattern. What a sender's bytes may arrive at a receiver by one path
 * (redirected to its ingress queue, or over TCP) is one lane: byte ranges
 * of one stream, in order. A read must be a concatenation of pieces, each
 * the next bytes of one lane; lanes interleave freely, except that bytes
 * that came over TCP may not overtake bytes redirected to the receiver's
 * ingress queue before they were sent. A lossy lane (teardown, reset) may
 * skip bytes, never reorder them. The decomposition of a read is searched
 * depth first (two lanes of one slot can share a byte value), within a
 * step budget.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"

struct stream {
	int slot;
	bool lenient;	/* the model lost track: its bytes are not checked */
};

static struct stream *streams;
static int nstreams, streams_cap;
static unsigned int lenient_slots;	/* slots with a lenient stream */
static uint64_t verified;

#define MAX_PIECES	1024
#define DFS_BUDGET	20000
#define GEN_BLOCK	4096
#define SKIP_NEEDLE	8

struct piece {
	int lane;
	uint64_t skip, len;
};

void model_reset(void)
{
	nstreams = 0;
	lenient_slots = 0;
	verified = 0;
}

uint64_t model_verified(void)
{
	return verified;
}

int stream_new(int slot)
{
	if (nstreams == streams_cap) {
		streams_cap = streams_cap ? 2 * streams_cap : 64;
		streams = realloc(streams, streams_cap * sizeof(*streams));
		if (!streams)
			abort();
	}
	streams[nstreams].slot = slot;
	streams[nstreams].lenient = false;
	return nstreams++;
}

bool stream_lenient(int sid)
{
	return streams[sid].lenient;
}

bool lost_track_op;

void stream_set_lenient(int sid)
{
	lost_track_op = true;
	streams[sid].lenient = true;
	lenient_slots |= 1u << streams[sid].slot;
}

void stream_gen(int sid, uint64_t off, uint8_t *buf, size_t len)
{
	uint8_t tag = streams[sid].slot << 5;
	uint64_t key = mix64(run_seed * 0x9E3779B97F4A7C15ULL + sid), w = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		uint64_t o = off + i;

		if (i == 0 || (o & 7) == 0)
			w = mix64(key ^ (o >> 3));
		buf[i] = tag | ((w >> ((o & 7) * 8)) & 31);
	}
}

/* ---- lanes ---- */

struct lane *lane_get(struct fsock *r, int sid, int path)
{
	struct lane *l;
	int i;

	for (i = 0; i < r->nlanes; i++)
		if (r->lanes[i].sid == sid && r->lanes[i].path == path)
			return &r->lanes[i];
	if (r->nlanes == MAX_LANES) {
		/* Reuse an empty one. */
		for (i = 0; i < r->nlanes; i++)
			if (r->lanes[i].head == r->lanes[i].n)
				break;
		if (i == r->nlanes)
			abort();
	} else {
		i = r->nlanes++;
	}
	l = &r->lanes[i];
	l->sid = sid;
	l->slot = streams[sid].slot;
	l->path = path;
	/* Behind a FIN message nothing is read (model_eof()). */
	l->lossy = r->fin_read;
	l->head = l->n = 0;
	l->done = 0;
	return l;
}

void lane_append(struct lane *l, uint64_t off, uint64_t len, uint64_t seq, bool held)
{
	struct range *last = l->n > l->head ? &l->r[l->n - 1] : NULL;

	if (!len)
		return;
	if (last && last->off + last->len == off && last->seq == seq && last->held == held) {
		last->len += len;
		return;
	}
	if (l->head == l->n)
		l->head = l->n = 0, l->done = 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->r = realloc(l->r, l->cap * sizeof(*l->r));
		if (!l->r)
			abort();
	}
	l->r[l->n++] = (struct range){ off, len, seq, held };
}

uint64_t lane_pending(const struct lane *l)
{
	uint64_t n = 0;
	int i;

	for (i = l->head; i < l->n; i++)
		n += l->r[i].len;
	return n - l->done;
}

void lane_clear(struct lane *l)
{
	l->head = l->n = 0;
	l->done = 0;
}

/* Expected bytes [k, k + n) of the lane's unread bytes; returns how many
 * there are (fewer at its end).
 */
static size_t lane_expect(const struct lane *l, uint64_t k, uint8_t *out, size_t n)
{
	size_t got = 0;
	int i;

	k += l->done;
	for (i = l->head; i < l->n && got < n; i++) {
		const struct range *r = &l->r[i];
		size_t take;

		if (k >= r->len) {
			k -= r->len;
			continue;
		}
		take = r->len - k < n - got ? r->len - k : n - got;
		stream_gen(l->sid, r->off + k, out + got, take);
		got += take;
		k = 0;
	}
	return got;
}

/* How many of buf[0, n) are the lane's unread bytes from k on. */
static size_t match_len(const struct lane *l, uint64_t k, const uint8_t *buf, size_t n)
{
	uint8_t want[GEN_BLOCK];
	size_t m = 0, got, i;

	if (streams[l->sid].lenient) {
		while (m < n && buf[m] >> 5 == l->slot)
			m++;
		return m;
	}
	while (m < n) {
		got = lane_expect(l, k + m, want, n - m < GEN_BLOCK ? n - m : GEN_BLOCK);
		if (!got)
			break;
		for (i = 0; i < got; i++)
			if (want[i] != buf[m + i])
				return m + i;
		m += got;
	}
	return m;
}

/* A lossy lane: the first place from k on (within the next 8 MB) where
 * buf[0, min(n, 16)) matches; -1 if none.
 */
static int64_t lossy_find(const struct lane *l, uint64_t k, const uint8_t *buf, size_t n)
{
	static uint8_t hay[65536 + 16];
	uint64_t pos = k, limit = k + (8 << 20), at = 0, done = l->done, len;
	size_t needle = n < 16 ? n : 16, got;
	uint8_t *p;
	int i;

	/* A gap is most likely whole ranges (a teardown took whole
	 * messages): the start of a later range matches any length, and
	 * a range shorter than the needle matches whole (a later send's
	 * bytes may follow it in buf).
	 */
	for (i = l->head; i < l->n; i++, done = 0) {
		len = l->r[i].len - done;
		if (at > k && match_len(l, at, buf, needle) >= (len < needle ? len : needle))
			return at - k;
		at += len;
	}
	if (needle < SKIP_NEEDLE)
		return -1;
	while (pos < limit) {
		got = lane_expect(l, pos, hay, sizeof(hay));
		if (got < needle)
			return -1;
		p = memmem(hay, got, buf, needle);
		if (p)
			return pos + (p - hay) - k;
		pos += got - needle + 1;
	}
	return -1;
}

struct search {
	struct fsock *r;
	const uint8_t *buf;
	size_t n;
	uint64_t used[MAX_LANES], wild;
	struct piece pc[MAX_PIECES];
	int npc, budget;
};

static bool same_slot_others(struct search *s, int lane, int slot)
{
	int i;

	for (i = 0; i < s->r->nlanes; i++)
		if (i != lane && s->r->lanes[i].slot == slot &&
		    (streams[s->r->lanes[i].sid].lenient || lane_pending(&s->r->lanes[i]) > s->used[i]))
			return true;
	return false;
}

struct cand {
	int lane;
	uint64_t skip, m;
	int rank;		/* 0 strict at its head, 1 lossy skipping, 2 lenient, 3 a whole run */
	uint64_t order;		/* at a tie, the lower first (lane_order()) */
	bool lossy;		/* its pending bytes may never come */
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank - y->rank;
	if (x->m != y->m)
		return x->m < y->m ? 1 : -1;
	/* Bytes match by their low five bits only: a short read can fit
	 * both of a sender's lanes. A lossy lane's bytes may be gone (a
	 * teardown took them), the other's will come; else lane_order().
	 */
	if (x->lossy != y->lossy)
		return x->lossy - y->lossy;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Which of two lanes that fit a read equally a reader likely reads from
 * first: without a verdict program tcp_bpf reads ingress_msg before the
 * receive queue (ingress first); with one, TCP bytes join ingress_msg too,
 * as the verdict takes them, mostly in the order they were sent (the
 * operation that sent the lane's next byte, earlier first).
 */
static uint64_t lane_order(const struct fsock *r, const struct lane *l, uint64_t k)
{
	int i;

	if (!r->verdict_prog)
		return l->path == P_TCP;
	k += l->done;
	for (i = l->head; i < l->n && k >= l->r[i].len; i++)
		k -= l->r[i].len;
	return i < l->n ? l->r[i].seq : UINT64_MAX;
}

/* The longest tail of buf[0, n) that can be the next bytes of a lane of
 * @slot the model still checks (neither lenient nor done); 0 if none.
 */
static size_t strict_tail(const struct search *s, const uint8_t *buf, size_t n, int slot)
{
	uint8_t head[SKIP_NEEDLE];
	size_t best = 0, k, h, p;
	int li;

	for (li = 0; li < s->r->nlanes; li++) {
		const struct lane *l = &s->r->lanes[li];
		uint64_t left;

		if (l->slot != slot || streams[l->sid].lenient || lane_pending(l) <= s->used[li])
			continue;
		left = lane_pending(l) - s->used[li];
		h = lane_expect(l, s->used[li], head, sizeof(head));
		/* Where, from the start on, the rest of buf is the lane's next
		 * bytes; a cheap look at the first few of them before each
		 * full comparison.
		 */
		for (p = 1; p < n && n - p > best; p++) {
			k = n - p;
			if (k > left || memcmp(buf + p, head, k < h ? k : h))
				continue;
			if (match_len(l, s->used[li], buf + p, k) == k) {
				best = k;
				break;
			}
		}
	}
	return best;
}

/* Candidates for a run of @m bytes at buf[i] that lenient stream bytes
 * (lane @lane, or -1: of no lane) may be: all of it, and first the run
 * without the tail that a lane still checked can be, sent after them.
 * Return: the number of candidates added at @c.
 */
static int lenient_cands(const struct search *s, size_t i, uint64_t m, int lane, struct cand *c)
{
	uint64_t tail = strict_tail(s, s->buf + i, m, s->buf[i] >> 5);
	int nc = 0;

	if (tail)
		c[nc++] = (struct cand){ lane, 0, m - tail, 2, 0, false };
	c[nc++] = (struct cand){ lane, 0, m, 3, 0, false };
	return nc;
}

/* Lanes whose next bytes buf[i..] can be: at their head, longest first
 * (at equal length, one not lossy first, then by lane_order()); then
 * lossy lanes after a gap (at least SKIP_NEEDLE bytes must match there,
 * so that a chance match of a few bytes is not taken for one); then
 * lenient streams.
 */
static int candidates(struct search *s, size_t i, struct cand *c)
{
	int slot = s->buf[i] >> 5, li, nc = 0;

	for (li = 0; li < s->r->nlanes; li++) {
		struct lane *l = &s->r->lanes[li];
		bool lenient = streams[l->sid].lenient;
		uint64_t m, skip = 0;
		int64_t at;

		if (l->slot != slot || (!lenient && lane_pending(l) <= s->used[li]))
			continue;
		m = match_len(l, s->used[li], s->buf + i, s->n - i);
		if (!m && l->lossy && !lenient) {
			at = lossy_find(l, s->used[li], s->buf + i, s->n - i);
			if (at > 0) {
				skip = at;
				m = match_len(l, s->used[li] + skip, s->buf + i, s->n - i);
			}
		}
		if (!m)
			continue;
		if (lenient)
			nc += lenient_cands(s, i, m, li, c + nc);
		else
			c[nc++] = (struct cand){ li, skip, m, skip ? 1 : 0,
						 lane_order(s->r, l, s->used[li] + skip), l->lossy };
	}
	if (!nc && (lenient_slots & (1u << slot))) {
		/* A lenient stream may have sent these, wherever. */
		uint64_t m = 0;

		while (i + m < s->n && s->buf[i + m] >> 5 == slot)
			m++;
		nc += lenient_cands(s, i, m, -1, c + nc);
	}
	qsort(c, nc, sizeof(*c), cand_cmp);
	return nc;
}

static bool dfs(struct search *s, size_t i)
{
	struct cand c[2 * MAX_LANES + 2];	/* a lenient lane may give two */
	int nc, k;

	if (i == s->n)
		return true;
	if (--s->budget <= 0 || s->npc == MAX_PIECES)
		return false;
	nc = candidates(s, i, c);
	for (k = 0; k < nc; k++) {
		uint64_t len, *used = c[k].lane >= 0 ? &s->used[c[k].lane] : &s->wild;
		bool others = c[k].lane < 0 || nc > 1 ||
			      same_slot_others(s, c[k].lane, s->buf[i] >> 5);

		for (len = c[k].m; len >= 1; len--) {
			if (len < c[k].m && !others)
				break;
			s->pc[s->npc++] = (struct piece){ c[k].lane, c[k].skip, len };
			*used += c[k].skip + len;
			if (dfs(s, i + len))
				return true;
			*used -= c[k].skip + len;
			s->npc--;
			if (s->budget <= 0)
				return false;
		}
	}
	return false;
}

/* With -vv: the lane each part of a read was taken from. */
static void trace_pieces(const struct fsock *r, const struct search *s)
{
	char line[512] = "";
	size_t off = 0;
	int k;

	for (k = 0; k < s->npc && off < sizeof(line); k++) {
		const struct piece *p = &s->pc[k];
		const struct lane *l = p->lane >= 0 ? &r->lanes[p->lane] : NULL;

		if (l)
			off += snprintf(line + off, sizeof(line) - off, " s%d/%s +%llu", l->sid,
					l->path == P_TCP ? "tcp" : "ing", (unsigned long long)p->len);
		else
			off += snprintf(line + off, sizeof(line) - off, " lenient +%llu",
					(unsigned long long)p->len);
		if (p->skip && off < sizeof(line))
			off += snprintf(line + off, sizeof(line) - off, " after a gap of %llu",
					(unsigned long long)p->skip);
	}
	trace("  model: slot %d read:%s\n", r->slot, line);
}

/* Where do buf's first bytes belong? For the failure message. */
static void locate(const uint8_t *buf, size_t n, char *out, size_t len)
{
	static uint8_t hay[65536 + 16];
	size_t needle = n < 16 ? n : 16;
	int sid, slot = buf[0] >> 5;

	snprintf(out, len, "not found in any stream of slot %d", slot);
	for (sid = 0; sid < nstreams; sid++) {
		uint64_t pos;

		if (streams[sid].slot != slot)
			continue;
		for (pos = 0; pos < (64ULL << 20); pos += sizeof(hay) - needle) {
			uint8_t *p;

			stream_gen(sid, pos, hay, sizeof(hay));
			p = memmem(hay, sizeof(hay), buf, needle);
			if (p) {
				snprintf(out, len, "looks like stream %d offset %llu", sid,
					 (unsigned long long)(pos + (p - hay)));
				return;
			}
			/* Streams are short: stop past what any sent. */
			if (pos > (8ULL << 20))
				break;
		}
	}
}

static void describe_mismatch(struct fsock *r, const uint8_t *buf, size_t n)
{
	uint64_t used[MAX_LANES] = { 0 };
	char where[128], heads[512] = "";
	size_t i = 0, m, best;
	int li, bl, off = 0;

	/* Greedy, longest piece first: the first byte no lane explains. */
	while (i < n) {
		for (best = 0, bl = -1, li = 0; li < r->nlanes; li++) {
			struct lane *l = &r->lanes[li];

			if (l->slot != buf[i] >> 5 || lane_pending(l) <= used[li])
				continue;
			m = match_len(l, used[li], buf + i, n - i);
			if (m > best)
				best = m, bl = li;
		}
		if (bl < 0)
			break;
		used[bl] += best;
		i += best;
	}
	if (i == n)
		i = 0;	/* only the search's order failed */
	for (li = 0; li < r->nlanes && off < (int)sizeof(heads) - 80; li++) {
		struct lane *l = &r->lanes[li];

		if (!lane_pending(l))
			continue;
		off += snprintf(heads + off, sizeof(heads) - off, " [s%d/%s%s next %llu, %llu pending]",
				l->sid, l->path == P_ING ? "ing" : "tcp", l->lossy ? ",lossy" : "",
				(unsigned long long)(l->r[l->head].off + l->done),
				(unsigned long long)lane_pending(l));
	}
	locate(buf + i, n - i, where, sizeof(where));
	fail("corrupt", "slot %d read %zu bytes: byte %zu (0x%02x) fits no lane: %s; lanes:%s",
	     r->slot, n, i, buf[i], where, heads[0] ? heads : " none");
}

/* TCP bytes read before bytes redirected to this receiver's ingress
 * queue before the TCP bytes were sent?
 */
static bool tcp_overtakes(struct fsock *r, struct lane *tl)
{
	uint64_t seq = tl->r[tl->head].seq;
	int i;

	for (i = 0; i < r->nlanes; i++) {
		struct lane *l = &r->lanes[i];

		if (l->path != P_ING || l->lossy || l->head == l->n || streams[l->sid].lenient)
			continue;
		if (l->r[l->head].seq < seq) {
			fail("order", "slot %d: TCP bytes of stream %d (op %llu) read before stream %d's "
			     "redirected bytes of op %llu", r->slot, tl->sid,
			     (unsigned long long)seq, l->sid, (unsigned long long)l->r[l->head].seq);
			return true;
		}
	}
	return false;
}

static void consume(struct lane *l, uint64_t n)
{
	while (n && l->head < l->n) {
		struct range *r = &l->r[l->head];
		uint64_t left = r->len - l->done;

		if (n < left) {
			l->done += n;
			return;
		}
		n -= left;
		l->head++;
		l->done = 0;
	}
}

/* Check what a read returned; unless peek, the bytes are consumed. */
bool model_read(struct fsock *r, const uint8_t *buf, size_t n, bool peek)
{
	static struct search s;
	int k;

	memset(&s, 0, sizeof(s));
	s.r = r;
	s.buf = buf;
	s.n = n;
	s.budget = DFS_BUDGET;
	if (!dfs(&s, 0)) {
		if (s.budget <= 0)
			fail("ambiguous", "slot %d: read of %zu bytes: no decomposition within the budget",
			     r->slot, n);
		else
			describe_mismatch(r, buf, n);
		return false;
	}
	if (trace_verbose > 1)
		trace_pieces(r, &s);
	if (peek)
		return true;
	for (k = 0; k < s.npc; k++) {
		struct lane *l;

		if (s.pc[k].lane < 0)
			continue;
		l = &r->lanes[s.pc[k].lane];
		if (streams[l->sid].lenient)
			continue;
		consume(l, s.pc[k].skip);
		if (l->path == P_TCP && tcp_overtakes(r, l))
			return false;
		consume(l, s.pc[k].len);
		verified += s.pc[k].len;
	}
	return true;
}

/* Would EOF be allowed if the TCP bytes due were not? */
static bool eof_ok_but_tcp(struct fsock *r)
{
	int i;

	for (i = 0; i < r->nlanes; i++) {
		struct lane *l = &r->lanes[i];

		if (l->path == P_ING && !l->lossy && !streams[l->sid].lenient && l->head < l->n &&
		    (!r->verdict_prog || l->r[l->head].seq < r->fin_seq))
			return false;
	}
	return true;
}

void model_expect(struct fsock *r, struct expect *e)
{
	int i, j;

	memset(e, 0, sizeof(*e));
	for (i = 0; i < r->nlanes; i++) {
		struct lane *l = &r->lanes[i];
		uint64_t done = l->done;

		for (j = l->head; j < l->n; j++, done = 0) {
			uint64_t left = l->r[j].len - done;

			e->total += left;
			if (l->lossy || streams[l->sid].lenient)
				e->lossy += left;
			else if (l->path == P_ING)
				e->ing += left;
			else if (l->r[j].held)
				e->held += left;
			else
				e->tcp += left;
		}
	}
	/* EOF: the peer sent a FIN and everything due before it was read.
	 * Without a verdict program, redirected bytes are read before EOF
	 * whenever they came; with one, the FIN queues behind what came
	 * before it, so bytes redirected after it may follow the EOF.
	 */
	e->eof_ok = r->peer_fin || r->rst_ok;
	if (r->peer_fin && !r->rst_ok) {
		for (i = 0; i < r->nlanes && e->eof_ok; i++) {
			struct lane *l = &r->lanes[i];

			if (l->lossy || streams[l->sid].lenient || l->head == l->n)
				continue;
			if (l->path == P_TCP || !r->verdict_prog || l->r[l->head].seq < r->fin_seq)
				e->eof_ok = false;
		}
	}
	e->eof_due = r->peer_fin && e->eof_ok && !e->ing && !e->tcp;
}

void model_all_lossy(struct fsock *r)
{
	int i;

	for (i = 0; i < r->nlanes; i++)
		r->lanes[i].lossy = true;
}

/* A read returned 0 (EOF) or a reset. */
void model_eof(struct fsock *r, bool reset)
{
	struct expect e;
	int i;

	model_expect(r, &e);
	if (!reset && !e.eof_ok && r->had_verdict && r->peer_fin && eof_ok_but_tcp(r)) {
		/* Base: a FIN that took the verdict's direct way overtakes
		 * skbs still in the psock's own queue (ingress_skb, its
		 * work): EOF, then the bytes.
		 */
		note_known("eof-before-verdict-skbs", "slot %d: EOF with %llu TCP bytes due",
			   r->slot, (unsigned long long)(e.tcp + e.held));
		e.eof_ok = true;
	}
	if (reset ? !r->rst_ok : !e.eof_ok) {
		fail("eof", "slot %d: %s with %llu redirected and %llu TCP bytes due%s", r->slot,
		     reset ? "connection reset" : "EOF", (unsigned long long)e.ing,
		     (unsigned long long)(e.tcp + e.held),
		     r->peer_fin ? "" : ", and the peer sent no FIN");
		return;
	}
	if (reset) {
		/* What TCP still had for it is gone. */
		for (i = 0; i < r->nlanes; i++)
			if (r->lanes[i].path == P_TCP)
				lane_clear(&r->lanes[i]);
	}
	if (r->had_verdict && !r->fin_read) {
		/* Base: the FIN's message stays at the head of the ingress
		 * queue (tcp_bpf_recvmsg_parser() returns 0 on it without
		 * dequeuing it): what comes behind it is never read.
		 */
		r->fin_read = true;
		model_all_lossy(r);
	}
}

/* The reader looked at its queues (read, peek, FIONREAD): the next
 * arrival must wake it, by the series' rule and by TCP's.
 */
void model_looked(struct fsock *r)
{
	r->told = false;
	r->tcp_async_since_look = false;
}

/* End of a sequence: what is left that had to arrive? */
void model_final(struct fsock *r)
{
	struct expect e;

	model_expect(r, &e);
	if (e.ing || e.tcp || e.held)
		fail("lost", "slot %d: %llu redirected and %llu TCP bytes never arrived", r->slot,
		     (unsigned long long)e.ing, (unsigned long long)(e.tcp + e.held));
}
