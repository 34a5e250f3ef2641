// SPDX-License-Identifier: GPL-2.0
/*
 * Request/response and streams over TCP or Unix stream sockets.
 *
 *   pingpong server ADDR [FLOWS]
 *   pingpong client ADDR SIZE SECONDS [FLOWS]
 *
 * ADDR is IPV4:PORT or, for a Unix socket, a path (starting with '/').
 * The server echoes every byte it receives; it prints "listening" once it
 * accepts connections and exits when FLOWS (default 1) connections have
 * come and gone. The client opens FLOWS connections, keeps one SIZE-byte
 * request outstanding on each (the next goes once the whole response is
 * back) for SECONDS, or until every flow has completed a round trip if
 * that takes longer, and prints one JSON line (T: the time it ran):
 *   {"flows": F, "size": S, "seconds": T, "transactions": N, "tps": N/T,
 *    "bytes": 2*S*N, "latency_us": {"mean": .., "p50": .., "p99": .., "max": ..}}
 * latency_us is half the round trip, as sockperf reports it; it is given
 * for a single flow only. With more than one flow, the client first prints
 * "connected" once every flow is, and the server "accepted" once it has
 * accepted them all: the connections are up, idle, between the two.
 *
 *   pingpong solo ADDR SIZE COUNT
 *
 * One thread, both ends of one connection to itself (ADDR is where it
 * listens): COUNT times, a SIZE-byte send() from the connecting end, a
 * recv(MSG_DONTWAIT) into a larger buffer (as a server reads) at the
 * accepting end, the same back; each call timed on CLOCK_MONOTONIC, after
 * 100 rounds of warm-up. Nobody ever waits or is woken up: under QEMU
 * -icount, where a nanosecond is an instruction, this is what each system
 * call costs on the path. One JSON line:
 *   {"size": S, "count": N, "bytes": 2*S*N, "send_ns": .., "recv_ns": ..}
 * (means over both directions).
 *
 *   pingpong sink ADDR
 *   pingpong stream ADDR SIZE SECONDS [nodelay]
 *
 * A stream to a reader that keeps up. "sink" prints "listening", accepts one
 * connection and reads it to EOF with blocking 64 KiB read()s, as fast as
 * data comes, checking every byte against what "stream" sends (byte N of the
 * stream is N % 251: a byte lost, repeated or out of order breaks the
 * pattern); "stream" connects and writes SIZE bytes at a time with blocking
 * write()s for SECONDS, then closes. Each prints one JSON line:
 *   sink:   {"bytes": N, "seconds": T, "wakeups": W, "reads": R, "cpu_s": C,
 *            "bad_at": B}
 *   stream: {"bytes": N, "seconds": T, "wakeups": W, "cpu_s": C}
 * seconds: from accept() to EOF for the reader; wakeups: the reader's
 * voluntary context switches meanwhile (each one a sleep for data ended by
 * a wake-up), the writer's (a sleep for room to write, or on a lock);
 * reads: the reader's read() calls that returned data;
 * cpu_s: user and system time; bad_at: the offset of the first
 * wrong byte, or -1. The sink reads to EOF either way, and exits with 1 if a
 * byte was wrong. Bytes missing at the end show as fewer bytes read than
 * written. With "nodelay" the writer sets TCP_NODELAY: no Nagle batching,
 * every write sent at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (1 << 20)
#define STREAM_READ (64 * 1024)
#define PATTERN 251

static void die(const char *what)
{
	fprintf(stderr, "pingpong: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Fills *ss from ADDR; returns its length. */
static socklen_t parse_addr(const char *addr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (addr[0] == '/') {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;

		if (strlen(addr) >= sizeof(un->sun_path)) {
			fprintf(stderr, "pingpong: path too long: %s\n", addr);
			exit(2);
		}
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, addr);
		return sizeof(*un);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		char host[64];
		const char *colon = strrchr(addr, ':');

		if (!colon || colon - addr >= (long)sizeof(host)) {
			fprintf(stderr, "pingpong: want IPV4:PORT or /path, not %s\n", addr);
			exit(2);
		}
		memcpy(host, addr, colon - addr);
		host[colon - addr] = 0;
		in->sin_family = AF_INET;
		in->sin_port = htons(atoi(colon + 1));
		if (inet_pton(AF_INET, host, &in->sin_addr) != 1) {
			fprintf(stderr, "pingpong: bad address %s\n", host);
			exit(2);
		}
		return sizeof(*in);
	}
}

