// SPDX-License-Identifier: GPL-2.0
/* The checks: the run's own cgroup and its memcg check, the watchdog,
 * memory back to its baseline, the figures, and the checks at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <linux/sockios.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "stress.h"

/* ---- totals ---- */

static const char *const fault_name[NFAULTS] = {
	"close-writer", "shutdown-writer", "close-reader", "shutdown-reader",
	"map-delete-writer", "map-reinsert-writer", "prog-detach", "prog-attach",
};

struct totals total;

/* ---- the run's own cgroup ---- */

#define CGROOT		"/sys/fs/cgroup"
#define CGROUP		CGROOT "/sockmap-stress"

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
int cgroup_enter(void)
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
void cgroup_leave(int cg)
{
	close(cg);
	if (write_file(CGROOT "/cgroup.procs", "%d\n", getpid()) || rmdir(CGROUP))
		msg("cannot remove " CGROUP ": %s", strerror(errno));
	/* Fails if another cgroup uses it meanwhile: leave it on then. */
	if (memcg.enabled)
		write_file(CGROOT "/cgroup.subtree_control", "-memory\n");
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
char stall_what[256];

bool watchdog(void)
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

struct mem mem_now(void)
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
void check_memory(struct mem base)
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

/* ---- figures and checks at the end ---- */

/* The figures so far: every minute, and at the end. */
void report_totals(void)
{
	char faults[256];
	int len = 0;

	for (int f = 0; f < NFAULTS; f++)
		len += snprintf(faults + len, sizeof(faults) - len, "%s%s %llu", f ? ", " : "",
				fault_name[f], (unsigned long long)total.faults[f]);
	msg("streams %llu, bytes written %llu, verified %llu, writes %llu, reads %llu (peeks %llu, %llu overtaken), EAGAIN %llu, EACCES %llu, ENOMEM %llu, toggles %llu, receiver stalls %llu, reconnects %llu",
	    (unsigned long long)total.streams, (unsigned long long)total.written,
	    (unsigned long long)total.verified, (unsigned long long)total.writes,
	    (unsigned long long)total.reads, (unsigned long long)total.peeks,
	    (unsigned long long)total.peeks_overtaken,
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

void check_bound(void)
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
void check_paths(void)
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
void check_memcg(void)
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
