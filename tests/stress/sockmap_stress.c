// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap_stress: stress and fault harness for sk_msg redirect-to-ingress.
 * Runs as root in a guest of scripts/vm-run.sh (see scripts/stress.sh).
 *
 * Connections over loopback are put into a sockhash by a sockops program
 * (sockmap_stress.bpf.c); its sk_msg program redirects every sendmsg() to
 * the ingress of the peer (BPF_F_INGRESS), of a fan-in receiver, or of the
 * sending socket itself. Each connection slot has a role:
 *   pair    the client writes, the server reads (the faults below hit these)
 *   verdict a pair whose server end is also in a second sockhash, with an
 *           sk_skb stream_verdict program (attached before any socket goes
 *           in): what arrives over TCP, the FIN included, reaches the
 *           reader through the verdict, passed to its own ingress queue or
 *           (by its plan, one skb in a few) redirected there with
 *           bpf_sk_redirect_hash(BPF_F_INGRESS); the faults hit these too
 *   self    the client's sk_msg redirects to the client itself, which reads
 *   fanin   three clients redirect into the server end of the first one
 *   never   the server never reads: its writer must block or get EAGAIN,
 *           and what it got in is bounded by the receiver's rcvbuf plus
 *           the writer's sndbuf (and one message beyond the first, one
 *           write beyond the second, each at most MAX_WRITE)
 * Writers use random sizes (1 B .. 256 KB, log-uniform), write, send with
 * MSG_MORE, writev, sendmsg, blocking or not, and toggle TCP_NODELAY,
 * TCP_CORK and O_NONBLOCK at random. Half the streams of pair and verdict
 * slots (and of the fan-in receiver's own writer) are mixed: the sk_msg
 * program passes their messages to plain TCP from a pseudo-random one on
 * (by a plan in a map: one in 4 to 64, from the seed), so one stream has
 * redirected messages followed by TCP ones; the writer puts it back on
 * redirection once its reader has caught up, as after a map re-insert.
 * Readers use read, recv(MSG_PEEK) then read (the bytes must agree), epoll
 * in level- or edge-triggered mode, or frame: edge-triggered epoll that,
 * after each event, asks FIONREAD (verdict slots: or MSG_PEEK) whether a
 * whole frame (1 B .. 8 KB, at most what was written and not read) is
 * there, reads exactly the frame if so, and otherwise waits for the next
 * event without reading, with no timer to re-check (a missed event is a
 * stall; a receiver read so gets a 2 MB rcvbuf, see frame_room());
 * and they stall at random.
 *
 * Faults (on pair and verdict slots, fan-in extra senders for the tx
 * kinds): close or shutdown of the writer (the reader must get every byte
 * written, then EOF) or of the reader (the stream ends at what was read;
 * the writer must get an error, not hang); the writer deleted from the
 * sockhash mid-stream (what it writes then goes over plain TCP, in order)
 * and put back later once its reader has caught up; the sk_msg program
 * detached from the map and attached again (existing sockets keep their
 * program: sockets added meanwhile, by reconnects and re-inserts, run
 * plain TCP). A slot whose stream ended is reconnected as a new stream
 * (the old sockets closed with a reset).
 *
 * Every byte is a function of its stream and offset: bits 7-6 the stream's
 * tag (which of the streams a socket may receive it is), bits 5-0 a
 * pseudo-random pattern of (stream, offset). A reader checks each byte at
 * its stream's next offset, so a lost, duplicated or reordered byte is
 * reported with the stream id and offset (and where the bytes found there
 * belong). A watchdog fails the run when a stream makes no progress for
 * --stall-timeout seconds (naming the reader's mode, and saying so when a
 * framing reader waits for an event with its frame readable). Afterwards
 * the sk_msg slab cache and the TCP lines of /proc/net/sockstat must come
 * back to what they were before, and the verdict path, mixed streams and
 * framing readers must have been taken (the last two SKIP when a run's
 * random choices made none).
 *
 * Memory cgroup: the whole run is in its own cgroup (which the sockops
 * program is attached to), with the memory controller if cgroup v2 has
 * one (enabled in the root's subtree_control if need be; --no-memcg: not
 * used). What the never-reading receivers' writers got in must then be
 * charged to it: the "sock" figure of memory.stat, taken once the other
 * streams are drained, must have grown by at least those bytes, less 64
 * pages a CPU (per-CPU charge caches and stat batching). At the end the
 * process goes back to the root cgroup and removes its own.
 *
 * TCP memory pressure: for the middle third of the run, net.ipv4.tcp_mem's
 * low and pressure thresholds are one page (the hard limit as it was), so
 * that TCP is under memory pressure throughout (--no-tcp-pressure: not).
 * The kernel must have entered it, and bytes must have been verified
 * meanwhile; the watchdog and the checks above hold as in the rest.
 *
 * Output: one "stress: UNIT: OK|FAIL|SKIP" line a check, then
 * "N passed, N failed, N skipped". Exit status 0 if all passed.
 * Replay: --seed (every thread's random choices derive from it; thread
 * scheduling does not replay).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sockmap_stress.h"

#define MAX_WRITE	(256 * 1024)
#define NTAGS		4
#define FRAME_BITS	14	/* frames of 1 B .. 8 KB */
#define FRAME_WAIT_MS	10000	/* a framing reader's epoll_wait() */
#define CGROOT		"/sys/fs/cgroup"
#define CGROUP		CGROOT "/sockmap-stress"

static struct {
	unsigned int duration, conns, stall_timeout, fail_pct;
	uint64_t seed;
	bool faults, corrupt, memcg, tcp_pressure;
	const char *bpf_obj;
} opt = { .duration = 120, .conns = 16, .stall_timeout = 60, .faults = true, .memcg = true,
	  .tcp_pressure = true };

/* ---- results and reporting ---- */

static atomic_bool failed, stop_writers;
static int units[3]; /* passed, failed, skipped */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double t0;

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	printf("[%8.3f] %s%s\n", now() - t0, prefix, line);
	fflush(stdout);
}