static void set_nodelay(int fd, int family)
{
	int one = 1;

	if (family == AF_INET && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		buf += n;
		len -= n;
	}
}

/* A socket listening on ADDR (parsed into *ss, *len), with BACKLOG. */
static int listen_on(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
		     int backlog)
{
	int lfd, one = 1;

	*len = parse_addr(addr, ss);
	lfd = socket(ss->ss_family, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (ss->ss_family == AF_UNIX)
		unlink(addr);
	else if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("SO_REUSEADDR");
	if (bind(lfd, (struct sockaddr *)ss, *len) || listen(lfd, backlog))
		die("bind/listen");
	return lfd;
}

static int server(const char *addr, long flows)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct epoll_event ev, evs[256];
	long accepted = 0, open_conns = 0;
	int lfd, ep, i;
	char *buf = malloc(MAX_SIZE);

	if (!buf)
		die("malloc");
	lfd = listen_on(addr, &ss, &len, 4096);
	ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl");
	printf("listening\n");
	fflush(stdout);

	while (accepted < flows || open_conns) {
		int n = epoll_wait(ep, evs, 256, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			ssize_t got;

			if (fd == lfd) {
				int c = accept(lfd, NULL, NULL);

				if (c < 0)
					die("accept");
				set_nodelay(c, ss.ss_family);
				ev.events = EPOLLIN;
				ev.data.fd = c;
				if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev))
					die("epoll_ctl");
				accepted++;
				open_conns++;
				if (accepted == flows) {
					epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
					if (flows > 1) {
						printf("accepted\n");
						fflush(stdout);
					}
				}
				continue;
			}
			got = read(fd, buf, MAX_SIZE);
			if (got < 0 && errno != ECONNRESET)
				die("read");
			if (got <= 0) {
				close(fd);
				open_conns--;
				continue;
			}
			write_all(fd, buf, got);
		}
	}
	if (ss.ss_family == AF_UNIX)
		unlink(addr);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct flow {
	int fd;
	long got;
	long transactions;
	uint64_t sent_at;
};

static int client(const char *addr, long size, double seconds, long flows)
{
	struct sockaddr_storage ss;
	socklen_t len = parse_addr(addr, &ss);
	struct flow *fl = calloc(flows, sizeof(*fl));
	struct epoll_event ev, evs[256];
	char *buf = malloc(MAX_SIZE);
	uint64_t start, end, deadline, *rtt = NULL, cap = 0, sum = 0;
	long nrtt = 0, transactions = 0, ran = 0, i;
	int ep;

	if (!fl || !buf)
		die("malloc");
	memset(buf, 'x', MAX_SIZE);
	ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	for (i = 0; i < flows; i++) {
		fl[i].fd = socket(ss.ss_family, SOCK_STREAM, 0);
		if (fl[i].fd < 0)
			die("socket");
		if (connect(fl[i].fd, (struct sockaddr *)&ss, len))
			die("connect");
		set_nodelay(fl[i].fd, ss.ss_family);
		ev.events = EPOLLIN;
		ev.data.u64 = i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fl[i].fd, &ev))
			die("epoll_ctl");
	}
	if (flows > 1) {
		printf("connected\n");
		fflush(stdout);
	}

	start = now_ns();
	deadline = start + (uint64_t)(seconds * 1e9);
	for (i = 0; i < flows; i++) {
		fl[i].sent_at = now_ns();
		write_all(fl[i].fd, buf, size);
	}
	for (;;) {
		int n = flows == 1 ? 1 : epoll_wait(ep, evs, 256, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int k = 0; k < n; k++) {
			/* One flow: blocking reads, no epoll in the round trip. */
			struct flow *f = &fl[flows == 1 ? 0 : evs[k].data.u64];
			ssize_t got = read(f->fd, buf, size - f->got);
			uint64_t t;

			if (got <= 0) {
				if (got < 0 && errno == EINTR)
					continue;
				if (got == 0)
					errno = ECONNRESET;
				die("read");
			}
			f->got += got;
			if (f->got < size)
				continue;
			t = now_ns();
			f->got = 0;
			transactions++;
			if (!f->transactions++)
				ran++;
			if (flows == 1) {
				if (nrtt == (long)cap) {
					cap = cap ? 2 * cap : 1 << 16;
					rtt = realloc(rtt, cap * sizeof(*rtt));
					if (!rtt)
						die("realloc");
				}
				rtt[nrtt++] = t - f->sent_at;
				sum += t - f->sent_at;
			}
			/* Not before every flow has had its round trip: on a
			 * slow kernel the first round alone may take longer
			 * than the run.
			 */
			if (t >= deadline && ran == flows)
				goto done;
			f->sent_at = t;
			write_all(f->fd, buf, size);
		}
	}
