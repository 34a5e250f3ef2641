// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap_fuzz: the sockets, the maps and every operation but the reads
 * (reads.c). Each operation does its syscall and tells the model what
 * came of it; one that makes no sense in the state reached (a socket
 * closed, a plan the model could not follow) is skipped and says why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "fuzz.h"
#include "exec.h"

#define TCP_MEM "/proc/sys/net/ipv4/tcp_mem"

struct fsock socks[NSOCK];
int npairs;
struct world w;

static struct fz_plan slot_plan[NSOCK];
static char tcp_mem_saved[128];

static void die(const char *what)
{
	perror(what);
	exit(2);
}

int world_init(const char *bpf_obj)
{
	struct bpf_object *obj;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	obj = bpf_object__open_file(bpf_obj, NULL);
	if (!obj || libbpf_get_error(obj) || bpf_object__load(obj)) {
		fprintf(stderr, "sockmap_fuzz: cannot load %s\n", bpf_obj);
		return -1;
	}
	w.socks_fd = bpf_object__find_map_fd_by_name(obj, "socks");
	w.vsocks_fd = bpf_object__find_map_fd_by_name(obj, "vsocks");
	w.plans_fd = bpf_object__find_map_fd_by_name(obj, "plans");
	w.msg_prog = bpf_program__fd(bpf_object__find_program_by_name(obj, "fz_msg"));
	if (bpf_prog_attach(bpf_program__fd(bpf_object__find_program_by_name(obj, "fz_skb")),
			    w.vsocks_fd, BPF_SK_SKB_STREAM_VERDICT, 0))
		die("attach sk_skb stream_verdict");
	w.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(w.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (w.listen_fd < 0 || bind(w.listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(w.listen_fd, 64))
		die("listen");
	w.memfd = memfd_create("sockmap_fuzz", 0);
	if (w.memfd < 0)
		die("memfd_create");
	w.buf = malloc(2 * MAX_LEN + 64);
	w.buf2 = malloc(2 * MAX_LEN + 64);
	if (!w.buf || !w.buf2)
		die("malloc");
	signals_init();
	return 0;
}

struct fsock *sock_by_uid(int uid)
{
	int i;

	for (i = 0; i < NSOCK; i++)
		if (socks[i].fd >= 0 && socks[i].uid == uid)
			return &socks[i];
	return NULL;
}

static struct fz_key key_of(int fd)
{
	struct sockaddr_in l, p;
	socklen_t len = sizeof(l);
	struct fz_key k = { 0, 0 };

	if (getsockname(fd, (struct sockaddr *)&l, &len))
		return k;
	len = sizeof(p);
	if (getpeername(fd, (struct sockaddr *)&p, &len))
		return k;
	k.lport = ntohs(l.sin_port);
	k.rport = ntohs(p.sin_port);
	return k;
}

void plan_write(struct fsock *s)
{
	struct fz_plan p = s->plan;

	if (s->fd < 0)
		return;
	/* Keep the counters the program keeps. */
	bpf_map_lookup_elem(w.plans_fd, &s->key, &p);
	p.action = s->plan.action;
	p.target = s->plan.target;
	p.apply = s->plan.apply;
	p.cork = s->plan.cork;
	p.skb_redir = s->plan.skb_redir;
	p.self = s->slot;
	if (bpf_map_update_elem(w.plans_fd, &s->key, &p, BPF_ANY))
		die("plans update");
}

uint64_t plan_runs(struct fsock *s)
{
	struct fz_plan p;

	if (s->fd < 0 || bpf_map_lookup_elem(w.plans_fd, &s->key, &p))
		return 0;
	return p.runs;
}

static void sock_open(struct fsock *s, int fd, int pair)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct timeval tv = { 0, SNDTIMEO_MS * 1000 };

	memset(s, 0, offsetof(struct fsock, lanes));
	s->nlanes = 0;
	s->fd = fd;
	s->slot = s - socks;
	s->uid = ++w.uids;
	s->pair = pair;
	s->key = key_of(fd);
	s->plan = slot_plan[s->slot];
	s->lowat = 1;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	s->ep_lt = epoll_create1(0);
	s->ep_et = epoll_create1(0);
	ev.data.fd = fd;
	epoll_ctl(s->ep_lt, EPOLL_CTL_ADD, fd, &ev);
	ev.events |= EPOLLET;
	epoll_ctl(s->ep_et, EPOLL_CTL_ADD, fd, &ev);
	model_new_sock(s);
	plan_write(s);
}

static void sock_close(struct fsock *s, bool abort_it)
{
	struct linger l = { 1, 0 };

	if (s->fd < 0)
		return;
	model_close(s, abort_it);
	bpf_map_delete_elem(w.plans_fd, &s->key);
	if (abort_it)
		setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(s->ep_lt);
	close(s->ep_et);
	close(s->fd);
	s->fd = -1;
	s->in_socks = s->in_vsocks = false;
}

static void connect_pair(int p)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int c, sv;

	if (getsockname(w.listen_fd, (struct sockaddr *)&a, &len))
		die("getsockname");
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	sv = accept(w.listen_fd, NULL, NULL);
	if (sv < 0)
		die("accept");
	sock_open(&socks[2 * p], c, p);
	sock_open(&socks[2 * p + 1], sv, p);
}

