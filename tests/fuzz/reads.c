// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap_fuzz: reads of every style, wake-ups (edge-triggered epoll,
 * SIGIO) and the drain that ends a sequence.
 *
 * The tester is single-threaded, so a read that blocks is bounded by
 * SO_RCVTIMEO, and it blocks only when the model says something is due:
 * bytes redirected to the socket's ingress queue are readable at once
 * (RCVTIMEO_MS: a timeout is a hang), bytes sent over TCP soon (Nagle and
 * delayed ACKs: TCP_WAIT_MS), an EOF once the peer's FIN is the next
 * thing due. A blocking read that returns EAGAIN well before its timeout
 * is a failure of its own ("early-eagain").
 *
 * Wake-ups: every arrival by redirection must raise an event for an
 * edge-triggered epoll waiter and a SIGIO for an O_ASYNC owner, by TCP's
 * rule. The series moderates wake-ups by the reader's progress: a reader
 * that was told of data and has not looked since (read, peek, FIONREAD)
 * may get none. A missing wake-up the series' rule allows is traced as
 * "moderated"; one it does not allow is a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include "fuzz.h"
#include "exec.h"

#define MAX_FD		4096
#define SIG_ARRIVAL	(SIGRTMIN + 1)

static volatile sig_atomic_t sig_in[MAX_FD], sig_overflow;

const char *errno_name(int err)
{
	static char other[16];

	switch (err) {
	case 0: return "0";
	case EAGAIN: return "EAGAIN";
	case EPIPE: return "EPIPE";
	case ECONNRESET: return "ECONNRESET";
	case EACCES: return "EACCES";
	case ENOMEM: return "ENOMEM";
	case ENOTCONN: return "ENOTCONN";
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOENT: return "ENOENT";
	case EINTR: return "EINTR";
	case ENOBUFS: return "ENOBUFS";
	case ENOSPC: return "ENOSPC";
	}
	snprintf(other, sizeof(other), "E%d", err);
	return other;
}

static void on_arrival(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGIO)
		sig_overflow++;	/* the real-time queue overflowed */
	else if (si->si_code == POLL_IN && si->si_fd >= 0 && si->si_fd < MAX_FD)
		sig_in[si->si_fd]++;
}

void signals_init(void)
{
	struct sigaction sa = { .sa_sigaction = on_arrival, .sa_flags = SA_SIGINFO | SA_RESTART };

	signal(SIGPIPE, SIG_IGN);
	sigaction(SIG_ARRIVAL, &sa, NULL);
	sigaction(SIGIO, &sa, NULL);
}

static int sigs(struct fsock *r)
{
	return r->fd < MAX_FD ? sig_in[r->fd] + sig_overflow : 0;
}

void op_async(struct fsock *r, bool on, char *res, size_t len)
{
	int fl = fcntl(r->fd, F_GETFL);

	if (fcntl(r->fd, F_SETOWN, getpid()) || fcntl(r->fd, F_SETSIG, SIG_ARRIVAL) ||
	    fcntl(r->fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC)) {
		snprintf(res, len, "err:%s", errno_name(errno));
		return;
	}
	r->async = on;
	r->sig_base = r->sig_looked = sigs(r);
	r->sig_strict = r->sig_relaxed = 0;
	snprintf(res, len, "ok");
}

