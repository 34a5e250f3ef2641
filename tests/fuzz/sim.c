// SPDX-License-Identifier: GPL-2.0
/*
 * The oracle of sockmap_fuzz, sending side: where each byte a send()
 * accepted must arrive.
 *
 * A socket in the sockhash with the sk_msg program sends through
 * tcp_bpf_sendmsg(); the model follows its psock's verdict state as the
 * unpatched kernel keeps it (tcp_bpf_send_verdict()): the program runs
 * when no verdict is in force; bpf_msg_apply_bytes() keeps a verdict for
 * that many bytes, across sends; bpf_msg_cork_bytes() holds bytes in the
 * psock's cork until that many came (counted, as the kernel does, by whole
 * send sizes), then runs the program again on all of them; a drop frees
 * the rest of the message, ends the send and stays in force; a pass that
 * TCP refused stays in force too. Per byte the verdicts do not depend on
 * how the kernel cut the send into messages, so one send is simulated as
 * one message and compared with what the syscall returned:
 *  - the same: committed;
 *  - fewer bytes (EAGAIN, ENOMEM, a refused push or redirect): the bytes
 *    up to what it returned went where the simulation says and no others;
 *    whether a verdict is still in force is no longer certain, so the
 *    socket's plan is kept until a send shows the state known again;
 *  - anything else (a cork or a drop involved, or more bytes): the model
 *    lost track. The stream becomes lenient (its bytes are no longer
 *    checked) and the socket sends a new stream from then on. Each such
 *    case is counted and traced ("unsure").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include "fuzz.h"

#define MAX_SEGS	64

enum { SEG_LANE, SEG_DROP, SEG_CORK };

struct seg {
	uint64_t off, len;
	int kind, uid, path;
	bool held;
	int eval_fail;		/* the verdict in force if this one failed */
};

struct vstate {
	int eval, redir_uid;
	uint32_t apply_rem, cork_rem;
	uint64_t cork_off, cork_len;
};

struct sim {
	struct vstate st;
	struct seg seg[MAX_SEGS];
	int nseg, runs;
	int64_t ret;
	bool corked, dropped, apply_seen;
};

static bool psock_alive(const struct fsock *s)
{
	return s && s->fd >= 0 && (s->in_socks || s->in_vsocks);
}

static struct fsock *peer_of(struct fsock *s)
{
	struct fsock *p = &socks[s->slot ^ 1];

	return p->fd >= 0 && p->pair == s->pair ? p : NULL;
}

void model_new_sock(struct fsock *s)
{
	s->sid = stream_new(s->slot);
	s->sent = 0;
	s->eval = EV_NONE;
	s->apply_rem = s->cork_rem = 0;
	s->cork_len = 0;
	s->apply_unsure = false;
}

static void add_seg(struct sim *m, uint64_t off, uint64_t len, int kind, int uid, int path,
		    bool held, int eval_fail)
{
	struct seg *last = m->nseg ? &m->seg[m->nseg - 1] : NULL;

	if (!len)
		return;
	if (last && last->off + last->len == off && last->kind == kind && last->uid == uid &&
	    last->path == path && last->held == held && last->eval_fail == eval_fail) {
		last->len += len;
		return;
	}
	if (m->nseg == MAX_SEGS)
		abort();
	m->seg[m->nseg++] = (struct seg){ off, len, kind, uid, path, held, eval_fail };
}

/* The program's run: the verdict of the socket's plan now. */
static void run_prog(struct fsock *s, struct sim *m)
{
	struct fsock *t;

	m->runs++;
	m->st.apply_rem = s->plan.apply;
	if (s->plan.apply)
		m->apply_seen = true;
	switch (s->plan.action) {
	case FZ_PASS:
		m->st.eval = EV_PASS;
		break;
	case FZ_REDIR:
		t = &socks[s->plan.target];
		m->st.eval = t->fd >= 0 && t->in_socks ? EV_REDIR : EV_DROP;
		m->st.redir_uid = t->uid;
		break;
	default:
		m->st.eval = EV_DROP;
	}
}