void world_begin(void)
{
	int i;

	for (i = 0; i < NSOCK; i++) {
		socks[i].fd = -1;
		socks[i].nlanes = 0;
		slot_plan[i] = (struct fz_plan){ .action = FZ_REDIR, .target = i ^ 1 };
	}
	npairs = 0;
	w.pressure_used = false;
	model_reset();
	if (!w.attached && bpf_prog_attach(w.msg_prog, w.socks_fd, BPF_SK_MSG_VERDICT, 0))
		die("attach sk_msg");
	w.attached = true;
}

void pressure_restore(void)
{
	FILE *f;

	if (!*tcp_mem_saved)
		return;
	f = fopen(TCP_MEM, "w");
	if (f) {
		fputs(tcp_mem_saved, f);
		fclose(f);
	}
	*tcp_mem_saved = 0;
}

void world_end(void)
{
	int i;

	for (i = 0; i < NSOCK; i++)
		sock_close(&socks[i], true);
	pressure_restore();
}

static int pressure(bool on)
{
	long long low, mid, hard;
	FILE *f;

	if (!on || *tcp_mem_saved) {
		pressure_restore();
		return 0;
	}
	f = fopen(TCP_MEM, "r");
	if (!f || !fgets(tcp_mem_saved, sizeof(tcp_mem_saved), f) ||
	    sscanf(tcp_mem_saved, "%lld %lld %lld", &low, &mid, &hard) != 3) {
		if (f)
			fclose(f);
		*tcp_mem_saved = 0;
		return -errno;
	}
	fclose(f);
	f = fopen(TCP_MEM, "w");
	if (!f)
		return -errno;
	fprintf(f, "1 1 %lld\n", hard);
	fclose(f);
	w.pressure_used = true;
	return 0;
}

/* A new psock for a socket that had none: nothing in force. */
static void psock_new(struct fsock *s)
{
	s->eval = EV_NONE;
	s->apply_rem = s->cork_rem = 0;
	s->cork_len = 0;
	s->apply_unsure = false;
	s->msg_prog = s->verdict_prog = false;
}

static void op_insert(struct fsock *s, char *res, size_t len)
{
	bool alive = s->in_socks || s->in_vsocks;
	bool busy = alive && s->msg_prog && w.attached;
	uint64_t fd = s->fd;
	uint32_t key = s->slot;

	if (s->in_socks) {
		snprintf(res, len, "skip:in-map");
		return;
	}
	if (bpf_map_update_elem(w.socks_fd, &key, &fd, BPF_ANY)) {
		snprintf(res, len, "err:%s%s", errno_name(errno), busy ? " (expected)" : "");
		return;
	}
	if (busy)
		fail("insert", "slot %d: a psock with an sk_msg program went into a map with one",
		     s->slot);
	if (!alive)
		psock_new(s);
	s->in_socks = true;
	s->msg_prog = s->msg_prog || w.attached;
	snprintf(res, len, "ok%s", s->msg_prog ? "" : " (no program)");
}

static bool tcp_pending(struct fsock *s)
{
	int i;

	for (i = 0; i < s->nlanes; i++)
		if (s->lanes[i].path == P_TCP && lane_pending(&s->lanes[i]))
			return true;
	return false;
}

static void op_delete(struct fsock *s, bool verdict, char *res, size_t len)
{
	uint32_t key = s->slot;
	bool *in = verdict ? &s->in_vsocks : &s->in_socks;

	if (!*in) {
		snprintf(res, len, "skip:not-in-map");
		return;
	}
	if (bpf_map_delete_elem(verdict ? w.vsocks_fd : w.socks_fd, &key)) {
		fail("delete", "slot %d: map delete failed: %s", s->slot, strerror(errno));
		return;
	}
	*in = false;
	if (verdict)
		model_vdelete(s);
	if (!s->in_socks && !s->in_vsocks)
		model_psock_gone(s);
	snprintf(res, len, "ok");
}