static void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/* A failure of the data path: reported, and the run ends. */
static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("FAIL: ", fmt, ap);
	va_end(ap);
	atomic_store(&failed, true);
	atomic_store(&stop_writers, true);
}

static void unit(const char *name, int result /* 0 OK, 1 FAIL, 2 SKIP */, const char *fmt, ...)
{
	static const char *const word[] = { "OK", "FAIL", "SKIP" };
	char detail[512] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	units[result]++;
	printf("stress: %s: %s%s%s\n", name, word[result], *detail ? "  # " : "", detail);
	fflush(stdout);
}

static void die(const char *what)
{
	fprintf(stderr, "sockmap_stress: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- random numbers (xorshift64*), one state per thread ---- */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static uint64_t rnd_seed(uint64_t a, uint64_t b)
{
	return mix(mix(opt.seed ^ a) + b) | 1;
}

static bool one_in(uint64_t *s, unsigned int n)
{
	return rnd(s) % n == 0;
}

/* 1 .. 2^(bits - 1), log-uniform: as many tiny ones as huge ones. */
static size_t rnd_upto(uint64_t *s, unsigned int bits)
{
	bits = rnd(s) % bits;
	return 1 + rnd(s) % (1u << bits);
}

/* 1 .. MAX_WRITE */
static size_t rnd_size(uint64_t *s)
{
	return rnd_upto(s, 19);
}

/* ---- streams and their byte pattern ---- */

static uint8_t pattern[65536];

enum stream_end { RUNNING, ENDED_TX, ENDED_RX };

struct stream {
	int id, tag;
	uint64_t salt;
	bool bounded;			/* never-read: no progress expected */
	atomic_uint_fast64_t written;	/* accepted by sendmsg() */
	atomic_uint_fast64_t received;	/* verified by the reader */
	atomic_int end;			/* enum stream_end */
	atomic_bool writer_done;
	_Atomic double progress;	/* time of the last change */
	_Atomic double ended_at;
};

static uint8_t block_mix(const struct stream *st, uint64_t block)
{
	return mix(st->salt ^ block);
}

static void gen(const struct stream *st, uint64_t off, uint8_t *buf, size_t len)
{
	while (len) {
		size_t in = off & 0xffff, n = 65536 - in;
		uint8_t x = block_mix(st, off >> 16);
		uint8_t tag = st->tag << 6;

		if (n > len)
			n = len;
		for (size_t i = 0; i < n; i++)
			buf[i] = ((pattern[(in + i + st->salt) & 0xffff] ^ x) & 63) | tag;
		buf += n;
		off += n;
		len -= n;
	}
}

static uint8_t expect(const struct stream *st, uint64_t off)
{
	uint8_t b;

	gen(st, off, &b, 1);
	return b;
}

/* Where in @st do the @len bytes at @got belong, near @off? */
static int64_t locate(const struct stream *st, uint64_t off, const uint8_t *got, size_t len)
{
	uint64_t lo = off > (8u << 20) ? off - (8u << 20) : 0;
	uint64_t hi = atomic_load(&st->written) + MAX_WRITE;

	if (len > 32)
		len = 32;
	if (len < 8)
		return -1;
	for (uint64_t c = lo; c < hi; c++) {
		size_t i = 0;

		while (i < len && expect(st, c + i) == got[i])
			i++;
		if (i == len)
			return c;
	}
	return -1;
}

static void mismatch(const struct stream *st, const char *where, uint64_t off,
		     const uint8_t *got, size_t avail)
{
	int64_t at = locate(st, off, got, avail);
	char why[128];

	if (at < 0)
		snprintf(why, sizeof(why), "found nowhere in the stream");
	else if ((uint64_t)at > off)
		snprintf(why, sizeof(why), "the bytes of offset %lld: %llu bytes lost",
			 (long long)at, (unsigned long long)(at - off));
	else
		snprintf(why, sizeof(why), "the bytes of offset %lld: %llu bytes duplicated or reordered",
			 (long long)at, (unsigned long long)(off - at));
	fail("stream %d (%s): byte at offset %llu is 0x%02x, expected 0x%02x: %s (written %llu)",
	     st->id, where, (unsigned long long)off, got[0], expect(st, off), why,
	     (unsigned long long)atomic_load(&st->written));
}

static void touch(struct stream *st)
{
	atomic_store(&st->progress, now());
}

static void end_stream(struct stream *st, enum stream_end how)
{
	int running = RUNNING;

	if (atomic_compare_exchange_strong(&st->end, &running, how)) {
		atomic_store(&st->ended_at, now());
		touch(st);
	}
}

/* ---- totals ---- */

enum fault {
	F_CLOSE_TX, F_SHUT_TX, F_CLOSE_RX, F_SHUT_RX, F_DELETE_TX, F_REINSERT_TX,
	F_DETACH, F_ATTACH, NFAULTS
};
static const char *const fault_name[NFAULTS] = {
	"close-writer", "shutdown-writer", "close-reader", "shutdown-reader",
	"map-delete-writer", "map-reinsert-writer", "prog-detach", "prog-attach",
};

static struct {
	atomic_uint_fast64_t streams, written, verified, writes, reads, peeks, eagain,
		eacces, enomem, toggles, stalls, reconnects, faults[NFAULTS];
	atomic_uint_fast64_t verdict_streams, mixed_streams, mixed_both, mix_rearms;
	atomic_uint_fast64_t frame_readers, frame_events, frames, frame_waits, frame_short;
} total;

#define count(field, n) atomic_fetch_add(&total.field, (n))

/* ---- cgroup files ---- */

/* Write to a cgroup (or proc, sysfs) file: 0, or -1 with errno. */
static int write_file(const char *path, const char *fmt, ...)
{
	int fd = open(path, O_WRONLY), ret;
	va_list ap;

	if (fd < 0)
		return -1;
	va_start(ap, fmt);
	ret = vdprintf(fd, fmt, ap) < 0 ? -1 : 0;
	va_end(ap);
	if (close(fd))
		ret = -1;
	return ret;
}

/* The number after @key (the first number if @key is NULL) in @path, or
 * -1.
 */
static long long read_figure(const char *path, const char *key)
{
	long long v = -1;
	char line[256];
	size_t len = key ? strlen(key) : 0;
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f)) {
		if (!key) {
			sscanf(line, "%lld", &v);
			break;
		}
		if (!strncmp(line, key, len) && line[len] == ' ') {
			sscanf(line + len, "%lld", &v);
			break;
		}
	}
	if (f)
		fclose(f);
	return v;
}

