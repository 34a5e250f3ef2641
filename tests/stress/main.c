// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap_stress: stress and fault harness for sk_msg redirect-to-ingress.
 * This file: the options, and main(), which runs the phases of a run; the
 * harness as a whole is described here, stress.h lists the other files.
 *
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
 * Readers use read, recv(MSG_PEEK) then read (the bytes must agree, but
 * at a mixed fan-in receiver, see same_as_peeked()), epoll
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
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "stress.h"

struct options opt = { .duration = 120, .conns = 16, .stall_timeout = 60, .faults = true,
		       .memcg = true, .tcp_pressure = true };

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
