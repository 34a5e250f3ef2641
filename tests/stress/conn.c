// SPDX-License-Identifier: GPL-2.0
/* Connections and the BPF side: the programs loaded and attached, slots
 * connected and put in the maps (routes, plans), and a slot whose
 * stream ended connected anew.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "stress.h"

/* ---- BPF ---- */

int map_fd, plans_fd, msg_prog_fd;
static int verdict_fd, routes_fd, stats_fd;
atomic_bool msg_prog_attached;

static int prog_fd(struct bpf_object *obj, const char *name)
{
	return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

int bpf_setup(void)
{
	struct bpf_object *obj;
	int cg;

	obj = bpf_object__open_file(opt.bpf_obj, NULL);
	if (!obj || libbpf_get_error(obj) || bpf_object__load(obj)) {
		fprintf(stderr, "sockmap_stress: cannot load %s\n", opt.bpf_obj);
		exit(2);
	}
	map_fd = bpf_object__find_map_fd_by_name(obj, "sock_hash");
	verdict_fd = bpf_object__find_map_fd_by_name(obj, "verdict_hash");
	routes_fd = bpf_object__find_map_fd_by_name(obj, "routes");
	plans_fd = bpf_object__find_map_fd_by_name(obj, "plans");
	stats_fd = bpf_object__find_map_fd_by_name(obj, "stats");
	msg_prog_fd = prog_fd(obj, "stress_sk_msg");
	if (bpf_prog_attach(msg_prog_fd, map_fd, BPF_SK_MSG_VERDICT, 0))
		die("attach sk_msg");
	atomic_store(&msg_prog_attached, true);
	/* Before any socket goes in: a socket gets the programs its map
	 * has when it is inserted. Never detached.
	 */
	if (bpf_prog_attach(prog_fd(obj, "stress_sk_skb"), verdict_fd,
			    BPF_SK_SKB_STREAM_VERDICT, 0))
		die("attach sk_skb stream_verdict");

	cg = cgroup_enter();
	if (bpf_prog_attach(prog_fd(obj, "stress_sockops"), cg, BPF_CGROUP_SOCK_OPS, 0))
		die("attach sockops");
	return cg;
}

uint64_t bpf_stat(enum stress_stat i)
{
	uint32_t key = i;
	uint64_t v = 0;

	bpf_map_lookup_elem(stats_fd, &key, &v);
	return v;
}

/* ---- connections ---- */

const char *const role_name[] = { "pair", "verdict", "self", "fanin", "never" };
const char *const mode_name[] = { "read", "peek", "epoll-lt", "epoll-et", "epoll-frame" };

struct conn *conns;
/* Against the watchdog looking at a slot that is being reconnected. */
pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
int listen_fd;

static struct sock_key key_of(int fd)
{
	struct sockaddr_in l, p;
	socklen_t len = sizeof(l);
	struct sock_key k;

	if (getsockname(fd, (struct sockaddr *)&l, &len))
		die("getsockname");
	len = sizeof(p);
	if (getpeername(fd, (struct sockaddr *)&p, &len))
		die("getpeername");
	k.sip = l.sin_addr.s_addr;
	k.dip = p.sin_addr.s_addr;
	k.sport = ntohs(l.sin_port);
	k.dport = ntohs(p.sin_port);
	return k;
}

static void connect_pair(int *client, int *server)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(listen_fd, (struct sockaddr *)&a, &len))
		die("getsockname");
	*client = socket(AF_INET, SOCK_STREAM, 0);
	if (*client < 0 || connect(*client, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	*server = accept(listen_fd, NULL, NULL);
	if (*server < 0)
		die("accept");
}

static bool in_map(int fd)
{
	struct sock_key k = key_of(fd);
	uint64_t cookie;

	return bpf_map_lookup_elem(map_fd, &k, &cookie) == 0;
}

/* Close a socket whose stream is over with a reset: its peer must not
 * keep what it still has to send, and the memory of it, through minutes
 * of zero-window probes (a verdict receiver closes with a FIN whatever
 * its ingress queue holds).
 */
void close_abort(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

void set_flag(int fd, int level, int name, int on)
{
	setsockopt(fd, level, name, &on, sizeof(on));
}

void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A mixed stream ends: did it pass some messages and redirect others? */
void mix_done(struct conn *c)
{
	struct plan p;

	if (c->mixed && !bpf_map_lookup_elem(plans_fd, &c->tx_key, &p) && p.passed && p.redirected)
		count(mixed_both, 1);
}

/* Pair and verdict slots: one writer, one reader, one stream; the faults
 * hit these, and they reconnect.
 */
bool is_pair(const struct conn *c)
{
	return c->role == PAIR || c->role == VERDICT;
}

/* The slot whose reader reads @c's stream (fan-in: the target). */
struct conn *reader_slot(struct conn *c)
{
	return c->role == FANIN && c->target ? c->target : c;
}

/* Have a framing reader, in epoll_wait(), look at its requests. */
void kick(struct endpoint *ep)
{
	uint64_t one = 1;

	if (ep->kick >= 0 && write(ep->kick, &one, sizeof(one)) < 0 && errno != EAGAIN)
		die("eventfd");
}

/* ---- setting up slots ---- */

static void route(int from_fd, int to_fd)
{
	struct sock_key from = key_of(from_fd), to = key_of(to_fd);

	if (bpf_map_update_elem(routes_fd, &from, &to, BPF_ANY))
		die("routes update");
}

/* A framing reader holds a partial frame unread while it waits for the
 * rest, which may come through TCP (mixed streams, verdict slots). Two
 * limits of the base sockmap receive path can keep TCP's window shut on
 * it for good: a verdict receiver's skbs wait in its ingress queue
 * charged their truesize and are never collapsed as TCP's receive queue
 * is (seen: 6777 bytes queued, 102208 charged, rcvbuf 156194); and a
 * receiver in a sockmap does not autotune its rcvbuf, while TCP
 * announces no window with less than one MSS free, 64 KB on loopback
 * (seen: 2097 bytes unread, the rest of the frame in 2.6 MB of the
 * writer's TCP queue). Neither is what the harness looks for: a framing
 * reader gets room enough (2 MB) for them never to happen.
 */
static void frame_room(int fd)
{
	int rcvbuf = 1 << 20; /* doubled by the kernel */

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		die("SO_RCVBUFFORCE");
}

/* Give the socket of @key a plan: one verdict in @one_in picked. */
static void set_plan(const struct sock_key *key, uint32_t one_in, uint64_t salt)
{
	struct plan p = { .salt = salt, .one_in = one_in };

	if (bpf_map_update_elem(plans_fd, key, &p, BPF_ANY))
		die("plans update");
}

/* A new connection (and stream) in slot @c; fan-in members after their
 * target. Must be in the map (sockops) unless the program is detached:
 * then it is, but without the sk_msg program.
 */
static void open_slot(struct conn *c)
{
	static const uint32_t skb_one_in[] = { 0, 2, 16 }, msg_one_in[] = { 4, 16, 64 };
	uint64_t fd;

	c->rnd = rnd_seed(c->slot, c->gen);
	connect_pair(&c->tx_fd, &c->rx_fd);
	if (!in_map(c->tx_fd) || !in_map(c->rx_fd)) {
		fprintf(stderr, "sockmap_stress: slot %d: sockops did not insert the sockets\n", c->slot);
		exit(2);
	}
	c->tx_key = key_of(c->tx_fd);
	c->rx_key = key_of(c->rx_fd);
	atomic_store(&c->req, -1);
	atomic_store(&c->hold, false);
	atomic_store(&c->tx_deleted, false);
	atomic_store(&c->writer_exited, false);
	memset(&c->ep, 0, sizeof(c->ep));
	c->ep.c = c;
	c->ep.rnd = rnd_seed(c->slot + 1000, c->gen);
	c->ep.mode = rnd(&c->ep.rnd) % NMODES;
	c->ep.kick = -1;
	c->has_reader = true;
	switch (c->role) {
	case VERDICT:
		/* Before anything arrives, the receiver into the map that
		 * has the verdict program; one skb in 2 or 16 (or none)
		 * redirected to itself.
		 */
		set_plan(&c->rx_key, skb_one_in[rnd(&c->rnd) % 3], rnd(&c->rnd));
		fd = c->rx_fd;
		if (bpf_map_update_elem(verdict_fd, &c->rx_key, &fd, BPF_ANY))
			die("verdict_hash update");
		count(verdict_streams, 1);
		/* fall through */
	case PAIR:
		c->st = new_stream(0, false);
		c->ep.fd = c->rx_fd;
		c->ep.tags[0] = c->st;
		break;
	case NEVER:
		c->st = new_stream(0, true);
		c->has_reader = false;
		break;
	case SELF:
		c->st = new_stream(0, false);
		route(c->tx_fd, c->tx_fd);
		c->ep.fd = c->tx_fd;
		c->ep.mode %= 2; /* read or peek: epoll would make the writer's file non-blocking */
		c->ep.tags[0] = c->st;
		break;
	case FANIN:
		c->st = new_stream(c->target ? (int)(c - c->target) : 0, false);
		if (c->target) {
			route(c->tx_fd, c->target->rx_fd);
			c->target->ep.tags[c->st->tag] = c->st;
			c->has_reader = false;
			/* The server end of a fan-in sender gets nothing:
			 * anything that arrives there fails the run.
			 */
		} else {
			c->ep.fd = c->rx_fd;
			c->ep.tags[0] = c->st;
		}
		break;
	}
	if (c->has_reader && c->ep.mode == M_EPOLL_FRAME) {
		c->ep.kick = eventfd(0, EFD_NONBLOCK);
		if (c->ep.kick < 0)
			die("eventfd");
		/* Verdict receivers have one queue, which MSG_PEEK sees
		 * whole: on the others it stops where TCP's queue begins.
		 */
		c->ep.frame_peek = c->role == VERDICT && one_in(&c->ep.rnd, 2);
		frame_room(c->rx_fd);
		count(frame_readers, 1);
	}
	/* Streams written to the peer, half of them: pass and redirect. */
	c->mixed = (is_pair(c) || (c->role == FANIN && !c->target)) && one_in(&c->rnd, 2);
	if (c->mixed) {
		set_plan(&c->tx_key, msg_one_in[rnd(&c->rnd) % 3], rnd(&c->rnd));
		count(mixed_streams, 1);
	}
}

static void start_slot(struct conn *c)
{
	pthread_create(&c->writer, NULL, writer, c);
	if (c->has_reader)
		pthread_create(&c->ep.thread, NULL, reader, &c->ep);
}

/* A pair slot whose stream ended: when both its threads are done, close
 * it and connect anew.
 */
void recycle(struct conn *c)
{
	if (!atomic_load(&c->writer_exited) || !atomic_load(&c->ep.done))
		return;
	pthread_join(c->writer, NULL);
	pthread_join(c->ep.thread, NULL);
	if (atomic_load(&c->st->end) == ENDED_TX &&
	    atomic_load(&c->st->received) != atomic_load(&c->st->written))
		fail("stream %d (slot %d): the writer closed after %llu bytes, the reader got %llu before EOF",
		     c->st->id, c->slot, (unsigned long long)atomic_load(&c->st->written),
		     (unsigned long long)atomic_load(&c->st->received));
	if (atomic_load(&failed))
		return;
	pthread_mutex_lock(&slots_lock);
	close_abort(c->tx_fd);
	close_abort(c->rx_fd);
	if (c->ep.kick >= 0)
		close(c->ep.kick);
	mix_done(c);
	bpf_map_delete_elem(plans_fd, &c->tx_key);
	bpf_map_delete_elem(plans_fd, &c->rx_key);
	free(c->st);
	c->gen++;
	open_slot(c);
	pthread_mutex_unlock(&slots_lock);
	count(reconnects, 1);
	start_slot(c);
}

/* Slots come in blocks of 8: pair, pair, verdict, self, 3 fan-in, never;
 * what is left over after the last whole block are pairs.
 */
void make_slots(void)
{
	static const enum role block[8] = { PAIR, PAIR, VERDICT, SELF, FANIN, FANIN, FANIN, NEVER };

	conns = calloc(opt.conns, sizeof(*conns));
	for (unsigned int i = 0; i < opt.conns; i++) {
		struct conn *c = &conns[i];

		c->slot = i;
		c->role = i < opt.conns / 8 * 8 ? block[i % 8] : PAIR;
		if (c->role == FANIN && i % 8 != 4)
			c->target = &conns[i - i % 8 + 4];
		pthread_mutex_init(&c->lock, NULL);
		open_slot(c);
	}
	for (unsigned int i = 0; i < opt.conns; i++)
		start_slot(&conns[i]);
}