/* Is @word one of the words of @path (cgroup.controllers and the like)? */
static bool has_word(const char *path, const char *word)
{
	char line[512], *save, *w;
	FILE *f = fopen(path, "r");
	bool found = false;

	if (f && fgets(line, sizeof(line), f))
		for (w = strtok_r(line, " \n", &save); w && !found; w = strtok_r(NULL, " \n", &save))
			found = !strcmp(w, word);
	if (f)
		fclose(f);
	return found;
}

static struct {
	bool on;		/* our cgroup has the memory controller */
	bool enabled;		/* we enabled it in the root's subtree_control */
	long long sock, current; /* at the start, before any socket */
} memcg;

/* Our own cgroup, so that only our connections go into the map, and that
 * the memory of our sockets is charged to it. Before any socket.
 */
static int cgroup_enter(void)
{
	int cg;

	if (opt.memcg && has_word(CGROOT "/cgroup.controllers", "memory") &&
	    !has_word(CGROOT "/cgroup.subtree_control", "memory")) {
		if (write_file(CGROOT "/cgroup.subtree_control", "+memory\n"))
			msg("cannot enable the memory controller: %s", strerror(errno));
		else
			memcg.enabled = true;
	}
	if (mkdir(CGROUP, 0755) && errno != EEXIST)
		die("mkdir " CGROUP);
	if (write_file(CGROUP "/cgroup.procs", "%d\n", getpid()))
		die(CGROUP "/cgroup.procs");
	memcg.on = opt.memcg && access(CGROUP "/memory.current", R_OK) == 0;
	if (memcg.on) {
		memcg.sock = read_figure(CGROUP "/memory.stat", "sock");
		memcg.current = read_figure(CGROUP "/memory.current", NULL);
	}
	cg = open(CGROUP, O_RDONLY | O_DIRECTORY);
	if (cg < 0)
		die("open " CGROUP);
	return cg;
}

/* Back to the root cgroup, and ours removed (which detaches sockops). */
static void cgroup_leave(int cg)
{
	close(cg);
	if (write_file(CGROOT "/cgroup.procs", "%d\n", getpid()) || rmdir(CGROUP))
		msg("cannot remove " CGROUP ": %s", strerror(errno));
	/* Fails if another cgroup uses it meanwhile: leave it on then. */
	if (memcg.enabled)
		write_file(CGROOT "/cgroup.subtree_control", "-memory\n");
}

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

static void fail_setup(void)
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

static void check_fail_alloc(void)
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
static struct {
	char saved[128];	/* tcp_mem before, while the phase runs */
	long long entered;	/* TcpExt TCPMemoryPressures at its start */
	uint64_t verified;	/* total.verified at its start */
	bool done;
} pressure;

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

static void pressure_end(void)
{
	if (*pressure.saved && write_file(TCP_MEM, "%s", pressure.saved))
		die(TCP_MEM);
	*pressure.saved = 0;
}

static void pressure_start(void)
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

static void pressure_stop(void)
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

/* ---- BPF ---- */

static int map_fd, verdict_fd, routes_fd, plans_fd, stats_fd, msg_prog_fd;
static atomic_bool msg_prog_attached;