/* tcp_bpf_send_verdict() on [pos, pos + len); copied: the send's. */
static void verdicts(struct fsock *s, struct sim *m, uint64_t pos, uint64_t len, bool from_cork,
		     int64_t copied, int flags)
{
	struct vstate *st = &m->st;
	struct fsock *peer = peer_of(s), *t;
	bool held = (flags & SF_MORE) || s->tcp_cork;
	uint64_t tosend;

	while (len) {
		if (st->eval == EV_NONE) {
			run_prog(s, m);
			if (s->plan.cork && s->plan.cork > len) {
				m->corked = true;
				st->cork_rem = s->plan.cork - len;
				st->cork_off = pos;
				st->cork_len = len;
				add_seg(m, pos, len, SEG_CORK, 0, 0, false, EV_NONE);
				m->ret = copied;
				return;
			}
		}
		tosend = len;
		if (st->apply_rem && st->apply_rem < tosend)
			tosend = st->apply_rem;
		switch (st->eval) {
		case EV_PASS:
			if (s->shut_wr) {
				/* tcp_sendmsg_locked() refuses: the message is freed. */
				add_seg(m, pos, len, SEG_DROP, 0, 0, false, EV_PASS);
				copied -= len;
				m->ret = copied > 0 ? copied : -EPIPE;
				m->dropped = true;
				return;
			}
			if (peer)
				add_seg(m, pos, tosend, SEG_LANE, peer->uid, P_TCP, held, EV_PASS);
			else
				add_seg(m, pos, tosend, SEG_DROP, 0, 0, false, EV_PASS);
			st->apply_rem -= st->apply_rem < tosend ? st->apply_rem : tosend;
			break;
		case EV_REDIR:
			st->apply_rem -= st->apply_rem < tosend ? st->apply_rem : tosend;
			t = sock_by_uid(st->redir_uid);
			if (!st->apply_rem)
				st->eval = EV_NONE;
			if (!psock_alive(t)) {
				/* tcp_bpf_sendmsg_redir(): -EPIPE, the message freed. */
				add_seg(m, pos, len, SEG_DROP, 0, 0, false, st->eval);
				if (!from_cork)
					copied -= len;
				m->ret = copied > 0 ? copied : -EPIPE;
				m->dropped = true;
				return;
			}
			add_seg(m, pos, tosend, SEG_LANE, t->uid, P_ING, false, st->eval);
			if (from_cork) {
				/* The rest of a cork's message is freed. */
				add_seg(m, pos + tosend, len - tosend, SEG_DROP, 0, 0, false, st->eval);
				if (len > tosend)
					m->dropped = true;
				len = tosend;
			}
			break;
		default:
			add_seg(m, pos, len, SEG_DROP, 0, 0, false, EV_DROP);
			st->apply_rem -= st->apply_rem < tosend ? st->apply_rem : tosend;
			copied -= tosend;
			m->ret = copied > 0 ? copied : -EACCES;
			m->dropped = true;
			return;
		}
		if (!st->apply_rem)
			st->eval = EV_NONE;
		pos += tosend;
		len -= tosend;
	}
	m->ret = copied;
}

/* One send() of len bytes from the socket's stream, all going through. */
static void simulate(struct fsock *s, uint64_t len, int flags, struct sim *m)
{
	struct vstate *st = &m->st;
	struct fsock *peer = peer_of(s);
	uint64_t start = s->sent;

	memset(m, 0, sizeof(*m));
	*st = (struct vstate){ s->eval, s->redir_uid, s->apply_rem, s->cork_rem, s->cork_off,
			       s->cork_len };
	if (!psock_alive(s) || !s->msg_prog) {
		if (s->shut_wr) {
			m->ret = -EPIPE;
			return;
		}
		if (peer)
			add_seg(m, start, len, SEG_LANE, peer->uid, P_TCP,
				(flags & SF_MORE) || s->tcp_cork, EV_NONE);
		else
			add_seg(m, start, len, SEG_DROP, 0, 0, false, EV_NONE);
		m->ret = len;
		return;
	}
	if (st->cork_rem) {
		/* tcp_bpf_sendmsg(): the cork counts whole send sizes. */
		m->corked = true;
		st->cork_len += len;
		st->cork_rem = len > st->cork_rem ? 0 : st->cork_rem - len;
		if (st->cork_rem) {
			add_seg(m, start, len, SEG_CORK, 0, 0, false, EV_NONE);
			m->ret = len;
			return;
		}
		st->eval = EV_NONE;
		verdicts(s, m, st->cork_off, st->cork_len, true, len, flags);
		if (!st->cork_rem)
			st->cork_len = 0;
		return;
	}
	verdicts(s, m, start, len, false, len, flags);
}