static void op_vinsert(struct fsock *s, char *res, size_t len)
{
	bool alive = s->in_socks || s->in_vsocks;
	uint32_t key = s->slot;
	uint64_t fd = s->fd;

	if (s->in_vsocks) {
		snprintf(res, len, "skip:in-map");
		return;
	}
	if (tcp_pending(s)) {
		/* Known base fault: tcp_read_skb() hands the verdict whole
		 * skbs, the part a read took already included.
		 */
		snprintf(res, len, "skip:tcp-unread");
		return;
	}
	if (bpf_map_update_elem(w.vsocks_fd, &key, &fd, BPF_ANY)) {
		snprintf(res, len, "err:%s", errno_name(errno));
		return;
	}
	if (!alive)
		psock_new(s);
	s->in_vsocks = true;
	s->verdict_prog = s->had_verdict = s->verdict_since_look = true;
	snprintf(res, len, "ok");
}

static void op_plan(const struct op *o, struct fsock *s, char *res, size_t len)
{
	struct fz_plan p = slot_plan[o->s];
	const char *why;

	p.action = (unsigned int)o->a % FZ_NACTIONS;
	p.target = (unsigned int)o->b % (2 * npairs);
	p.apply = o->c > 0 ? o->c : 0;
	p.cork = o->d > 0 && !p.apply ? o->d : 0;
	if (s->fd >= 0 && !model_plan_ok(s, &p, &why)) {
		snprintf(res, len, "skip:%s", why);
		return;
	}
	slot_plan[o->s] = p;
	if (s->fd >= 0) {
		s->plan = p;
		plan_write(s);
	}
	snprintf(res, len, "ok");
}

static void op_prog(bool attach, char *res, size_t len)
{
	int err;

	if (attach == w.attached) {
		snprintf(res, len, "skip:%s", attach ? "attached" : "detached");
		return;
	}
	err = attach ? bpf_prog_attach(w.msg_prog, w.socks_fd, BPF_SK_MSG_VERDICT, 0) :
		       bpf_prog_detach2(w.msg_prog, w.socks_fd, BPF_SK_MSG_VERDICT);
	if (err) {
		fail("prog", "%s the sk_msg program: %s", attach ? "attach" : "detach", strerror(errno));
		return;
	}
	w.attached = attach;
	snprintf(res, len, "ok");
}

static void result_of(ssize_t ret, int err, size_t want, char *res, size_t len)
{
	if (ret < 0)
		snprintf(res, len, "%s", err == EAGAIN ? "eagain" : "err:");
	if (ret < 0 && err != EAGAIN)
		snprintf(res, len, "err:%s", errno_name(err));
	else if (ret >= 0)
		snprintf(res, len, "%s %zd/%zu", (size_t)ret == want ? "ok" : "partial", ret, want);
}

static ssize_t do_send(struct fsock *s, const struct op *o, uint8_t *buf, int *flags)
{
	struct iovec iov[4];
	struct msghdr mh = { .msg_iov = iov };
	size_t len = o->a, off = 0;
	int f = MSG_NOSIGNAL, i, n;

	if (o->b & SF_DONTWAIT)
		f |= MSG_DONTWAIT;
	if (o->b & SF_MORE)
		f |= MSG_MORE;
	*flags = o->b;
	switch (o->c) {
	case SS_SENDMSG:
		n = 1 + len % 4;
		for (i = 0; i < n; i++) {
			size_t part = i == n - 1 ? len - off : len / n;

			iov[i].iov_base = buf + off;
			iov[i].iov_len = part;
			off += part;
		}
		mh.msg_iovlen = n;
		return sendmsg(s->fd, &mh, f);
	case SS_WRITE:
		*flags = 0;
		return write(s->fd, buf, len);
	default:
		return send(s->fd, buf, len, f);
	}
}

static void op_send(const struct op *o, struct fsock *s, bool file, char *res, size_t len)
{
	size_t want = o->a > 0 ? (o->a > MAX_LEN ? MAX_LEN : o->a) : 1;
	uint64_t runs = plan_runs(s);
	int flags = 0, err = 0;
	off_t zero = 0;
	ssize_t ret;

	stream_gen(s->sid, s->sent, w.buf, want);
	if (file) {
		if (ftruncate(w.memfd, 0) || pwrite(w.memfd, w.buf, want, 0) != (ssize_t)want)
			die("memfd");
		ret = sendfile(s->fd, w.memfd, &zero, want);
	} else {
		struct op o2 = *o;

		o2.a = want;
		ret = do_send(s, &o2, w.buf, &flags);
	}
	if (ret < 0)
		err = errno;
	result_of(ret, err, want, res, len);
	if (file)
		model_sendfile(s, want, ret < 0 ? -err : ret);
	else
		model_send(s, want, flags, ret < 0 ? -err : ret, plan_runs(s) - runs);
	sigio_check(res, len);
}

