// SPDX-License-Identifier: GPL-2.0
/* The reader of an endpoint, in its mode (read, peek, epoll level- or
 * edge-triggered, framing), each byte checked as it arrives.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "stress.h"

#define FRAME_BITS	14	/* frames of 1 B .. 8 KB */
#define FRAME_WAIT_MS	10000	/* a framing reader's epoll_wait() */

/* ---- the reader ---- */

/* Check @n bytes that arrived on @ep. */
static bool verify(struct endpoint *ep, uint8_t *buf, size_t n)
{
	struct stream *st = ep->tags[buf[0] >> 6];

	if (opt.corrupt && ep->c->slot == 0 && st) {
		uint64_t off = atomic_load(&st->received);

		if (off < (1u << 20) && off + n >= (1u << 20)) {
			buf[(1u << 20) - off - 1] ^= 1;
			msg("--corrupt: flipped a bit of stream %d at offset %u", st->id, (1u << 20) - 1);
		}
	}
	for (size_t i = 0; i < n;) {
		size_t run = 1;
		uint64_t off;

		st = ep->tags[buf[i] >> 6];
		if (!st) {
			fail("slot %d: byte 0x%02x of no stream that may arrive here", ep->c->slot, buf[i]);
			return false;
		}
		while (i + run < n && buf[i + run] >> 6 == st->tag)
			run++;
		off = atomic_load(&st->received);
		gen(st, off, ep->want, run);
		if (memcmp(ep->want, buf + i, run)) {
			size_t j = 0;

			while (ep->want[j] == buf[i + j])
				j++;
			mismatch(st, role_name[ep->c->role], off + j, buf + i + j, run - j);
			return false;
		}
		atomic_fetch_add(&st->received, run);
		count(verified, run);
		touch(st);
		i += run;
	}
	return true;
}

/* Are all the streams of @ep complete (or ended by their reader)? */
static bool satisfied(struct endpoint *ep)
{
	for (int t = 0; t < NTAGS; t++) {
		struct stream *st = ep->tags[t];

		if (st && atomic_load(&st->end) != ENDED_RX &&
		    (!atomic_load(&st->writer_done) ||
		     atomic_load(&st->received) != atomic_load(&st->written)))
			return false;
	}
	return true;
}

void end_streams(struct endpoint *ep, enum stream_end how)
{
	for (int t = 0; t < NTAGS; t++)
		if (ep->tags[t])
			end_stream(ep->tags[t], how);
}

/* The @n bytes read into @buf must be those MSG_PEEK showed in @peek. */
static bool same_as_peeked(struct endpoint *ep, const uint8_t *peek, const uint8_t *buf, size_t n)
{
	if (!memcmp(peek, buf, n))
		return true;
	/* A fan-in receiver whose own stream is mixed reads from two
	 * queues: a peek that found only TCP bytes (ingress_msg empty)
	 * and the read after it, which finds a message another client
	 * redirected meanwhile, see different bytes, on the unpatched
	 * kernel too (tcp_bpf_recvmsg() reads ingress_msg first). Each
	 * stream's order holds: verify() checks what was read.
	 */
	if (ep->c->role == FANIN && ep->c->mixed) {
		count(peeks_overtaken, 1);
		return true;
	}
	fail("slot %d (%s reader): read() returned other bytes than MSG_PEEK showed",
	     ep->c->slot, mode_name[ep->mode]);
	errno = EIO;
	return false;
}

/* Bytes written to @ep's streams and not read yet. received may run
 * ahead of written for a moment: the writer counts after sendmsg().
 */
static uint64_t unread(struct endpoint *ep)
{
	uint64_t n = 0;

	for (int t = 0; t < NTAGS; t++) {
		struct stream *st = ep->tags[t];
		uint64_t w, r;

		if (!st)
			continue;
		r = atomic_load(&st->received);
		w = atomic_load(&st->written);
		if (w > r)
			n += w - r;
	}
	return n;
}

/* How much of a frame of @want bytes a framing reader sees: FIONREAD, or
 * what MSG_PEEK copies into @peek; -1 with errno on an error.
 */
static ssize_t frame_avail(struct endpoint *ep, uint8_t *peek, size_t want)
{
	ssize_t n;
	int inq;

	if (!ep->frame_peek)
		return ioctl(ep->fd, FIONREAD, &inq) ? -1 : inq;
	n = recv(ep->fd, peek, want, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n > 0)
		count(peeks, 1);
	return n;
}

/* epoll-frame: wait for an event (edge-triggered), then read whole frames
 * while FIONREAD (or MSG_PEEK) shows one; with less than a frame there,
 * go back to epoll_wait() without reading, as framing readers do. Only
 * the next arrival's event wakes it then: a missed one is a stall. A
 * kick, or the long timeout, only lets the caller look at its requests,
 * not at the socket. Once EOF is signalled (RDHUP), it reads what is
 * left. Verifies as it reads; -1 with EAGAIN when it waits again.
 */