static int prog_fd(struct bpf_object *obj, const char *name)
{
	return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

static int bpf_setup(void)
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

static uint64_t bpf_stat(enum stress_stat i)
{
	uint32_t key = i;
	uint64_t v = 0;

	bpf_map_lookup_elem(stats_fd, &key, &v);
	return v;
}

/* ---- connections ---- */

enum role { PAIR, VERDICT, SELF, FANIN, NEVER };
static const char *const role_name[] = { "pair", "verdict", "self", "fanin", "never" };
enum rmode { M_READ, M_PEEK, M_EPOLL_LT, M_EPOLL_ET, M_EPOLL_FRAME, NMODES };
static const char *const mode_name[] = { "read", "peek", "epoll-lt", "epoll-et", "epoll-frame" };

struct conn;

/* A receiving socket and the streams that may arrive on it, by tag. */
struct endpoint {
	struct conn *c;			/* the slot whose faults end it */
	int fd;
	enum rmode mode;
	struct stream *tags[NTAGS];
	pthread_t thread;
	atomic_int tid;
	atomic_bool done;
	uint64_t rnd;
	uint8_t *want;			/* the reader's scratch for gen() */
	/* epoll-frame: */
	int kick;			/* eventfd: look at requests, stop */
	bool frame_peek;		/* frames seen by MSG_PEEK, not FIONREAD */
	size_t frame_left;		/* of the current frame, 0: none yet */
	atomic_size_t frame_wait;	/* bytes waited for in epoll_wait() */
};

struct conn {
	int slot, gen;
	enum role role;
	pthread_mutex_t lock;		/* tx_fd and rx_fd against closing */
	int tx_fd, rx_fd;
	struct sock_key tx_key, rx_key;
	struct stream *st;
	struct conn *target;		/* fan-in: whose server end receives */
	struct endpoint ep;		/* reads rx_fd (self: tx_fd) */
	bool has_reader;
	pthread_t writer;
	atomic_int writer_tid;
	atomic_bool writer_exited;
	atomic_int req;			/* enum fault for the owning thread, or -1 */
	atomic_bool hold, in_write, tx_deleted;
	bool mixed;			/* the writer has a plan: pass, redirect */
	uint64_t rnd;
};

static struct conn *conns;
/* Against the watchdog looking at a slot that is being reconnected. */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static int listen_fd;
static atomic_int next_stream_id;

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
static void close_abort(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void set_flag(int fd, int level, int name, int on)
{
	setsockopt(fd, level, name, &on, sizeof(on));
}

static void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A mixed stream ends: did it pass some messages and redirect others? */
static void mix_done(struct conn *c)
{
	struct plan p;

	if (c->mixed && !bpf_map_lookup_elem(plans_fd, &c->tx_key, &p) && p.passed && p.redirected)
		count(mixed_both, 1);
}

/* Pair and verdict slots: one writer, one reader, one stream; the faults
 * hit these, and they reconnect.
 */
static bool is_pair(const struct conn *c)
{
	return c->role == PAIR || c->role == VERDICT;
}

/* The slot whose reader reads @c's stream (fan-in: the target). */
static struct conn *reader_slot(struct conn *c)
{
	return c->role == FANIN && c->target ? c->target : c;
}

/* Have a framing reader, in epoll_wait(), look at its requests. */
static void kick(struct endpoint *ep)
{
	uint64_t one = 1;

	if (ep->kick >= 0 && write(ep->kick, &one, sizeof(one)) < 0 && errno != EAGAIN)
		die("eventfd");
}

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

static void reader_fault(struct conn *c, enum fault f);

/* Carry out fault @f if the injector asked for it (by the thread that owns
 * the end it hits).
 */
static bool take_req(struct conn *c, enum fault f)
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

static void *writer(void *arg)
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

static void end_streams(struct endpoint *ep, enum stream_end how)
{
	for (int t = 0; t < NTAGS; t++)
		if (ep->tags[t])
			end_stream(ep->tags[t], how);
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

/* The @n bytes read into @buf must be those MSG_PEEK showed in @peek. */
static bool same_as_peeked(struct endpoint *ep, const uint8_t *peek, const uint8_t *buf, size_t n)
{
	if (!memcmp(peek, buf, n))
		return true;
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

static void *reader(void *arg)
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

/* ---- setting up slots ---- */

static struct stream *new_stream(int tag, bool bounded)
{
	struct stream *st = calloc(1, sizeof(*st));

	st->id = atomic_fetch_add(&next_stream_id, 1);
	st->tag = tag;
	st->salt = rnd_seed(0x57, st->id);
	st->bounded = bounded;
	atomic_store(&st->progress, now());
	count(streams, 1);
	return st;
}

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
static void recycle(struct conn *c)
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

/* ---- faults ---- */

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

static atomic_bool injector_stop;

static void *injector(void *arg)
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

/* ---- watchdog ---- */

/* Where a thread of ours is in the kernel, if it still runs. */
static void dump_kstack(const char *who, int tid)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", tid);
	f = fopen(path, "r");
	if (!f)
		return;
	msg("    %s (thread %d) kernel stack:", who, tid);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		msg("      %s", line);
	}
	fclose(f);
}

/* The state of @c's stream, with its threads' kernel stacks if @stacks;
 * in @what (if not NULL) which stream and reader it is, in short.
 */
static void dump_stream(struct conn *c, bool stacks, char *what, size_t len)
{
	struct stream *st = c->st;
	struct conn *rc = reader_slot(c);
	int inq = -1, outq = -1;
	size_t frame = atomic_load(&rc->ep.frame_wait);
	const char *mode = rc->has_reader ? mode_name[rc->ep.mode] : "no";
	char more[192] = "", wait[160] = "";
	struct plan p;

	pthread_mutex_lock(&rc->lock);
	if (rc->has_reader && (c->role == SELF ? c->tx_fd : rc->rx_fd) >= 0)
		ioctl(rc->ep.fd, SIOCINQ, &inq);
	pthread_mutex_unlock(&rc->lock);
	pthread_mutex_lock(&c->lock);
	if (c->tx_fd >= 0)
		ioctl(c->tx_fd, SIOCOUTQ, &outq);
	pthread_mutex_unlock(&c->lock);
	if (rc->has_reader && rc->ep.mode == M_EPOLL_FRAME && frame && !atomic_load(&rc->ep.done))
		snprintf(wait, sizeof(wait), ", waiting in epoll_wait() for a frame of %zu bytes (%s)%s",
			 frame, rc->ep.frame_peek ? "MSG_PEEK" : "FIONREAD",
			 inq >= 0 && (size_t)inq >= frame ? ": readable, no event (lost wake-up?)" : "");
	if (c->mixed && !bpf_map_lookup_elem(plans_fd, &c->tx_key, &p))
		snprintf(more, sizeof(more), ", mixed (now %s)", p.passing ? "passing" : "redirecting");
	strcat(more, wait);
	if (what)
		snprintf(what, len, "slot %d (%s) stream %d, %s reader (slot %d)%s",
			 c->slot, role_name[c->role], st->id, mode, rc->slot, wait);
	msg("  slot %d %s stream %d: written %llu received %llu end %d, writer %s%s, reader (slot %d) %s %s, FIONREAD %d, outq %d, writer in map %s%s, no progress for %.1fs",
	    c->slot, role_name[c->role], st->id, (unsigned long long)atomic_load(&st->written),
	    (unsigned long long)atomic_load(&st->received), atomic_load(&st->end),
	    atomic_load(&st->writer_done) ? "done" : "running",
	    atomic_load(&c->in_write) ? " (in a write)" : "", rc->slot,
	    mode, rc->has_reader ? (atomic_load(&rc->ep.done) ? "done" : "running") : "",
	    inq, outq, atomic_load(&c->tx_deleted) ? "no" : "yes", more,
	    now() - atomic_load(&st->progress));
	if (stacks && !atomic_load(&c->writer_exited))
		dump_kstack("writer", atomic_load(&c->writer_tid));
	if (stacks && rc->has_reader && !atomic_load(&rc->ep.done))
		dump_kstack("reader", atomic_load(&rc->ep.tid));
}

/* How long a writer whose reader went away may take to learn of it, on
 * top of --stall-timeout. A reader closed with unread bytes in ingress_msg
 * sends a FIN, not the RST TCP sends for unread bytes in its receive
 * queue (tcp_close() looks at that queue alone), so a writer whose TCP
 * data waits behind a window the reader's unread bytes closed hears
 * nothing until its next zero window probe, which may come TCP_RTO_MAX
 * (120 s) after the last. The series does not change tcp_close().
 */
#define RX_GONE_GRACE 150

/* A stream stalls when it has made no progress for --stall-timeout
 * seconds although it should: bytes written and not read, or a writer
 * still running (except a never-read stream, whose writer must block).
 */
static bool stalled(struct conn *c)
{
	struct stream *st = c->st;
	unsigned int timeout = opt.stall_timeout;
	bool busy;

	if (atomic_load(&st->end) == ENDED_RX) {
		busy = !atomic_load(&st->writer_done); /* must get an error */
		timeout += RX_GONE_GRACE;
	} else if (st->bounded)
		busy = false;
	else
		busy = !atomic_load(&st->writer_done) ||
		       atomic_load(&st->received) != atomic_load(&st->written);
	return busy && now() - atomic_load(&st->progress) > timeout;
}

/* The first stalled stream, for the "no stall" check. */
static char stall_what[256];

static bool watchdog(void)
{
	bool stall = false;

	pthread_mutex_lock(&slots_lock);
	for (unsigned int i = 0; i < opt.conns; i++) {
		if (stalled(&conns[i])) {
			if (!stall)
				msg("FAIL: stall: no progress for %us on:", opt.stall_timeout);
			dump_stream(&conns[i], true, stall ? NULL : stall_what, sizeof(stall_what));
			stall = true;
		}
	}
	if (stall) {
		msg("the other slots:");
		for (unsigned int i = 0; i < opt.conns; i++)
			if (!stalled(&conns[i]))
				dump_stream(&conns[i], false, NULL, 0);
		atomic_store(&failed, true);
		atomic_store(&stop_writers, true);
	}
	pthread_mutex_unlock(&slots_lock);
	return stall;
}

/* ---- memory baseline ---- */

struct mem {
	long sk_msg;		/* active objects in the sk_msg cache, -1 if none */
	long tcp_inuse, tcp_mem; /* /proc/net/sockstat */
};

static struct mem mem_now(void)
{
	struct mem m = { .sk_msg = -1, .tcp_inuse = -1, .tcp_mem = -1 };
	char line[512];
	FILE *f;

	/* Flush the per-CPU slabs, or freed objects still count as active. */
	write_file("/sys/kernel/slab/sk_msg/shrink", "1\n");
	f = fopen("/proc/slabinfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "sk_msg ", 7))
			sscanf(line + 7, "%ld", &m.sk_msg);
	if (f)
		fclose(f);
	f = fopen("/proc/net/sockstat", "r");
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "TCP: inuse %ld orphan %*d tw %*d alloc %*d mem %ld",
		       &m.tcp_inuse, &m.tcp_mem);
	if (f)
		fclose(f);
	return m;
}

/* Wait up to 60 s for memory to come back (psocks go away through RCU and
 * a workqueue; sockets through their close).
 */
static void check_memory(struct mem base)
{
	struct mem m = mem_now();
	double until = now() + 60;
	long slack;

	/* Each CPU may keep up to net.core.mem_pcpu_rsv pages of TCP memory
	 * charged in advance (not yet returned to the global count).
	 */
	slack = read_figure("/proc/sys/net/core/mem_pcpu_rsv", NULL);
	slack = slack < 0 ? 0 : slack * sysconf(_SC_NPROCESSORS_ONLN);
	while ((m.sk_msg > base.sk_msg || m.tcp_inuse > base.tcp_inuse ||
		m.tcp_mem > base.tcp_mem + slack) && now() < until) {
		usleep(200000);
		m = mem_now();
	}
	if (base.sk_msg < 0)
		unit("sk_msg slab back to baseline", 2, "no sk_msg cache in /proc/slabinfo (kernel without the series?)");
	else
		unit("sk_msg slab back to baseline", m.sk_msg > base.sk_msg,
		     "active objects: %ld before, %ld after", base.sk_msg, m.sk_msg);
	unit("sockstat back to baseline", m.tcp_inuse > base.tcp_inuse || m.tcp_mem > base.tcp_mem + slack,
	     "TCP inuse %ld -> %ld, mem %ld -> %ld pages (per-CPU reserves: up to %ld)",
	     base.tcp_inuse, m.tcp_inuse, base.tcp_mem, m.tcp_mem, slack);
}

/* The figures so far: every minute, and at the end. */
static void report_totals(void)
{
	char faults[256];
	int len = 0;

	for (int f = 0; f < NFAULTS; f++)
		len += snprintf(faults + len, sizeof(faults) - len, "%s%s %llu", f ? ", " : "",
				fault_name[f], (unsigned long long)total.faults[f]);
	msg("streams %llu, bytes written %llu, verified %llu, writes %llu, reads %llu (peeks %llu), EAGAIN %llu, EACCES %llu, ENOMEM %llu, toggles %llu, receiver stalls %llu, reconnects %llu",
	    (unsigned long long)total.streams, (unsigned long long)total.written,
	    (unsigned long long)total.verified, (unsigned long long)total.writes,
	    (unsigned long long)total.reads, (unsigned long long)total.peeks,
	    (unsigned long long)total.eagain, (unsigned long long)total.eacces,
	    (unsigned long long)total.enomem,
	    (unsigned long long)total.toggles, (unsigned long long)total.stalls,
	    (unsigned long long)total.reconnects);
	msg("faults: %s", faults);
	msg("sk_msg verdicts: redirect %llu msgs %llu bytes, pass to TCP (mixed streams) %llu msgs %llu bytes, drop (target gone) %llu msgs %llu bytes",
	    (unsigned long long)bpf_stat(STAT_REDIR_MSGS), (unsigned long long)bpf_stat(STAT_REDIR_BYTES),
	    (unsigned long long)bpf_stat(STAT_PASS_MSGS), (unsigned long long)bpf_stat(STAT_PASS_BYTES),
	    (unsigned long long)bpf_stat(STAT_DROP_MSGS), (unsigned long long)bpf_stat(STAT_DROP_BYTES));
	msg("verdict slots: %llu streams; sk_skb verdicts: pass %llu skbs %llu bytes, redirect to self %llu skbs %llu bytes",
	    (unsigned long long)total.verdict_streams,
	    (unsigned long long)bpf_stat(STAT_SKB_PASS), (unsigned long long)bpf_stat(STAT_SKB_PASS_BYTES),
	    (unsigned long long)bpf_stat(STAT_SKB_REDIR), (unsigned long long)bpf_stat(STAT_SKB_REDIR_BYTES));
	msg("mixed streams %llu (%llu ended with both passed and redirected messages), back to redirect %llu times; framing readers %llu: events %llu, frames %llu, waits for more %llu, short reads %llu",
	    (unsigned long long)total.mixed_streams, (unsigned long long)total.mixed_both,
	    (unsigned long long)total.mix_rearms, (unsigned long long)total.frame_readers,
	    (unsigned long long)total.frame_events, (unsigned long long)total.frames,
	    (unsigned long long)total.frame_waits, (unsigned long long)total.frame_short);
}

/* ---- main ---- */

static void usage(int status)
{
	printf("usage: sockmap_stress [--duration SECS] [--seed N] [--conns N] [--stall-timeout SECS]\n"
	       "                      [--no-faults] [--no-memcg] [--no-tcp-pressure] [--fail-alloc PCT] [--corrupt]\n"
	       "                      [--bpf-obj FILE]\n"
	       "  --duration       how long the writers write (default 120)\n"
	       "  --seed           replay the random choices of a run (default: from the clock)\n"
	       "  --conns          connection slots, at least 8 (default 16)\n"
	       "  --stall-timeout  seconds without progress that fail the run (default 60)\n"
	       "  --no-faults      no closes, shutdowns, map deletions or detaches\n"
	       "  --no-memcg       leave the memory controller alone, no memcg check\n"
	       "  --no-tcp-pressure\n"
	       "                   no TCP memory pressure in the middle third of the run\n"
	       "  --fail-alloc     fail PCT%% of the writers' sk_msg and page allocations\n"
	       "                   (fault injection); a write that fails with ENOMEM is retried\n"
	       "  --corrupt        self-test: flip a bit of the received data; the run must fail\n"
	       "  --bpf-obj        the BPF object (default: sockmap_stress.bpf.o beside the program)\n");
	exit(status);
}

static void parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "duration", 1, NULL, 'd' }, { "seed", 1, NULL, 's' },
		{ "conns", 1, NULL, 'n' }, { "stall-timeout", 1, NULL, 't' },
		{ "no-faults", 0, NULL, 'F' }, { "no-memcg", 0, NULL, 'M' }, { "corrupt", 0, NULL, 'C' },
		{ "no-tcp-pressure", 0, NULL, 'P' },
		{ "bpf-obj", 1, NULL, 'o' }, { "fail-alloc", 1, NULL, 'a' },
		{ "help", 0, NULL, 'h' }, { 0 }
	};
	static char obj[PATH_MAX];
	int o;

	opt.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'd': opt.duration = strtoul(optarg, NULL, 0); break;
		case 's': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'n': opt.conns = strtoul(optarg, NULL, 0); break;
		case 't': opt.stall_timeout = strtoul(optarg, NULL, 0); break;
		case 'F': opt.faults = false; break;
		case 'M': opt.memcg = false; break;
		case 'P': opt.tcp_pressure = false; break;
		case 'C': opt.corrupt = true; break;
		case 'o': opt.bpf_obj = optarg; break;
		case 'a': opt.fail_pct = strtoul(optarg, NULL, 0); break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind != argc || opt.conns < 8 || !opt.duration || !opt.stall_timeout ||
	    opt.fail_pct > 100)
		usage(2);
	if (!opt.bpf_obj) {
		ssize_t n = readlink("/proc/self/exe", obj, sizeof(obj) - 32);

		if (n < 0)
			die("/proc/self/exe");
		obj[n] = 0;
		strcpy(strrchr(obj, '/') + 1, "sockmap_stress.bpf.o");
		opt.bpf_obj = obj;
	}
}