static void op_opt(const struct op *o, struct fsock *s, char *res, size_t len)
{
	static const int name[NOPTS] = { TCP_NODELAY, TCP_CORK, SO_SNDBUF, SO_RCVBUF, SO_RCVLOWAT };
	int kind = (unsigned int)o->a % NOPTS, level = kind <= O_CORK ? IPPROTO_TCP : SOL_SOCKET;
	int v = o->b;

	if (setsockopt(s->fd, level, name[kind], &v, sizeof(v))) {
		snprintf(res, len, "err:%s", errno_name(errno));
		return;
	}
	if (kind == O_NODELAY) {
		s->nodelay = v;
		if (v)
			model_push(s);
	} else if (kind == O_CORK) {
		s->tcp_cork = v;
		if (!v)
			model_push(s);
	} else if (kind == O_LOWAT) {
		s->lowat = v > 0 ? v : 1;
	} else if (kind == O_RCVBUF) {
		s->rcvbuf_set = true;
	}
	snprintf(res, len, "ok");
}

static void op_connect(const struct op *o, char *res, size_t len)
{
	int p = (unsigned int)o->s % npairs, i;
	char r2[64];

	sock_close(&socks[2 * p], true);
	sock_close(&socks[2 * p + 1], true);
	connect_pair(p);
	for (i = 0; i < 2; i++)
		if (o->a & (1 << i))
			op_insert(&socks[2 * p + i], r2, sizeof(r2));
	snprintf(res, len, "ok");
}

static bool op_pairs(const struct op *o, char *res, size_t len)
{
	int p;

	if (npairs) {
		snprintf(res, len, "skip:pairs-exist");
		return true;
	}
	npairs = o->a < 1 ? 1 : o->a > MAX_PAIRS ? MAX_PAIRS : o->a;
	for (p = 0; p < npairs; p++)
		connect_pair(p);
	snprintf(res, len, "ok %d", npairs);
	return true;
}

/* Operations on a socket that is closed (or a slot beyond the pairs). */
static bool needs_sock(int kind)
{
	return kind != OP_PAIRS && kind != OP_DETACH && kind != OP_ATTACH && kind != OP_CONNECT &&
	       kind != OP_PRESSURE && kind != OP_PLAN;
}

void exec_op(const struct op *o, char *res, size_t len)
{
	struct fsock *s = o->s >= 0 && o->s < NSOCK ? &socks[o->s] : NULL;
	int err;

	lost_track_op = false;
	if (o->kind != OP_PAIRS && !npairs) {
		snprintf(res, len, "skip:no-pairs");
		return;
	}
	if (needs_sock(o->kind) && (!s || o->s >= 2 * npairs || s->fd < 0)) {
		snprintf(res, len, "skip:closed");
		return;
	}
	if (o->kind == OP_PLAN && (!s || o->s >= 2 * npairs)) {
		snprintf(res, len, "skip:no-slot");
		return;
	}
	switch (o->kind) {
	case OP_PAIRS:
		op_pairs(o, res, len);
		break;
	case OP_INSERT:
		op_insert(s, res, len);
		break;
	case OP_DELETE:
		op_delete(s, false, res, len);
		break;
	case OP_VINSERT:
		op_vinsert(s, res, len);
		break;
	case OP_VDELETE:
		op_delete(s, true, res, len);
		break;
	case OP_PLAN:
		op_plan(o, s, res, len);
		break;
	case OP_SKB:
		slot_plan[o->s].skb_redir = s->plan.skb_redir = !!o->a;
		plan_write(s);
		snprintf(res, len, "ok");
		break;
	case OP_DETACH:
	case OP_ATTACH:
		op_prog(o->kind == OP_ATTACH, res, len);
		break;
	case OP_SEND:
	case OP_SENDFILE:
		op_send(o, s, o->kind == OP_SENDFILE, res, len);
		break;
	case OP_OPT:
		op_opt(o, s, res, len);
		break;
	case OP_READ:
		op_read(o, s, res, len);
		break;
	case OP_ASYNC:
		op_async(s, o->a, res, len);
		break;
	case OP_SHUT:
		if (shutdown(s->fd, SHUT_WR)) {
			snprintf(res, len, "err:%s", errno_name(errno));
			break;
		}
		model_shut(s);
		snprintf(res, len, "ok");
		break;
	case OP_CLOSE:
		sock_close(s, o->a);
		snprintf(res, len, "ok");
		break;
	case OP_CONNECT:
		op_connect(o, res, len);
		break;
	case OP_PRESSURE:
		err = pressure(o->a);
		snprintf(res, len, err ? "err:%s" : "ok", errno_name(-err));
		break;
	}
}
