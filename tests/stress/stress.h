/* SPDX-License-Identifier: GPL-2.0 */
/* What the files of the sockmap stress harness share: the options, the
 * streams, slots and endpoints, the totals, and the functions and globals
 * each file offers the others. (sockmap_stress.h is what the harness
 * shares with its BPF programs.) The files, by role:
 *   main.c     the options, main(): the run from setup to the last check
 *   common.c   output and check results, random numbers, cgroup, proc and
 *              sysfs files
 *   stream.c   the byte pattern of a stream (made and checked at any
 *              offset), a stream's progress and end
 *   conn.c     the BPF programs and maps, connections, setting up a slot
 *              and reconnecting it
 *   writer.c   the writer thread of a slot
 *   reader.c   the reader thread of an endpoint, in its read mode
 *   faults.c   the fault injector and the faults it asks for, allocation
 *              failures (--fail-alloc), TCP memory pressure
 *   checks.c   the run's cgroup, the watchdog, memory baselines, the
 *              figures and the checks at the end
 */
#ifndef STRESS_H
#define STRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sockmap_stress.h"

#define MAX_WRITE	(256 * 1024)
#define NTAGS		4

/* ---- options (main.c) ---- */

struct options {
	unsigned int duration, conns, stall_timeout, fail_pct;
	uint64_t seed;
	bool faults, corrupt, memcg, tcp_pressure;
	const char *bpf_obj;
};
extern struct options opt;

/* ---- results and reporting, random numbers, files (common.c) ---- */

extern atomic_bool failed, stop_writers;
extern int units[3]; /* passed, failed, skipped */
extern double t0;

double now(void);
void msg(const char *fmt, ...);
void fail(const char *fmt, ...);
void unit(const char *name, int result /* 0 OK, 1 FAIL, 2 SKIP */, const char *fmt, ...);
void die(const char *what) __attribute__((noreturn));

uint64_t rnd(uint64_t *s);
uint64_t mix(uint64_t x);
uint64_t rnd_seed(uint64_t a, uint64_t b);
bool one_in(uint64_t *s, unsigned int n);
size_t rnd_upto(uint64_t *s, unsigned int bits);
size_t rnd_size(uint64_t *s);

int write_file(const char *path, const char *fmt, ...);
long long read_figure(const char *path, const char *key);

/* ---- streams and their byte pattern (stream.c) ---- */

extern uint8_t pattern[65536];

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

void gen(const struct stream *st, uint64_t off, uint8_t *buf, size_t len);
void mismatch(const struct stream *st, const char *where, uint64_t off,
	      const uint8_t *got, size_t avail);
void touch(struct stream *st);
void end_stream(struct stream *st, enum stream_end how);
struct stream *new_stream(int tag, bool bounded);

/* ---- totals (checks.c) ---- */

enum fault {
	F_CLOSE_TX, F_SHUT_TX, F_CLOSE_RX, F_SHUT_RX, F_DELETE_TX, F_REINSERT_TX,
	F_DETACH, F_ATTACH, NFAULTS
};

struct totals {
	atomic_uint_fast64_t streams, written, verified, writes, reads, peeks, peeks_overtaken, eagain,
		eacces, enomem, toggles, stalls, reconnects, faults[NFAULTS];
	atomic_uint_fast64_t verdict_streams, mixed_streams, mixed_both, mix_rearms;
	atomic_uint_fast64_t frame_readers, frame_events, frames, frame_waits, frame_short;
};
extern struct totals total;

#define count(field, n) atomic_fetch_add(&total.field, (n))

/* ---- BPF and connections (conn.c) ---- */

extern int map_fd, plans_fd, msg_prog_fd;
extern atomic_bool msg_prog_attached;

enum role { PAIR, VERDICT, SELF, FANIN, NEVER };
extern const char *const role_name[];
enum rmode { M_READ, M_PEEK, M_EPOLL_LT, M_EPOLL_ET, M_EPOLL_FRAME, NMODES };
extern const char *const mode_name[];

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

extern struct conn *conns;
/* Against the watchdog looking at a slot that is being reconnected. */
extern pthread_mutex_t slots_lock;
extern int listen_fd;

int bpf_setup(void);
uint64_t bpf_stat(enum stress_stat i);
void close_abort(int fd);
void set_flag(int fd, int level, int name, int on);
void set_nonblock(int fd, bool on);
void mix_done(struct conn *c);
bool is_pair(const struct conn *c);
struct conn *reader_slot(struct conn *c);
void kick(struct endpoint *ep);
void recycle(struct conn *c);
void make_slots(void);

/* ---- the writer (writer.c) and the reader (reader.c) ---- */

void *writer(void *arg);
void end_streams(struct endpoint *ep, enum stream_end how);
void *reader(void *arg);

/* ---- faults (faults.c) ---- */

/* The TCP memory pressure phase. */
struct pressure {
	char saved[128];	/* tcp_mem before, while the phase runs */
	long long entered;	/* TcpExt TCPMemoryPressures at its start */
	uint64_t verified;	/* total.verified at its start */
	bool done;
};
extern struct pressure pressure;
extern atomic_bool injector_stop;

void fail_setup(void);
void check_fail_alloc(void);
void pressure_end(void);
void pressure_start(void);
void pressure_stop(void);
bool take_req(struct conn *c, enum fault f);
void *injector(void *arg);

/* ---- checks (checks.c) ---- */

struct mem {
	long sk_msg;		/* active objects in the sk_msg cache, -1 if none */
	long tcp_inuse, tcp_mem; /* /proc/net/sockstat */
};

/* The first stalled stream, for the "no stall" check. */
extern char stall_what[256];

int cgroup_enter(void);
void cgroup_leave(int cg);
bool watchdog(void);
struct mem mem_now(void);
void check_memory(struct mem base);
void report_totals(void);
void check_bound(void);
void check_paths(void);
void check_memcg(void);

#endif
