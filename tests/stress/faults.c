// SPDX-License-Identifier: GPL-2.0
/* Faults: allocation failures (--fail-alloc) and TCP memory pressure,
 * then the injector (closes, shutdowns, map deletions and re-inserts,
 * program detaches) and the ends of a slot that it hits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "stress.h"

/* ---- allocation failures (--fail-alloc) ---- */

/* The kernel's fault injection fails a share of the writer threads'
 * allocations: those from the sk_msg cache, and pages (sleeping
 * allocations too; not highmem ones, so that user page faults go on).
 * Each attribute fails at most FAIL_TIMES times; what is left of that
 * says how many failures it injected.
 */
#define DEBUGFS		"/sys/kernel/debug"
#define FAIL_TIMES	100000000
static const char *const fail_attr[] = { "failslab", "fail_page_alloc" };

void fail_setup(void)
{
	char path[128];

	if (access(DEBUGFS "/failslab", F_OK) &&
	    mount("debugfs", DEBUGFS, "debugfs", 0, NULL) && errno != EBUSY)
		die("mount debugfs");
	for (size_t i = 0; i < sizeof(fail_attr) / sizeof(*fail_attr); i++) {
		static const char *const knobs[][2] = {
			{ "verbose", "0" }, { "interval", "1" }, { "task-filter", "Y" },
			{ "ignore-gfp-wait", "N" }, { "space", "0" },
		};

		for (size_t k = 0; k < sizeof(knobs) / sizeof(*knobs); k++) {
			snprintf(path, sizeof(path), DEBUGFS "/%s/%s", fail_attr[i], knobs[k][0]);
			if (write_file(path, "%s", knobs[k][1]))
				die(path); /* a kernel without fault injection? */
		}
		snprintf(path, sizeof(path), DEBUGFS "/%s/times", fail_attr[i]);
		if (write_file(path, "%d", FAIL_TIMES))
			die(path);
		snprintf(path, sizeof(path), DEBUGFS "/%s/probability", fail_attr[i]);
		if (write_file(path, "%u", opt.fail_pct))
			die(path);
	}
	if (write_file(DEBUGFS "/failslab/cache-filter", "Y") ||
	    write_file("/sys/kernel/slab/sk_msg/failslab", "1"))
		die("failslab on the sk_msg cache (a kernel without the series?)");
	if (write_file(DEBUGFS "/fail_page_alloc/min-order", "0"))
		die(DEBUGFS "/fail_page_alloc/min-order");
}

/* The failures each attribute injected; and no more from now on. */
static long long fail_stop(const char *attr)
{
	char path[128];
	long long left;

	snprintf(path, sizeof(path), DEBUGFS "/%s/probability", attr);
	write_file(path, "0");
	snprintf(path, sizeof(path), DEBUGFS "/%s/times", attr);
	left = read_figure(path, NULL);
	return left < 0 ? -1 : FAIL_TIMES - left;
}

void check_fail_alloc(void)
{
	long long slab = fail_stop("failslab"), page = fail_stop("fail_page_alloc");

	unit("allocation failures injected", slab <= 0 || page <= 0,
	     "%u%% of the writers' sk_msg and page allocations: %lld sk_msg, %lld page allocations failed; %llu writes failed with ENOMEM, every accepted byte delivered",
	     opt.fail_pct, slab, page, (unsigned long long)total.enomem);
}

/* ---- TCP memory pressure (the middle third of the run) ---- */

/* With net.ipv4.tcp_mem's low and pressure thresholds at one page, TCP is
 * under memory pressure from its next allocation on: senders' buffers are
 * moderated, receive windows clamped, and a socket gets memory beyond its
 * minimum only within its share of the hard limit, which stays as it was.
 * The streams must go on meanwhile, every byte verified, and come back
 * from it when the thresholds do.
 */
#define TCP_MEM		"/proc/sys/net/ipv4/tcp_mem"
struct pressure pressure;

/* TcpExt @key of /proc/net/netstat, or -1. */
static long long tcpext(const char *key)
{
	char names[4096], values[4096], *sn, *sv, *n, *v;
	long long figure = -1;
	FILE *f = fopen("/proc/net/netstat", "r");

	while (f && fgets(names, sizeof(names), f) && fgets(values, sizeof(values), f)) {
		if (strncmp(names, "TcpExt:", 7))
			continue;
		for (n = strtok_r(names, " \n", &sn), v = strtok_r(values, " \n", &sv); n && v;
		     n = strtok_r(NULL, " \n", &sn), v = strtok_r(NULL, " \n", &sv))
			if (!strcmp(n, key))
				figure = atoll(v);
		break;
	}
	if (f)
		fclose(f);
	return figure;
}

void pressure_end(void)
{
	if (*pressure.saved && write_file(TCP_MEM, "%s", pressure.saved))
		die(TCP_MEM);
	*pressure.saved = 0;
}

void pressure_start(void)
{
	long long low, mid, hard;
	FILE *f = fopen(TCP_MEM, "r");

	if (!f || !fgets(pressure.saved, sizeof(pressure.saved), f) ||
	    sscanf(pressure.saved, "%lld %lld %lld", &low, &mid, &hard) != 3)
		die(TCP_MEM);
	fclose(f);
	atexit(pressure_end);
	pressure.entered = tcpext("TCPMemoryPressures");
	pressure.verified = atomic_load(&total.verified);
	if (write_file(TCP_MEM, "1 1 %lld\n", hard))
		die(TCP_MEM);
	msg("TCP memory pressure on (tcp_mem 1 1 %lld, was %lld %lld %lld)", hard, low, mid, hard);
}