done:
	end = now_ns();
	printf("{\"flows\": %ld, \"size\": %ld, \"seconds\": %.6f, \"transactions\": %ld, "
	       "\"tps\": %.1f, \"bytes\": %lld",
	       flows, size, (end - start) / 1e9, transactions,
	       transactions / ((end - start) / 1e9), 2LL * size * transactions);
	if (nrtt) {
		qsort(rtt, nrtt, sizeof(*rtt), cmp_u64);
		printf(", \"latency_us\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}",
		       sum / 2e3 / nrtt, rtt[nrtt / 2] / 2e3, rtt[nrtt * 99 / 100] / 2e3,
		       rtt[nrtt - 1] / 2e3);
	}
	printf("}\n");
	for (i = 0; i < flows; i++)
		close(fl[i].fd);
	return 0;
}

static int solo(const char *addr, long size, long count)
{
	const long warmup = 100;
	struct sockaddr_storage ss;
	socklen_t len;
	uint64_t t[3], send_ns = 0, recv_ns = 0;
	int lfd, fd[2];
	char *buf = malloc(MAX_SIZE);

	if (!buf)
		die("malloc");
	memset(buf, 'x', size);
	lfd = listen_on(addr, &ss, &len, 1);
	fd[0] = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd[0] < 0 || connect(fd[0], (struct sockaddr *)&ss, len))
		die("connect");
	fd[1] = accept(lfd, NULL, NULL);
	if (fd[1] < 0)
		die("accept");
	set_nodelay(fd[0], ss.ss_family);
	set_nodelay(fd[1], ss.ss_family);

	for (long i = 0; i < warmup + count; i++) {
		for (int k = 0; k < 2; k++) {
			ssize_t sent, got;

			t[0] = now_ns();
			sent = send(fd[k], buf, size, 0);
			t[1] = now_ns();
			got = recv(fd[!k], buf, MAX_SIZE, MSG_DONTWAIT);
			t[2] = now_ns();
			if (sent != size || got != size) {
				fprintf(stderr, "pingpong: solo round %ld: sent %zd, received %zd of %ld: %s\n",
					i, sent, got, size, strerror(errno));
				return 1;
			}
			if (i >= warmup) {
				send_ns += t[1] - t[0];
				recv_ns += t[2] - t[1];
			}
		}
	}
	printf("{\"size\": %ld, \"count\": %ld, \"bytes\": %lld, \"send_ns\": %.1f, "
	       "\"recv_ns\": %.1f}\n", size, count, 2LL * size * (warmup + count),
	       send_ns / 2.0 / count, recv_ns / 2.0 / count);
	close(fd[0]);
	close(fd[1]);
	close(lfd);
	if (ss.ss_family == AF_UNIX)
		unlink(addr);
	return 0;
}

/* The stream's bytes from any offset: byte N is N % PATTERN. */
static char *pattern(void)
{
	char *pat = malloc(PATTERN + MAX_SIZE);

	if (!pat)
		die("malloc");
	for (long i = 0; i < PATTERN + MAX_SIZE; i++)
		pat[i] = i % PATTERN;
	return pat;
}

static double cpu_s(const struct rusage *a, const struct rusage *b)
{
	return b->ru_utime.tv_sec - a->ru_utime.tv_sec + b->ru_stime.tv_sec -
	       a->ru_stime.tv_sec + (b->ru_utime.tv_usec - a->ru_utime.tv_usec +
				     b->ru_stime.tv_usec - a->ru_stime.tv_usec) / 1e6;
}