/* May @r have held its SO_RCVBUF unread before the @len redirected bytes
 * just added? sk_rmem_alloc counts its unread TCP skbs too, by their
 * truesize: up to about twice their payload on loopback; and the bytes of
 * lanes the model no longer checks (lossy, lenient) may all be there.
 */
static bool rcvbuf_full(struct fsock *r, uint64_t len)
{
	socklen_t sl = sizeof(int);
	struct expect e;
	uint64_t unread;
	int rcvbuf;

	if (getsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &sl))
		return false;
	model_expect(r, &e);
	unread = e.ing + e.lossy;
	return unread >= len && unread - len + 2 * (e.tcp + e.held) >= (uint64_t)rcvbuf;
}

static void deliver(struct fsock *s, const struct seg *g, uint64_t len)
{
	struct fsock *r = sock_by_uid(g->uid);

	if (!r || r->fd < 0 || !len)
		return;
	lane_append(lane_get(r, s->sid, g->path), g->off, len, op_seq, g->held);
	if (trace_verbose > 1)
		trace("  model: slot %d stream %d [%llu, +%llu) -> slot %d %s%s\n", s->slot, s->sid,
		      (unsigned long long)g->off, (unsigned long long)len, r->slot,
		      g->path == P_ING ? "ingress" : "tcp", g->held ? " held" : "");
	if (g->path == P_TCP) {
		r->tcp_async_since_look = true;
		return;
	}
	/* A wake-up: TCP's rule (every arrival) and the series' (an
	 * arrival for a reader that looked since it was last told). As
	 * TCP sends nothing into a closed window, an arrival for a reader
	 * that holds its SO_RCVBUF of redirected bytes unread waits on the
	 * backlog, and nothing moves to wake it for. What waits there is
	 * delivered later with a wake-up, when the reader has room (it
	 * reads, raises SO_RCVBUF): sigio_check() takes a signal that
	 * comes meanwhile as telling the reader.
	 */
	if (rcvbuf_full(r, len)) {
		r->sig_unsure = true;
		return;
	}
	if (told_by_signal(r))
		r->told = true;
	r->et_strict++;
	r->sig_strict++;
	if (!r->told && !(r->verdict_prog && r->tcp_async_since_look)) {
		r->et_relaxed++;
		r->sig_relaxed++;
	}
	r->told = true;
}

static void commit(struct fsock *s, const struct sim *m, uint64_t upto)
{
	int i;

	for (i = 0; i < m->nseg; i++) {
		const struct seg *g = &m->seg[i];
		uint64_t len = g->len;

		if (g->kind != SEG_LANE)
			continue;
		if (g->off >= upto)
			break;
		if (g->off + len > upto)
			len = upto - g->off;
		deliver(s, g, len);
	}
}

static void may_tell(struct fsock *r)
{
	if (r && r->fd >= 0)
		r->told = true;
}