static ssize_t read_frames(struct endpoint *ep, int epfd, uint8_t *buf, uint8_t *peek)
{
	struct epoll_event ev[2];
	bool ready = false, hup = false;
	int n = epoll_wait(epfd, ev, 2, FRAME_WAIT_MS);
	uint64_t kicks;

	for (int i = 0; i < n; i++) {
		if (ev[i].data.fd == ep->kick) {
			if (read(ep->kick, &kicks, sizeof(kicks)) < 0 && errno != EAGAIN)
				die("eventfd");
			continue;
		}
		ready = true;
		hup = ev[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	}
	if (!ready) {
		errno = n < 0 ? errno : EAGAIN;
		return -1;
	}
	count(frame_events, 1);
	atomic_store(&ep->frame_wait, 0);
	for (;;) {
		size_t want;
		ssize_t got;

		if (!ep->frame_left) {
			/* Never more than was written: whatever may arrive
			 * later must come with an event of its own.
			 */
			uint64_t u = unread(ep);

			ep->frame_left = rnd_upto(&ep->rnd, FRAME_BITS);
			if (ep->frame_left > u)
				ep->frame_left = u ? u : 1;
		}
		want = hup ? MAX_WRITE : ep->frame_left;
		if (!hup) {
			got = frame_avail(ep, peek, want);
			if (got < 0)
				return -1;
			if ((size_t)got < want) {
				atomic_store(&ep->frame_wait, want);
				count(frame_waits, 1);
				errno = EAGAIN;
				return -1;
			}
		}
		got = read(ep->fd, buf, want);
		if (got < 0 && errno == EAGAIN && !hup) {
			/* Less than FIONREAD showed: keep what came of the
			 * frame, and wait for more.
			 */
			atomic_store(&ep->frame_wait, ep->frame_left);
			count(frame_short, 1);
		}
		if (got <= 0)
			return got;
		if (ep->frame_peek && !hup && !same_as_peeked(ep, peek, buf, got))
			return -1;
		count(reads, 1);
		if (!verify(ep, buf, got)) {
			errno = EIO;
			return -1;
		}
		if (hup)
			continue;
		ep->frame_left -= got;
		if (!ep->frame_left)
			count(frames, 1);
	}
}

/* One read as the endpoint's mode does it: bytes read, 0 at EOF, -1 with
 * errno (EAGAIN: nothing this time).
 */
static ssize_t read_some(struct endpoint *ep, int epfd, uint8_t *buf, uint8_t *peek)
{
	size_t len = rnd_size(&ep->rnd);
	struct epoll_event ev;
	ssize_t n, m;

	switch (ep->mode) {
	case M_READ:
		return read(ep->fd, buf, len);
	case M_PEEK:
		n = recv(ep->fd, peek, len, MSG_PEEK);
		if (n <= 0)
			return n;
		count(peeks, 1);
		m = read(ep->fd, buf, n);
		if (m > 0 && !same_as_peeked(ep, peek, buf, m))
			return -1;
		if (m == 0) {
			fail("slot %d: read() returned EOF after MSG_PEEK showed %zd bytes",
			     ep->c->slot, n);
			errno = EIO;
			return -1;
		}
		return m;
	case M_EPOLL_FRAME:
		return read_frames(ep, epfd, buf, peek);
	default:
		n = epoll_wait(epfd, &ev, 1, 200);
		if (n <= 0) {
			errno = n ? errno : EAGAIN;
			return -1;
		}
		n = read(ep->fd, buf, len);
		if (ep->mode == M_EPOLL_LT || n <= 0)
			return n;
		/* Edge-triggered: read until EAGAIN, or the next wake-up
		 * may never come. Verify as we go (buf holds one read).
		 */
		while (n > 0) {
			if (!verify(ep, buf, n))
				return -1;
			count(reads, 1);
			n = read(ep->fd, buf, rnd_size(&ep->rnd));
		}
		if (n == 0)
			return 0;
		return -1; /* EAGAIN: all read and verified */
	}
}

void *reader(void *arg)
{
	struct endpoint *ep = arg;
	struct conn *c = ep->c;
	uint8_t *buf = malloc(MAX_WRITE), *peek = malloc(MAX_WRITE);
	struct timeval tv = { .tv_usec = 200000 };
	int epfd = -1;

	atomic_store(&ep->tid, gettid());
	ep->want = malloc(MAX_WRITE);
	if (ep->mode >= M_EPOLL_LT) {
		struct epoll_event ev = {
			.events = EPOLLIN | EPOLLRDHUP | (ep->mode >= M_EPOLL_ET ? EPOLLET : 0),
			.data.fd = ep->fd,
		};

		set_nonblock(ep->fd, true);
		epfd = epoll_create1(0);
		if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ep->fd, &ev))
			die("epoll");
		ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = ep->kick };
		if (ep->kick >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, ep->kick, &ev))
			die("epoll kick");
	} else {
		setsockopt(ep->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	while (!atomic_load(&failed)) {
		ssize_t n;

		if (take_req(c, F_CLOSE_RX) || take_req(c, F_SHUT_RX))
			break;
		if (atomic_load(&stop_writers) && satisfied(ep))
			break;
		if (one_in(&ep->rnd, 50)) {
			usleep(1000 * (1 + rnd(&ep->rnd) % 300));
			count(stalls, 1);
		}
		n = read_some(ep, epfd, buf, peek);
		if (n > 0) {
			count(reads, 1);
			if (!verify(ep, buf, n))
				break;
		} else if (n == 0) {
			/* EOF: only after the writer's close or shutdown,
			 * and after every byte it wrote.
			 */
			for (int t = 0; t < NTAGS; t++) {
				struct stream *st = ep->tags[t];

				if (st && atomic_load(&st->end) == RUNNING)
					fail("stream %d (%s slot %d): EOF at offset %llu, but the writer did not close",
					     st->id, role_name[c->role], c->slot,
					     (unsigned long long)atomic_load(&st->received));
			}
			break;
		} else if (errno != EAGAIN && errno != EINTR) {
			if (atomic_load(&ep->tags[0]->end) == RUNNING && !atomic_load(&failed))
				fail("slot %d: read: %s", c->slot, strerror(errno));
			break;
		}
	}
	if (epfd >= 0)
		close(epfd);
	free(buf);
	free(peek);
	free(ep->want);
	atomic_store(&ep->done, true);
	return NULL;
}