static int sink(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct rusage r0, r1;
	char *pat = pattern(), *buf = malloc(STREAM_READ);
	unsigned long long bytes = 0;
	long long bad_at = -1, reads = 0;
	uint64_t start;
	int lfd, fd;

	if (!buf)
		die("malloc");
	lfd = listen_on(addr, &ss, &len, 1);
	printf("listening\n");
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	start = now_ns();
	getrusage(RUSAGE_SELF, &r0);
	for (;;) {
		ssize_t got = read(fd, buf, STREAM_READ);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			die("read");
		if (!got)
			break;
		if (bad_at < 0 && memcmp(buf, pat + bytes % PATTERN, got)) {
			fprintf(stderr, "pingpong: sink: wrong data within bytes %llu-%llu\n",
				bytes, bytes + got - 1);
			bad_at = bytes;
		}
		bytes += got;
		reads++;
	}
	getrusage(RUSAGE_SELF, &r1);
	printf("{\"bytes\": %llu, \"seconds\": %.6f, \"wakeups\": %ld, \"reads\": %lld, "
	       "\"cpu_s\": %.3f, \"bad_at\": %lld}\n", bytes, (now_ns() - start) / 1e9,
	       r1.ru_nvcsw - r0.ru_nvcsw, reads, cpu_s(&r0, &r1), bad_at);
	close(fd);
	close(lfd);
	if (ss.ss_family == AF_UNIX)
		unlink(addr);
	return bad_at >= 0;
}

static int stream(const char *addr, long size, double seconds, bool nodelay)
{
	struct sockaddr_storage ss;
	socklen_t len = parse_addr(addr, &ss);
	struct rusage r0, r1;
	char *pat = pattern();
	unsigned long long bytes = 0;
	uint64_t start, deadline;
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len))
		die("connect");
	if (nodelay)
		set_nodelay(fd, ss.ss_family);
	getrusage(RUSAGE_SELF, &r0);
	start = now_ns();
	deadline = start + (uint64_t)(seconds * 1e9);
	do {
		/* Checking the clock every 64 writes or so costs little. */
		for (int i = 0; i < 64; i++) {
			write_all(fd, pat + bytes % PATTERN, size);
			bytes += size;
		}
	} while (now_ns() < deadline);
	close(fd);
	getrusage(RUSAGE_SELF, &r1);
	printf("{\"bytes\": %llu, \"seconds\": %.6f, \"wakeups\": %ld, \"cpu_s\": %.3f}\n",
	       bytes, (now_ns() - start) / 1e9, r1.ru_nvcsw - r0.ru_nvcsw,
	       cpu_s(&r0, &r1));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "server"))
		return server(argv[2], argc == 4 ? atol(argv[3]) : 1);
	if (argc >= 5 && argc <= 6 && !strcmp(argv[1], "client")) {
		long size = atol(argv[3]), flows = argc == 6 ? atol(argv[5]) : 1;
		double seconds = atof(argv[4]);

		if (size < 1 || size > MAX_SIZE || seconds <= 0 || flows < 1) {
			fprintf(stderr, "pingpong: want 1 <= SIZE <= %d, SECONDS > 0, FLOWS >= 1\n",
				MAX_SIZE);
			return 2;
		}
		return client(argv[2], size, seconds, flows);
	}
	if (argc == 5 && !strcmp(argv[1], "solo")) {
		long size = atol(argv[3]), count = atol(argv[4]);

		if (size < 1 || size > MAX_SIZE || count < 1) {
			fprintf(stderr, "pingpong: want 1 <= SIZE <= %d, COUNT >= 1\n", MAX_SIZE);
			return 2;
		}
		return solo(argv[2], size, count);
	}
	if (argc == 3 && !strcmp(argv[1], "sink"))
		return sink(argv[2]);
	if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "nodelay"))) &&
	    !strcmp(argv[1], "stream")) {
		long size = atol(argv[3]);
		double seconds = atof(argv[4]);

		if (size < 1 || size > MAX_SIZE || seconds <= 0) {
			fprintf(stderr, "pingpong: want 1 <= SIZE <= %d, SECONDS > 0\n", MAX_SIZE);
			return 2;
		}
		return stream(argv[2], size, seconds, argc == 6);
	}
	fprintf(stderr, "usage: pingpong server ADDR [FLOWS]\n"
			"       pingpong client ADDR SIZE SECONDS [FLOWS]\n"
			"       pingpong solo ADDR SIZE COUNT\n"
			"       pingpong sink ADDR\n"
			"       pingpong stream ADDR SIZE SECONDS [nodelay]\n");
	return 2;
}