static void lose_track(struct fsock *s, const char *why, int64_t want, int64_t got,
		       bool corked)
{
	char what[256];

	snprintf(what, sizeof(what),
		 "slot %d: %s (model %lld, kernel %lld; eval %d apply %u cork %u+%llu, plan %u/%u/%u/%u, "
		 "%s%s): stream %d lenient", s->slot, why, (long long)want, (long long)got, s->eval,
		 s->apply_rem, s->cork_rem, (unsigned long long)s->cork_len, s->plan.action,
		 s->plan.target, s->plan.apply, s->plan.cork, psock_alive(s) ? "psock" : "no psock",
		 s->shut_wr ? ", shut" : "", s->sid);
	note_unsure(what);
	/* The write's bytes may have told their receivers of data, which
	 * the series then need not signal again until they look: the
	 * redirect targets, the one in force and the plan's, and the peer.
	 */
	if (s->eval == EV_REDIR)
		may_tell(sock_by_uid(s->redir_uid));
	if (s->plan.action == FZ_REDIR)
		may_tell(&socks[s->plan.target]);
	may_tell(peer_of(s));
	if (corked || s->plan.cork || s->cork_rem || s->cork_len)
		s->cork_unsure = true;
	stream_set_lenient(s->sid);
	s->sid = stream_new(s->slot);
	s->sent = 0;
	s->eval = EV_NONE;
	s->apply_rem = s->cork_rem = 0;
	s->cork_len = 0;
	s->apply_unsure = true;
}

/* r may get a reset, which takes what TCP still had for it. */
static void reset_ok(struct fsock *r)
{
	int i;

	r->rst_ok = true;
	for (i = 0; i < r->nlanes; i++)
		if (r->lanes[i].path == P_TCP)
			r->lanes[i].lossy = true;
}

/* Where the bytes of a send went; ret is what it returned (-errno on an
 * error), runs how often the program ran meanwhile (-1: unknown).
 */
void model_send(struct fsock *s, size_t len, int flags, ssize_t ret, int64_t runs)
{
	struct sim m;
	uint64_t start = s->sent, k = ret > 0 ? ret : 0;
	bool pushed = false;
	int i;

	/* A write to a peer that has closed: its socket answers with a
	 * reset, and what it had not yet sent of its own goes with it.
	 */
	if (!peer_of(s))
		reset_ok(s);
	simulate(s, len, flags, &m);
	for (i = 0; i < m.nseg; i++)
		if (m.seg[i].kind == SEG_LANE && m.seg[i].path == P_TCP)
			pushed = true;
	if (ret == m.ret || (ret < 0 && m.ret < 0)) {
		/* The kernel cut the write into other program runs than the
		 * model (under tcp_mem pressure the series copies 64 KB at a
		 * time; a full sk_msg goes before the rest is copied): with a
		 * plan that corks more than a byte (every part has one), its
		 * last run may have corked a tail that the model sent.
		 */
		if ((m.corked || s->plan.cork > 1) && runs >= 0 && runs != m.runs) {
			lose_track(s, "program runs differ", m.runs, runs, true);
			return;
		}
		/* A cork the model lost track of takes bytes without a run
		 * until it has its cork_bytes, and its run then cuts the send
		 * where the model cannot tell. Its bytes are known again once
		 * the program ran with a plan that neither corks nor applies
		 * to a number of bytes: the cork is gone and no cut matters.
		 */
		if (s->cork_unsure && k) {
			if (runs <= 0 || s->plan.cork || s->plan.apply) {
				lose_track(s, "after a lost cork", m.runs, runs, true);
				return;
			}
			s->cork_unsure = false;
		}
		commit(s, &m, UINT64_MAX);
		s->eval = m.st.eval;
		s->redir_uid = m.st.redir_uid;
		s->apply_rem = m.st.apply_rem;
		s->cork_rem = m.st.cork_rem;
		s->cork_off = m.st.cork_off;
		s->cork_len = m.st.cork_len;
		s->sent += k;
		if (s->eval == EV_NONE && !s->apply_rem && !s->plan.apply)
			s->apply_unsure = false;
	} else if ((int64_t)k < m.ret && !m.corked && !m.dropped) {
		/* Fewer went through: a prefix, where the simulation says. */
		commit(s, &m, start + k);
		for (i = 0; i < m.nseg && m.seg[i].off + m.seg[i].len <= start + k; i++)
			;
		s->eval = i < m.nseg ? m.seg[i].eval_fail : m.st.eval;
		s->redir_uid = m.st.redir_uid;
		if (m.apply_seen || s->apply_rem)
			s->apply_unsure = true;
		if (s->eval != EV_NONE)
			s->apply_unsure = true;
		s->sent += k;
		pushed = pushed && k;
	} else {
		lose_track(s, m.corked ? "cork" : m.dropped ? "drop" : "send result", m.ret, ret,
			   m.corked);
		return;
	}
	if (pushed && !(flags & SF_MORE) && !s->tcp_cork)
		model_push(s);
}