/* After a send: did every O_ASYNC receiver it redirected to get SIGIO? */
void sigio_check(char *res, size_t len)
{
	int i;

	for (i = 0; i < NSOCK; i++) {
		struct fsock *r = &socks[i];

		if (r->fd < 0)
			continue;
		if (trace_verbose > 1 && r->async && (r->sig_strict || sigs(r) != r->sig_base))
			trace("  model: slot %d: %d arrival(s), %d after a look; %d signal(s)\n",
			      r->slot, r->sig_strict, r->sig_relaxed, sigs(r) - r->sig_base);
		/* Bytes of a stream the model lost track of, or bytes it
		 * took to wait on the backlog (delivered later, by a read,
		 * the delayed flush or the next arrival), may have come with
		 * the signals it did not ask for: the reader was told of
		 * them, and the series may hold back the next arrival's.
		 */
		if ((lost_track_op || r->sig_unsure) && r->async && !r->sig_strict &&
		    sigs(r) != r->sig_base)
			r->told = true;
		if (r->async && r->sig_strict && sigs(r) == r->sig_base) {
			if (r->sig_relaxed)
				fail("sigio", "slot %d: no SIGIO for %d arrival(s), the reader had looked",
				     r->slot, r->sig_strict);
			else
				strncat(res, " sigio-moderated", len - strlen(res) - 1);
		}
		r->sig_base = sigs(r);
		r->sig_strict = r->sig_relaxed = 0;
	}
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* recv() bounded by timeout_ms (0: MSG_DONTWAIT), EINTR retried. */
static ssize_t rd(struct fsock *r, uint8_t *buf, size_t len, int flags, int timeout_ms,
		  int *err, double *took)
{
	double t0 = now_ms(), left;
	ssize_t n;

	do {
		left = timeout_ms - (now_ms() - t0);
		if (timeout_ms) {
			struct timeval tv = { 0, 0 };

			if (left < 1)
				left = 1;
			tv.tv_sec = (long)left / 1000;
			tv.tv_usec = ((long)left % 1000) * 1000;
			setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		} else {
			flags |= MSG_DONTWAIT;
		}
		n = recv(r->fd, buf, len, flags);
		*err = n < 0 ? errno : 0;
	} while (n < 0 && *err == EINTR && now_ms() - t0 < timeout_ms);
	*took = now_ms() - t0;
	return n;
}

static const char *exp_class(const struct expect *e)
{
	return e->ing ? "ing" : e->tcp ? "tcp" : e->eof_due ? "eof" : e->held ? "held" : "-";
}

/* What a read returned, checked; the result class into res. */
static bool judge(struct fsock *r, ssize_t n, int err, bool peek, const char *how, char *res,
		  size_t len)
{
	size_t used = strlen(res);

	res += used;
	len -= used;
	if (n > 0) {
		snprintf(res, len, "%s %zd", how, n);
		return model_read(r, w.buf, n, peek);
	}
	if (n == 0) {
		snprintf(res, len, "eof");
		model_eof(r, false);
	} else if (err == EAGAIN) {
		snprintf(res, len, "none");
	} else if (err == ECONNRESET || err == EPIPE) {
		snprintf(res, len, "reset");
		model_eof(r, true);
	} else if (err == EFAULT && r->had_verdict) {
		/* Base: a FIN message a verdict queued, read by the
		 * socket after it left the verdict map.
		 */
		snprintf(res, len, "err:EFAULT");
		note_known("fin-message-efault", "slot %d: EFAULT", r->slot);
		r->fin_read = true;
		model_all_lossy(r);
	} else {
		snprintf(res, len, "err:%s", errno_name(err));
	}
	return !failed();
}

/* May TCP bytes sent to a verdict receiver wait in its receive queue for
 * the verdict (held back by SO_RCVLOWAT, which gates tcp_data_ready())?
 * The unpatched tcp_bpf_recvmsg_parser() returns EAGAIN while they do,
 * peek, blocking or not: a fault of the base, "verdict-eagain".
 */
static bool verdict_may_hold(const struct fsock *r, const struct expect *e)
{
	return r->verdict_prog && (e->tcp || e->held || r->tcp_async_since_look);
}

/* What TCP says of a socket, for a failure's report: its state, what it
 * has unsent and unacknowledged, its probes and backoff, what waits to be
 * read.
 */
static void tcp_state(const struct fsock *s)
{
	struct tcp_info ti = {};
	socklen_t len = sizeof(ti);
	int inq = -1, outq = -1, unsent = -1;

	if (s->fd < 0 || getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return;
	ioctl(s->fd, SIOCINQ, &inq);
	ioctl(s->fd, SIOCOUTQ, &outq);
	ioctl(s->fd, SIOCOUTQNSD, &unsent);
	printf("# slot %d: state %u, inq %d, outq %d (unsent %d), unacked %u, probes %u, "
	       "backoff %u, rto %u us, snd_cwnd %u, pmtu %u\n", s->slot, ti.tcpi_state, inq,
	       outq, unsent, ti.tcpi_unacked, ti.tcpi_probes, ti.tcpi_backoff, ti.tcpi_rto,
	       ti.tcpi_snd_cwnd, ti.tcpi_pmtu);
}

/* TCP's counters that are not zero (/proc/net/netstat, TcpExt): its drops
 * and their reasons, for a failure's report.
 */
static void tcp_counters(void)
{
	static char names[8192], values[8192];
	char *n, *v, *sn, *sv;
	FILE *f = fopen("/proc/net/netstat", "r");

	if (!f)
		return;
	while (fgets(names, sizeof(names), f) && fgets(values, sizeof(values), f)) {
		if (strncmp(names, "TcpExt:", 7))
			continue;
		printf("# TcpExt:");
		n = strtok_r(names + 7, " \n", &sn);
		v = strtok_r(values + 7, " \n", &sv);
		for (; n && v; n = strtok_r(NULL, " \n", &sn), v = strtok_r(NULL, " \n", &sv))
			if (strcmp(v, "0"))
				printf(" %s=%s", n, v);
		printf("\n");
	}
	fclose(f);
}

/* Is what a reader waits for over TCP late for a known reason? Under
 * tcp_mem pressure TCP drops what it cannot charge and closes its window;
 * a receive buffer made smaller than the window TCP had offered closes it
 * too: the sender's retransmissions and zero window probes, backed off,
 * bring the bytes, the peer's FIN behind them.
 */
static bool tcp_late(const struct fsock *r, const struct expect *e)
{
	return !e->ing && (e->tcp || e->held || e->eof_due) && (w.pressure_used || r->rcvbuf_set);
}

/* What is late, for a note. */
static const char *late_what(const struct expect *e)
{
	static char buf[48];

	if (!e->tcp)
		return "the peer's FIN";
	snprintf(buf, sizeof(buf), "%llu TCP bytes", (unsigned long long)e->tcp);
	return buf;
}

static void hang(struct fsock *r, const struct expect *e, const char *what, double took,
		 int timeout)
{
	if (took < timeout * 0.8 && verdict_may_hold(r, e))
		fail("verdict-eagain", "slot %d: %s: EAGAIN after %.0f ms with %llu "
		     "redirected and %llu TCP bytes due", r->slot, what, took,
		     (unsigned long long)e->ing, (unsigned long long)(e->tcp + e->held));
	else if (took < timeout * 0.8)
		fail("early-eagain", "slot %d: %s returned EAGAIN after %.0f of %d ms", r->slot, what,
		     took, timeout);
	else if (tcp_late(r, e) && (e->tcp || e->eof_due))
		note_known(w.pressure_used ? "tcp-pressure" : "tcp-rcvbuf", "slot %d: %s: %s late after %s",
			   r->slot, what, late_what(e),
			   w.pressure_used ? "memory pressure" : "SO_RCVBUF");
	else if (e->ing)
		fail("hang", "slot %d: %s: nothing in %d ms with %llu redirected bytes due", r->slot,
		     what, timeout, (unsigned long long)e->ing);
	else if (e->tcp)
		fail("hang-tcp", "slot %d: %s: nothing in %d ms with %llu TCP bytes due", r->slot,
		     what, timeout, (unsigned long long)e->tcp);
	else if (e->eof_due)
		fail("hang-eof", "slot %d: %s: no EOF in %d ms after the peer's FIN", r->slot, what,
		     timeout);
	if (failed()) {
		/* ss first: the ioctls below may take the socket lock. */
		fflush(stdout);
		if (trace_verbose && system("ss -tnoemi 2>/dev/null"))
			printf("# (no ss)\n");
		tcp_state(r);
		tcp_state(&socks[r->slot ^ 1]);
		tcp_counters();
	}
}

/* The reader looked (model_looked()) with a read that began with @sig0
 * signals counted. A read that pulls corked bytes and leaves some unread
 * tells the reader of them, with the wake-up (and SIGIO) their arrival
 * did not have: an O_ASYNC reader that got a signal meanwhile has been
 * told again, and the series may hold back the next arrival's.
 */
static void looked(struct fsock *r, int sig0)
{
	model_looked(r);
	r->sig_looked = sigs(r);
	r->verdict_since_look = r->verdict_prog;
	if (r->async && sig0 != r->sig_looked)
		r->told = true;
}

/* Has a verdict receiver been told of something since it last looked?
 * Its psock tells it of every skb the verdict queues (its TCP bytes, its
 * peer's FIN), at times from the psock's work after the operation that
 * sent them: a signal the model did not ask for says it was, also when
 * the receiver has left the verdict map since.
 */
bool told_by_signal(struct fsock *r)
{
	return r->async && r->verdict_since_look && sigs(r) != r->sig_looked;
}

/* A read that does not wait (MSG_DONTWAIT, MSG_PEEK) returned EAGAIN: a
 * failure if redirected bytes are due.
 */
static void eagain_at_once(struct fsock *r, const struct expect *e, const char *what)
{
	if (e->ing)
		fail(verdict_may_hold(r, e) ? "verdict-eagain" : "eagain",
		     "slot %d: %s: EAGAIN with %llu redirected bytes due", r->slot, what,
		     (unsigned long long)e->ing);
}

static void read_nb(struct fsock *r, size_t len, const struct expect *e, char *res, size_t rlen)
{
	int sig0 = sigs(r), err;
	double took;
	ssize_t n = rd(r, w.buf, len, 0, 0, &err, &took);

	looked(r, sig0);
	if (n < 0 && err == EAGAIN)
		eagain_at_once(r, e, "MSG_DONTWAIT read");
	judge(r, n, err, false, "data", res, rlen);
}

static void read_block(struct fsock *r, size_t len, const struct expect *e, char *res,
		       size_t rlen)
{
	int timeout = e->ing ? RCVTIMEO_MS : TCP_WAIT_MS, err, sig0 = sigs(r);
	double took;
	ssize_t n;

	if (!e->ing && (e->tcp < (uint64_t)r->lowat || !e->tcp) && !e->eof_due) {
		/* Nothing due: it would only wait for its timeout. */
		snprintf(res, rlen, "nb:");
		read_nb(r, len, e, res, rlen);
		return;
	}
	n = rd(r, w.buf, len, 0, timeout, &err, &took);
	looked(r, sig0);
	if (n < 0 && err == EAGAIN)
		hang(r, e, "blocking read", took, timeout);
	judge(r, n, err, false, "data", res, rlen);
}

static void read_peek(struct fsock *r, size_t len, const struct expect *e, char *res,
		      size_t rlen)
{
	int sig0 = sigs(r), err;
	double took;
	ssize_t n = rd(r, w.buf, len, MSG_PEEK, 0, &err, &took), m;

	looked(r, sig0);
	if (n < 0 && err == EAGAIN)
		eagain_at_once(r, e, "MSG_PEEK");
	if (!judge(r, n, err, true, "peek", res, rlen) || n <= 0)
		return;
	memcpy(w.buf2, w.buf, n);
	m = rd(r, w.buf, n, 0, 0, &err, &took);
	looked(r, sig0);
	strncat(res, ", ", rlen - strlen(res) - 1);
	if (m <= 0 || memcmp(w.buf, w.buf2, m)) {
		/* A TCP segment (held by Nagle, say) that reached a verdict
		 * receiver's queue after the peek: as above.
		 */
		fail(m < 0 && err == EAGAIN && verdict_may_hold(r, e) ? "verdict-eagain" : "peek",
		     "slot %d: read after a peek of %zd bytes: %zd (%s)%s", r->slot, n, m,
		     errno_name(m < 0 ? err : 0), m > 0 ? ", bytes differ" : "");
		return;
	}
	judge(r, m, 0, false, "data", res, rlen);
}

static void read_fionread(struct fsock *r, size_t len, const struct expect *e, char *res,
			  size_t rlen)
{
	int v = -1, sig0 = sigs(r);

	if (ioctl(r->fd, FIONREAD, &v)) {
		snprintf(res, rlen, "err:%s", errno_name(errno));
		return;
	}
	looked(r, sig0);
	if ((uint64_t)v < e->ing) {
		fail("fionread", "slot %d: FIONREAD %d with %llu redirected bytes due", r->slot, v,
		     (unsigned long long)e->ing);
		return;
	}
	if ((uint64_t)v > e->total && !unsure_count()) {
		fail("fionread", "slot %d: FIONREAD %d, more than the %llu bytes sent to it", r->slot,
		     v, (unsigned long long)e->total);
		return;
	}
	snprintf(res, rlen, "fionread%s ", v ? "" : "-0");
	if (v > 0)
		read_nb(r, (size_t)v < len ? (size_t)v : len, e, res, rlen);
}

/* epoll_wait() on @ep (or poll() on @fd when @ep < 0) for up to timeout_ms,
 * EINTR retried for what is left: a signal (SIGIO of another socket)
 * ends neither call early, and neither is restarted by SA_RESTART.
 * Returns the events, 0 when none came.
 */
static uint32_t wait_events(int ep, int fd, int timeout_ms)
{
	double t0 = now_ms();
	int n, left = timeout_ms;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		struct epoll_event ev;

		n = ep >= 0 ? epoll_wait(ep, &ev, 1, left) : poll(&p, 1, left);
		if (n > 0)
			return ep >= 0 ? ev.events : (uint32_t)p.revents;
		if (n == 0 || errno != EINTR)
			return 0;
		left = timeout_ms - (int)(now_ms() - t0);
		if (left < 0)
			left = 0;
	}
}

/* poll() or a level-triggered epoll_wait(): readable when due? */
static int ready_lt(struct fsock *r, bool epoll, int timeout)
{
	return wait_events(epoll ? r->ep_lt : -1, r->fd, timeout) & EPOLLIN;
}

static void read_poll(struct fsock *r, bool epoll, size_t len, const struct expect *e,
		      char *res, size_t rlen)
{
	const char *what = epoll ? "epoll_wait (LT)" : "poll";
	bool tcp_due = e->tcp >= (uint64_t)r->lowat || e->eof_due;
	int timeout = e->ing ? RCVTIMEO_MS : TCP_WAIT_MS;
	double t0;

	if (!ready_lt(r, epoll, 0)) {
		if (e->ing && e->ing < (uint64_t)r->lowat) {
			snprintf(res, rlen, "none-lowat");
			return;
		}
		if (!e->ing && !tcp_due) {
			snprintf(res, rlen, "none");
			return;
		}
		t0 = now_ms();
		if (!ready_lt(r, epoll, timeout)) {
			hang(r, e, what, timeout, timeout);
			snprintf(res, rlen, "none");
			return;
		}
		snprintf(res, rlen, "%s:", e->ing ? "late" : "ready");
		if (e->ing)
			note_late(r->slot, what, now_ms() - t0);
	} else {
		snprintf(res, rlen, "ready:");
	}
	read_nb(r, len, e, res, rlen);
}

/* An edge-triggered waiter hears of the fd if a wake-up came since its
 * last event and the fd is readable when epoll_wait() looks.
 */
static void read_et(struct fsock *r, size_t len, const struct expect *e, char *res, size_t rlen)
{
	int n = wait_events(r->ep_et, r->fd, 0) != 0;
	double t0 = now_ms();

	if (n <= 0 && r->et_strict && e->ing) {
		if (r->et_relaxed) {
			n = wait_events(r->ep_et, r->fd, RCVTIMEO_MS) != 0;
			if (n <= 0)
				fail("et-wakeup", "slot %d: no edge-triggered event in %d ms for %d "
				     "arrival(s), %llu bytes readable, the reader had looked", r->slot,
				     RCVTIMEO_MS, r->et_strict, (unsigned long long)e->ing);
			else
				note_late(r->slot, "epoll_wait (ET)", now_ms() - t0);
			snprintf(res, rlen, "late:");
		} else {
			snprintf(res, rlen, "moderated");
		}
	}
	r->et_strict = r->et_relaxed = 0;
	if (n <= 0) {
		if (!*res)
			snprintf(res, rlen, "none");
		return;
	}
	if (!*res)
		snprintf(res, rlen, "event:");
	read_nb(r, len, e, res, rlen);
}

void op_read(const struct op *o, struct fsock *r, char *res, size_t rlen)
{
	size_t len = o->b > 0 ? (o->b > MAX_LEN ? MAX_LEN : o->b) : 1;
	struct expect e;

	model_expect(r, &e);
	*res = 0;
	switch ((unsigned int)o->a % NREADS) {
	case R_BLOCK:
		read_block(r, len, &e, res, rlen);
		break;
	case R_NB:
		read_nb(r, len, &e, res, rlen);
		break;
	case R_PEEK:
		read_peek(r, len, &e, res, rlen);
		break;
	case R_FIONREAD:
		read_fionread(r, len, &e, res, rlen);
		break;
	case R_POLL:
	case R_EPOLL_LT:
		read_poll(r, o->a == R_EPOLL_LT, len, &e, res, rlen);
		break;
	case R_EPOLL_ET:
		read_et(r, len, &e, res, rlen);
		break;
	}
	snprintf(res + strlen(res), rlen - strlen(res), " exp=%s", exp_class(&e));
	/* TCP bytes still due may come after the look, through the verdict
	 * program, and tell the reader as they come (its window reopened).
	 * A read that left redirected bytes may have told the reader of them
	 * (looked()), which a reader without O_ASYNC does not see.
	 */
	model_expect(r, &e);
	if (r->verdict_prog && (e.tcp || e.held))
		r->tcp_async_since_look = true;
	if (!r->async && e.ing)
		r->told = true;
	if (!e.ing)
		r->sig_unsure = false;
}

/* How many waits in a row a drain spends in vain before what is due counts
 * as lost: a few, or, for TCP bytes or a FIN late for a known reason
 * (tcp_late()), until the sender's retransmission or zero window probe,
 * backed off up to TCP_RTO_MAX (120 s), has come. Bytes that keep coming, a probe's
 * worth at a time, are late, not lost: the drain gives them DRAIN_MAX_MS.
 */
#define DRAIN_MAX_MS	900000
static int drain_stalls(const struct fsock *r, const struct expect *e)
{
	return tcp_late(r, e) ? 150000 / TCP_WAIT_MS : 3;
}

/* Read one socket to its end: everything due, then EOF. */
static void drain_one(struct fsock *r)
{
	char res[64] = "";
	bool eof = false;
	double took, t0 = now_ms();
	int iter, err, timeout;
	int stalls = 0;
	struct expect e;
	ssize_t n;

	for (iter = 0; iter < 100000 && !failed(); iter++) {
		model_expect(r, &e);
		if (eof && !e.ing && !e.tcp && !e.held)
			break;
		timeout = e.ing ? RCVTIMEO_MS : TCP_WAIT_MS;
		n = rd(r, w.buf, MAX_LEN, 0, eof ? 0 : timeout, &err, &took);
		if (n > 0) {
			if (!model_read(r, w.buf, n, false))
				return;
			stalls = 0;
		} else if (n == 0) {
			model_eof(r, false);
			eof = true;
		} else if (err == ECONNRESET || err == EPIPE) {
			model_eof(r, true);
		} else if (err == EFAULT && r->had_verdict) {
			judge(r, n, err, false, "", res, sizeof(res));
			eof = true;
		} else if (err == EAGAIN && eof) {
			break;
		} else if (err == EAGAIN) {
			hang(r, &e, "drain", took, timeout);
			if (!failed() && !e.tcp && !e.held && !e.ing && !tcp_late(r, &e))
				fail("hang-eof", "slot %d: drain: no EOF in %d ms", r->slot, timeout);
			if (failed() || ++stalls > drain_stalls(r, &e) ||
			    now_ms() - t0 > DRAIN_MAX_MS)
				break;
		} else {
			fail("read", "slot %d: drain: %s", r->slot, errno_name(err));
			return;
		}
	}
	if (!failed())
		model_final(r);
}

void exec_drain(void)
{
	int i, zero = 0;

	pressure_restore();
	for (i = 0; i < NSOCK && !failed(); i++) {
		struct fsock *s = &socks[i];

		if (s->fd < 0)
			continue;
		setsockopt(s->fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero));
		s->tcp_cork = false;
		model_push(s);
		if (!s->shut_wr && !shutdown(s->fd, SHUT_WR))
			model_shut(s);
	}
	for (i = 0; i < NSOCK && !failed(); i++)
		if (socks[i].fd >= 0)
			drain_one(&socks[i]);
}