/* Slots come in blocks of 8: pair, pair, verdict, self, 3 fan-in, never;
 * what is left over after the last whole block are pairs.
 */
static void make_slots(void)
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

static void check_bound(void)
{
	for (unsigned int i = 0; i < opt.conns; i++) {
		struct conn *c = &conns[i];
		int rcv = 0, snd = 0;
		socklen_t len = sizeof(int);
		uint64_t w = atomic_load(&c->st->written), bound;
		char name[32];

		if (c->role != NEVER)
			continue;
		getsockopt(c->rx_fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
		getsockopt(c->tx_fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
		bound = (uint64_t)rcv + snd + 2 * MAX_WRITE;
		snprintf(name, sizeof(name), "backpressure slot %u", i);
		unit(name, w > bound,
		     "a writer whose reader never reads got %llu bytes in (bound: rcvbuf %d + sndbuf %d + 2 x %d)",
		     (unsigned long long)w, rcv, snd, MAX_WRITE);
	}
}

/* The new paths were taken (their bytes are verified with the rest). */
static void check_paths(void)
{
	uint64_t skb = bpf_stat(STAT_SKB_PASS_BYTES) + bpf_stat(STAT_SKB_REDIR_BYTES);

	unit("verdict path taken", skb == 0,
	     "%llu verdict-slot streams, %llu bytes through the sk_skb verdict, %llu of them redirected to self",
	     (unsigned long long)total.verdict_streams, (unsigned long long)skb,
	     (unsigned long long)bpf_stat(STAT_SKB_REDIR_BYTES));
	/* These two depend on random choices: SKIP when a run made none. */
	unit("pass and redirect mixed", total.mixed_both ? 0 : 2,
	     "%llu of %llu mixed streams had messages passed to TCP and redirected, all in order; %llu bytes passed in %llu messages",
	     (unsigned long long)total.mixed_both, (unsigned long long)total.mixed_streams,
	     (unsigned long long)bpf_stat(STAT_PASS_BYTES), (unsigned long long)bpf_stat(STAT_PASS_MSGS));
	unit("framing readers", total.frames ? 0 : 2,
	     "%llu epoll-frame readers: %llu events, %llu frames, %llu waits for an event without reading, no stall",
	     (unsigned long long)total.frame_readers, (unsigned long long)total.frame_events,
	     (unsigned long long)total.frames, (unsigned long long)total.frame_waits);
}

/* What the never-reading receivers' writers got in is charged to our
 * memory cgroup: taken once the other streams drained, those bytes still
 * queued. Less per-CPU charge caches and stat batching (64 pages a CPU).
 */
static void check_memcg(void)
{
	long long slack = 64LL * sysconf(_SC_NPROCESSORS_ONLN) * sysconf(_SC_PAGESIZE);
	long long sock, current, grown;
	uint64_t never = 0;

	if (!memcg.on) {
		unit("memcg", 2, opt.memcg ? "no memory controller in cgroup v2 at " CGROOT : "--no-memcg");
		return;
	}
	for (unsigned int i = 0; i < opt.conns; i++)
		if (conns[i].role == NEVER)
			never += atomic_load(&conns[i].st->written);
	sock = read_figure(CGROUP "/memory.stat", "sock");
	current = read_figure(CGROUP "/memory.current", NULL);
	grown = sock >= 0 && memcg.sock >= 0 ? sock - memcg.sock : current - memcg.current;
	unit("memcg", grown + slack < (long long)never,
	     "%s grew by %lld bytes (memory.stat sock %lld -> %lld, memory.current %lld -> %lld); never-reading receivers' writers got %llu bytes in; slack %lld",
	     sock >= 0 ? "sock" : "memory.current", grown, memcg.sock, sock, memcg.current, current,
	     (unsigned long long)never, slack);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t r, redir_bytes;
	struct mem base;
	pthread_t inj;
	double end;
	int cg;

	parse_args(argc, argv);
	t0 = now();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	msg("seed %llu, %u connections, %us, stall timeout %us, faults %s, allocation failures %u%%%s",
	    (unsigned long long)opt.seed, opt.conns, opt.duration, opt.stall_timeout,
	    opt.faults ? "on" : "off", opt.fail_pct,
	    opt.corrupt ? ", --corrupt (this run must fail)" : "");
	r = rnd_seed(0x9a7, 0);
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = rnd(&r);

	base = mem_now();
	cg = bpf_setup();
	if (opt.fail_pct)
		fail_setup();
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(listen_fd, 64))
		die("listen");
	make_slots();
	pthread_create(&inj, NULL, injector, NULL);

	end = now() + opt.duration;
	for (double next = now() + 60; now() < end && !atomic_load(&failed) && !watchdog();) {
		double left = end - now();

		usleep(250000);
		if (now() > next) {
			report_totals();
			next += 60;
		}
		if (opt.tcp_pressure && !pressure.done) {
			if (!*pressure.saved && left < opt.duration * 2 / 3.0)
				pressure_start();
			else if (*pressure.saved && left < opt.duration / 3.0)
				pressure_stop();
		}
	}
	if (*pressure.saved && !atomic_load(&failed))
		pressure_stop();
	pressure_end();
	msg("stopping the writers");
	atomic_store(&injector_stop, true);
	pthread_join(inj, NULL);
	atomic_store(&stop_writers, true);
	/* Wake the never-read writers, which must be blocked by now. */
	for (unsigned int i = 0; i < opt.conns; i++)
		if (conns[i].role == NEVER)
			shutdown(conns[i].tx_fd, SHUT_WR);
	/* The readers drain what was written; the watchdog watches them. */
	for (bool busy = true; busy && !atomic_load(&failed);) {
		busy = false;
		for (unsigned int i = 0; i < opt.conns; i++)
			busy |= !atomic_load(&conns[i].writer_exited) ||
				(conns[i].has_reader && !atomic_load(&conns[i].ep.done));
		if (busy && !watchdog())
			usleep(100000);
	}
	if (atomic_load(&failed)) {
		/* Threads may be stuck in the kernel: no clean-up, no memory
		 * check; the kernel log tells the rest.
		 */
		unit("bytes verified", 1, "%llu bytes verified before the failure above",
		     (unsigned long long)atomic_load(&total.verified));
		if (*stall_what)
			unit("no stall", 1, "%s: no progress for %us", stall_what, opt.stall_timeout);
		printf("%d passed, %d failed, %d skipped\n", units[0], units[1], units[2]);
		return 1;
	}
	for (unsigned int i = 0; i < opt.conns; i++) {
		pthread_join(conns[i].writer, NULL);
		if (conns[i].has_reader)
			pthread_join(conns[i].ep.thread, NULL);
		mix_done(&conns[i]);
	}

	report_totals();
	redir_bytes = bpf_stat(STAT_REDIR_BYTES);
	unit("redirect path taken", redir_bytes == 0, "%llu bytes redirected to ingress",
	     (unsigned long long)redir_bytes);
	unit("bytes verified", 0, "%llu streams, %llu bytes, no loss, duplication or reordering",
	     (unsigned long long)total.streams, (unsigned long long)total.verified);
	unit("no stall", 0, "none for %us", opt.stall_timeout);
	check_bound();
	check_paths();
	check_memcg();
	if (opt.fail_pct)
		check_fail_alloc();

	for (unsigned int i = 0; i < opt.conns; i++) {
		close_abort(conns[i].tx_fd);
		close_abort(conns[i].rx_fd);
	}
	close(listen_fd);
	check_memory(base);
	cgroup_leave(cg);
	printf("%d passed, %d failed, %d skipped\n", units[0], units[1], units[2]);
	return units[1] ? 1 : 0;
}