/* TCP pushes what the socket had held (uncork, NODELAY, a send without
 * MSG_MORE, shutdown, close).
 */
void model_push(struct fsock *s)
{
	struct fsock *p = peer_of(s);
	int i, j;

	if (!p)
		return;
	for (i = 0; i < p->nlanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->path != P_TCP || l->slot != s->slot)
			continue;
		for (j = l->head; j < l->n; j++)
			l->r[j].held = false;
	}
}

/* The socket's psock went away (left every map): what waits in its
 * ingress queue is gone, and its sk_msg state with its cork.
 */
void model_psock_gone(struct fsock *s)
{
	int i;

	for (i = 0; i < s->nlanes; i++)
		if (s->lanes[i].path == P_ING || s->verdict_prog)
			s->lanes[i].lossy = true;
	s->msg_prog = s->verdict_prog = false;
	s->eval = EV_NONE;
	s->apply_rem = s->cork_rem = 0;
	s->cork_len = 0;
	s->apply_unsure = s->cork_unsure = false;
}

/* Left the verdict map but not the sockhash: skbs in flight in the
 * verdict's queues may be dropped.
 */
void model_vdelete(struct fsock *r)
{
	int i;

	r->verdict_prog = false;
	for (i = 0; i < r->nlanes; i++)
		if (r->lanes[i].path == P_TCP)
			r->lanes[i].lossy = true;
}

void model_shut(struct fsock *s)
{
	struct fsock *p = peer_of(s);

	model_push(s);
	s->shut_wr = true;
	if (p && !p->peer_fin) {
		p->peer_fin = true;
		p->fin_seq = op_seq;
		/* The FIN is a TCP arrival: through a verdict it tells the reader. */
		p->tcp_async_since_look = true;
	}
}

void model_close(struct fsock *s, bool abort_it)
{
	struct fsock *p = peer_of(s);
	bool unread = false;
	int i;

	for (i = 0; i < s->nlanes; i++)
		if (s->lanes[i].path == P_TCP && lane_pending(&s->lanes[i]))
			unread = true;
	if (p) {
		model_shut(s);
		/* tcp_close() resets when TCP data was left unread. */
		if (abort_it || unread || s->verdict_prog)
			reset_ok(p);
	}
	for (i = 0; i < s->nlanes; i++)
		lane_clear(&s->lanes[i]);
	s->nlanes = 0;
}

bool model_plan_ok(struct fsock *s, const struct fz_plan *p, const char **why)
{
	if (s->apply_unsure && psock_alive(s)) {
		*why = "verdict state unsure";
		return false;
	}
	if (s->cork_rem && (p->action == FZ_DROP || p->apply)) {
		*why = "cork pending";
		return false;
	}
	return true;
}

/* sendfile(): splice_direct_to_actor() sends the file through a pipe of
 * SPLICE_CHUNK bytes, one sendmsg() a pipeful, MSG_MORE on all but the
 * last; what it returned is what the pipefuls sent, in order.
 */
void model_sendfile(struct fsock *s, size_t len, ssize_t ret)
{
	size_t off = 0, chunk;
	ssize_t left = ret;

	while (off < len) {
		chunk = len - off < SPLICE_CHUNK ? len - off : SPLICE_CHUNK;
		if (ret < 0 || off == 0 || left > 0) {
			ssize_t r = ret < 0 ? ret : left >= (ssize_t)chunk ? (ssize_t)chunk : left;

			if (ret >= 0 && left == 0)
				break;
			model_send(s, chunk, off + chunk < len ? SF_MORE : 0, r, -1);
			if (ret < 0 || r < (ssize_t)chunk)
				break;
			left -= r;
		} else {
			break;
		}
		off += chunk;
	}
}
