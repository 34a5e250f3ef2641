// SPDX-License-Identifier: GPL-2.0
/* The writer of a slot: writes of random sizes by every call, socket
 * options toggled, a mixed stream put back on redirection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "stress.h"

/* ---- the writer ---- */

/* A mixed writer whose sk_msg verdict turned to passing goes back to
 * redirection some writes later, once its reader has every byte it
 * wrote: redirected bytes would overtake TCP bytes still on their way
 * (as after a map re-insert). By the writer between writes (the program
 * runs in its sendmsg() only), without touching its random state.
 */
static void mix_rearm(struct conn *c, unsigned int *passing_for)
{
	struct stream *st = c->st;
	double until = now() + 2;
	struct plan p;

	if (bpf_map_lookup_elem(plans_fd, &c->tx_key, &p) || !p.passing) {
		*passing_for = 0;
		return;
	}
	if (++*passing_for < 1 + (p.salt ^ p.n) % 16)
		return;
	while (atomic_load(&st->received) != atomic_load(&st->written) && now() < until &&
	       atomic_load(&st->end) == RUNNING && !atomic_load(&stop_writers))
		usleep(1000);
	if (atomic_load(&st->received) != atomic_load(&st->written))
		return; /* try again after the next write */
	p.passing = 0;
	if (bpf_map_update_elem(plans_fd, &c->tx_key, &p, BPF_EXIST))
		fail("slot %d: plan update: %s", c->slot, strerror(errno));
	*passing_for = 0;
	count(mix_rearms, 1);
}

static ssize_t send_some(struct conn *c, const uint8_t *buf, size_t len)
{
	struct iovec iov[8];
	struct msghdr mh = { .msg_iov = iov };
	size_t left = len;
	int flags = MSG_NOSIGNAL;

	switch (rnd(&c->rnd) % 4) {
	case 0:
		return write(c->tx_fd, buf, len);
	case 1:
		if (one_in(&c->rnd, 2))
			flags |= MSG_MORE;
		return send(c->tx_fd, buf, len, flags);
	default: /* writev or sendmsg, 1-8 pieces */
		for (mh.msg_iovlen = 0; left && mh.msg_iovlen < 8; mh.msg_iovlen++) {
			size_t n = mh.msg_iovlen == 7 ? left : 1 + rnd(&c->rnd) % left;

			iov[mh.msg_iovlen].iov_base = (void *)(buf + len - left);
			iov[mh.msg_iovlen].iov_len = n;
			left -= n;
		}
		if (one_in(&c->rnd, 2))
			return writev(c->tx_fd, iov, mh.msg_iovlen);
		if (one_in(&c->rnd, 4))
			flags |= MSG_MORE;
		return sendmsg(c->tx_fd, &mh, flags);
	}
}

void *writer(void *arg)
{
	struct conn *c = arg;
	struct stream *st = c->st;
	uint8_t *buf = malloc(MAX_WRITE);
	/* A self slot's reader shares the file (and its O_NONBLOCK). */
	bool nonblock = c->role != SELF && one_in(&c->rnd, 2);
	struct conn *rc = reader_slot(c);
	unsigned int passing_for = 0;

	atomic_store(&c->writer_tid, gettid());
	/* Its allocations may fail from now on: not those of a page fault
	 * on the buffer (a page table's), which would end in the OOM killer.
	 */
	if (!buf)
		die("malloc");
	memset(buf, 0, MAX_WRITE);
	if (opt.fail_pct && write_file("/proc/thread-self/make-it-fail", "1"))
		die("make-it-fail");
	set_nonblock(c->tx_fd, nonblock);
	while (!atomic_load(&stop_writers) && atomic_load(&st->end) == RUNNING) {
		uint64_t off = atomic_load(&st->written);
		size_t len;
		ssize_t n;

		if (take_req(c, F_CLOSE_TX) || take_req(c, F_SHUT_TX))
			break;
		if (atomic_load(&c->hold)) {
			usleep(1000);
			continue;
		}
		if (c->mixed)
			mix_rearm(c, &passing_for);
		if (one_in(&c->rnd, 20)) {
			switch (rnd(&c->rnd) % 3) {
			case 0:
				set_flag(c->tx_fd, IPPROTO_TCP, TCP_NODELAY, rnd(&c->rnd) & 1);
				break;
			case 1:
				set_flag(c->tx_fd, IPPROTO_TCP, TCP_CORK, rnd(&c->rnd) & 1);
				break;
			default:
				nonblock = c->role != SELF && !nonblock;
				set_nonblock(c->tx_fd, nonblock);
			}
			count(toggles, 1);
		}
		len = rnd_size(&c->rnd);
		gen(st, off, buf, len);
		atomic_store(&c->in_write, true);
		if (atomic_load(&c->hold)) { /* the injector came first */
			atomic_store(&c->in_write, false);
			continue;
		}
		n = send_some(c, buf, len);
		atomic_store(&c->in_write, false);
		count(writes, 1);
		if (n > 0) {
			atomic_fetch_add(&st->written, n);
			count(written, n);
			touch(st);
			continue;
		}
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = c->tx_fd, .events = POLLOUT };

			count(eagain, 1);
			poll(&p, 1, 200);
		} else if (n < 0 && errno == EACCES) {
			/* The verdict dropped it: the target left the map
			 * between the program's lookup and the redirect.
			 */
			count(eacces, 1);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == ENOMEM && opt.fail_pct) {
			/* An injected failure: nothing of this write was
			 * accepted, the next one starts at the same offset.
			 */
			count(enomem, 1);
		} else if (atomic_load(&st->end) == ENDED_RX || atomic_load(&stop_writers)) {
			break; /* the reader is gone, or we are told to stop */
		} else {
			fail("stream %d (%s slot %d): write returned %zd: %s at offset %llu",
			     st->id, role_name[c->role], c->slot, n, strerror(errno),
			     (unsigned long long)off);
			break;
		}
	}
	atomic_store(&st->writer_done, true);
	touch(st);
	if (rc->has_reader)
		kick(&rc->ep); /* it may be done */
	free(buf);
	atomic_store(&c->writer_exited, true);
	return NULL;
}
