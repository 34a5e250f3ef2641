// SPDX-License-Identifier: GPL-2.0
/*
 * Blocking readers and writers as plain programs use them, over loopback TCP
 * (accelerated when run in a cgroup that bench/sockredir serves).
 *
 *   blocking rr PORT SIZE ROUNDS nodelay|plain
 *
 * Two processes: a fork()ed responder accepts one connection and, ROUNDS
 * times, read()s until it has a SIZE-byte request whole, checks it and
 * write()s a SIZE-byte reply; the requester writes each request once the
 * previous reply is back whole, and checks the reply. TCP_NODELAY on both
 * ends with "nodelay".
 *
 *   blocking duplex PORT BYTES
 *
 * One connection, full duplex as a proxy runs it: on each end one thread
 * write()s BYTES and another read()s BYTES, at once, every byte checked.
 *
 * All sockets block, without timeouts: every read() and write() must return
 * data or room, never an error (EAGAIN included) until the other end is done.
 * Prints one JSON line, {"bytes": N, "rounds": N, "seconds": T}, and exits 0,
 * or says which call failed where and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536

/* Byte @off of the stream tagged @tag: lost, repeated or swapped bytes show. */
static uint8_t pattern(uint64_t off, uint32_t tag)
{
	return (uint8_t)(((off / 4) * 2654435761u + tag) >> ((off % 4) * 8));
}

static void fill(uint8_t *buf, size_t len, uint64_t off, uint32_t tag)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(off + i, tag);
}

static int bad(const uint8_t *buf, size_t len, uint64_t off, uint32_t tag)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(off + i, tag)) {
			fprintf(stderr, "blocking: wrong byte at offset %llu of stream %u\n",
				(unsigned long long)(off + i), tag);
			return 1;
		}
	return 0;
}

static void fail(const char *what, uint64_t where)
{
	fprintf(stderr, "blocking: %s at %llu: %s\n", what, (unsigned long long)where,
		strerror(errno));
	exit(1);
}

/* read() until @len bytes are in, or fail the run at stream offset @off. */
static void read_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t r = read(fd, buf, len);

		if (r == 0)
			errno = EPIPE;
		if (r <= 0)
			fail("read", off);
		buf += r;
		len -= r;
		off += r;
	}
}

static void write_full(int fd, const uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t r = write(fd, buf, len);

		if (r <= 0)
			fail("write", off);
		buf += r;
		len -= r;
		off += r;
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A connected pair on 127.0.0.1:@port: *@c connects, *@a is accepted. */
static void connect_pair(int port, int *c, int *a)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&in, sizeof(in)) || listen(l, 1))
		fail("listen", 0);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (*c < 0 || connect(*c, (struct sockaddr *)&in, sizeof(in)))
		fail("connect", 0);
	*a = accept(l, NULL, NULL);
	if (*a < 0)
		fail("accept", 0);
	close(l);
}

static int rr(int port, size_t size, long rounds, int nodelay)
{
	uint8_t *buf = malloc(size);
	int c, a, status;
	double t0;
	pid_t pid;

	if (!buf)
		fail("malloc", 0);
	connect_pair(port, &c, &a);
	if (setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay)) ||
	    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay)))
		fail("TCP_NODELAY", 0);
	pid = fork();
	if (pid < 0)
		fail("fork", 0);
	if (!pid) {
		close(c);
		for (long i = 0; i < rounds; i++) {
			read_full(a, buf, size, i * size);
			if (bad(buf, size, i * size, 1))
				exit(1);
			fill(buf, size, i * size, 2);
			write_full(a, buf, size, i * size);
		}
		exit(0);
	}
	close(a);
	t0 = now();
	for (long i = 0; i < rounds; i++) {
		fill(buf, size, i * size, 1);
		write_full(c, buf, size, i * size);
		read_full(c, buf, size, i * size);
		if (bad(buf, size, i * size, 2))
			return 1;
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	printf("{\"bytes\": %llu, \"rounds\": %ld, \"seconds\": %.3f}\n",
	       2ULL * size * rounds, rounds, now() - t0);
	return 0;
}

struct half {
	int fd;
	uint32_t tag;	/* the stream this end writes; it reads the other */
	uint64_t bytes;
};

static void *writer(void *arg)
{
	struct half *h = arg;
	static __thread uint8_t buf[CHUNK];

	for (uint64_t off = 0; off < h->bytes; off += CHUNK) {
		size_t n = h->bytes - off < CHUNK ? h->bytes - off : CHUNK;

		fill(buf, n, off, h->tag);
		write_full(h->fd, buf, n, off);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct half *h = arg;
	static __thread uint8_t buf[CHUNK];

	for (uint64_t off = 0; off < h->bytes; off += CHUNK) {
		size_t n = h->bytes - off < CHUNK ? h->bytes - off : CHUNK;

		read_full(h->fd, buf, n, off);
		if (bad(buf, n, off, h->tag ^ 3))
			exit(1);
	}
	return NULL;
}

static int duplex(int port, uint64_t bytes)
{
	struct half h[2];
	pthread_t t[4];
	double t0;
	int fd[2];

	connect_pair(port, &fd[0], &fd[1]);
	t0 = now();
	for (int i = 0; i < 2; i++) {
		h[i] = (struct half){ .fd = fd[i], .tag = 1 + i, .bytes = bytes };
		if (pthread_create(&t[2 * i], NULL, writer, &h[i]) ||
		    pthread_create(&t[2 * i + 1], NULL, reader, &h[i]))
			fail("pthread_create", 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("{\"bytes\": %llu, \"rounds\": 0, \"seconds\": %.3f}\n",
	       2ULL * bytes, now() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "rr"))
		return rr(atoi(argv[2]), atol(argv[3]), atol(argv[4]),
			  !strcmp(argv[5], "nodelay"));
	if (argc == 4 && !strcmp(argv[1], "duplex"))
		return duplex(atoi(argv[2]), strtoull(argv[3], NULL, 0));
	fprintf(stderr, "usage: blocking rr PORT SIZE ROUNDS nodelay|plain\n"
			"       blocking duplex PORT BYTES\n");
	return 2;
}