void pressure_stop(void)
{
	long long entered = tcpext("TCPMemoryPressures") - pressure.entered;
	uint64_t bytes = atomic_load(&total.verified) - pressure.verified;

	pressure_end();
	pressure.done = true;
	msg("TCP memory pressure off");
	unit("TCP memory pressure", pressure.entered < 0 || entered <= 0 || !bytes,
	     "entered %lld time(s) with tcp_mem's thresholds at one page; %llu bytes verified meanwhile",
	     entered, (unsigned long long)bytes);
}

/* ---- faults ---- */

/* Close or shut down the writer's end, by the writer, between writes: the
 * reader must then get everything written, and EOF.
 */
static void writer_fault(struct conn *c, enum fault f)
{
	pthread_mutex_lock(&c->lock);
	end_stream(c->st, ENDED_TX);
	if (f == F_CLOSE_TX) {
		close(c->tx_fd);
		c->tx_fd = -1;
	} else {
		shutdown(c->tx_fd, SHUT_WR);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Close or shut down the reader's end, by the reader. The stream ends at
 * what was read. After a shutdown the writer's end is shut down too, or a
 * writer blocked on a reader that will never read would wait forever;
 * after a close, the kernel must wake it up with an error.
 */
static void reader_fault(struct conn *c, enum fault f)
{
	pthread_mutex_lock(&c->lock);
	end_streams(&c->ep, ENDED_RX);
	if (f == F_CLOSE_RX) {
		close(c->rx_fd);
		c->rx_fd = -1;
	} else {
		shutdown(c->rx_fd, SHUT_RDWR);
		if (c->tx_fd >= 0)
			shutdown(c->tx_fd, SHUT_WR);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Carry out fault @f if the injector asked for it (by the thread that owns
 * the end it hits).
 */
bool take_req(struct conn *c, enum fault f)
{
	int want = f;

	if (!atomic_compare_exchange_strong(&c->req, &want, -1))
		return false;
	if (f == F_CLOSE_TX || f == F_SHUT_TX)
		writer_fault(c, f);
	else
		reader_fault(c, f);
	return true;
}

/* Put the writer back into the map once its reader has everything it
 * wrote over plain TCP: redirected bytes would otherwise overtake the
 * TCP bytes still queued (by design, in every kernel).
 */
static void reinsert(struct conn *c)
{
	struct stream *st = c->st;
	double until = now() + 5;

	atomic_store(&c->hold, true);
	while (atomic_load(&c->in_write) && now() < until)
		usleep(1000);
	while (atomic_load(&st->received) != atomic_load(&st->written) && now() < until &&
	       atomic_load(&st->end) == RUNNING)
		usleep(1000);
	if (!atomic_load(&c->in_write) && atomic_load(&st->end) == RUNNING &&
	    atomic_load(&st->received) == atomic_load(&st->written)) {
		pthread_mutex_lock(&c->lock);
		if (c->tx_fd >= 0) {
			uint64_t fd = c->tx_fd;

			if (bpf_map_update_elem(map_fd, &c->tx_key, &fd, BPF_ANY))
				fail("slot %d: re-insert: %s", c->slot, strerror(errno));
			atomic_store(&c->tx_deleted, false);
			count(faults[F_REINSERT_TX], 1);
		}
		pthread_mutex_unlock(&c->lock);
	}
	atomic_store(&c->hold, false);
}

static void request(struct conn *c, enum fault f)
{
	int none = -1;

	if (atomic_compare_exchange_strong(&c->req, &none, f))
		count(faults[f], 1);
	if (f == F_CLOSE_RX || f == F_SHUT_RX)
		kick(&c->ep);
}

static void inject(uint64_t *r)
{
	enum fault f = rnd(r) % NFAULTS;
	struct conn *c = &conns[rnd(r) % opt.conns];

	if (f == F_DETACH || f == F_ATTACH) {
		bool on = atomic_load(&msg_prog_attached);

		if (on)
			bpf_prog_detach2(msg_prog_fd, map_fd, BPF_SK_MSG_VERDICT);
		else if (bpf_prog_attach(msg_prog_fd, map_fd, BPF_SK_MSG_VERDICT, 0))
			fail("re-attach sk_msg: %s", strerror(errno));
		atomic_store(&msg_prog_attached, !on);
		count(faults[on ? F_DETACH : F_ATTACH], 1);
		return;
	}
	/* Faults hit pair and verdict slots; fan-in extra senders can lose
	 * their writer.
	 */
	if (atomic_load(&c->st->end) != RUNNING)
		return;
	if (c->role == FANIN && c->target && (f == F_CLOSE_TX || f == F_SHUT_TX)) {
		request(c, f);
		return;
	}
	if (!is_pair(c))
		return;
	switch (f) {
	case F_DELETE_TX:
	case F_REINSERT_TX:
		if (atomic_load(&c->tx_deleted)) {
			reinsert(c);
		} else if (bpf_map_delete_elem(map_fd, &c->tx_key) == 0) {
			atomic_store(&c->tx_deleted, true);
			count(faults[F_DELETE_TX], 1);
		} else {
			fail("slot %d: map delete: %s", c->slot, strerror(errno));
		}
		break;
	default:
		request(c, f);
	}
}

atomic_bool injector_stop;

void *injector(void *arg)
{
	uint64_t r = rnd_seed(0xfa, 0);

	(void)arg;
	while (!atomic_load(&injector_stop) && !atomic_load(&failed)) {
		usleep(1000 * (100 + rnd(&r) % 700));
		if (opt.faults)
			inject(&r);
		for (unsigned int i = 0; i < opt.conns; i++)
			if (is_pair(&conns[i]) && atomic_load(&conns[i].st->end) != RUNNING)
				recycle(&conns[i]);
	}
	return NULL;
}
