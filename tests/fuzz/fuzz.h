/* SPDX-License-Identifier: GPL-2.0 */
/* sockmap_fuzz: what its parts share. main.c runs seeds, traces and
 * reduces; ops.c makes and reads operation lists; exec.c runs operations
 * on the sockets and maps; model.c is the oracle.
 */
#ifndef SOCKMAP_FUZZ_H
#define SOCKMAP_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "fuzz_bpf.h"

#define MAX_PAIRS	4
#define NSOCK		(2 * MAX_PAIRS)
#define MAX_LEN		(256 * 1024)
#define MAX_LANES	48
#define RCVTIMEO_MS	2000	/* a blocking read's bound */
#define TCP_WAIT_MS	5000	/* bytes that come through TCP: Nagle, delayed ACKs */
#define SNDTIMEO_MS	100	/* a blocking write's bound */
#define SPLICE_CHUNK	65536	/* sendfile()'s pipe: 16 pages */

enum op_kind {
	OP_PAIRS, OP_INSERT, OP_DELETE, OP_VINSERT, OP_VDELETE, OP_PLAN, OP_SKB,
	OP_DETACH, OP_ATTACH, OP_SEND, OP_SENDFILE, OP_OPT, OP_READ, OP_ASYNC,
	OP_SHUT, OP_CLOSE, OP_CONNECT, OP_PRESSURE, NOPKINDS
};
enum opt_kind { O_NODELAY, O_CORK, O_SNDBUF, O_RCVBUF, O_LOWAT, NOPTS };
enum read_style { R_BLOCK, R_NB, R_PEEK, R_FIONREAD, R_POLL, R_EPOLL_LT, R_EPOLL_ET, NREADS };
enum send_style { SS_SEND, SS_SENDMSG, SS_WRITE, NSSTYLES };
#define SF_DONTWAIT	1
#define SF_MORE		2

/* One operation: its kind, the socket slot it acts on (or the pair for
 * OP_CONNECT) and up to four parameters (see ops.c).
 */
struct op {
	int kind, s, a, b, c, d;
};

struct oplist {
	struct op *v;
	int n, cap;
};

/* sk_msg verdict state of a socket's psock, as the model follows it. */
enum { EV_NONE, EV_PASS, EV_REDIR, EV_DROP };
/* Where bytes go: a receiver's ingress queue (redirected) or TCP. */
enum { P_ING, P_TCP };

struct range {
	uint64_t off, len;	/* of the sender's stream */
	uint64_t seq;		/* the operation that delivered them */
	bool held;		/* TCP: held by TCP_CORK/MSG_MORE until a push */
};

/* Bytes one stream sends to one receiver by one path: in order. */
struct lane {
	int sid, slot, path;
	bool lossy;		/* bytes may be missing (teardown, reset) */
	struct range *r;
	int head, n, cap;
	uint64_t done;		/* of r[head], read already */
};

struct fsock {
	int fd, slot, uid, pair;
	struct fz_key key;	/* of its plan */
	int sid;		/* the stream it sends */
	uint64_t sent;		/* next offset of that stream */
	/* maps and programs */
	bool in_socks, in_vsocks, msg_prog, verdict_prog;
	bool verdict_since_look;	/* had verdict_prog since it last looked */
	bool had_verdict;	/* its ingress queue may hold a FIN message */
	bool fin_read;		/* read an EOF with a verdict program */
	struct fz_plan plan;	/* as in the plans map */
	/* its psock's sk_msg state */
	int eval, redir_uid;
	uint32_t apply_rem, cork_rem;
	uint64_t cork_off, cork_len;
	bool apply_unsure;	/* apply_rem no longer known: keep the plan */
	bool cork_unsure;	/* its psock may hold a cork the model lost track of */
	/* sending side */
	bool nodelay, tcp_cork, shut_wr;
	/* receiving side */
	int lowat, ep_lt, ep_et;
	bool rcvbuf_set;	/* SO_RCVBUF set once connected (TCP's window) */
	bool async, told, peer_fin, rst_ok, tcp_async_since_look;
	int sig_base;		/* signals counted when last looked at */
	int sig_looked;		/* signals counted when it last read, peeked or asked */
	uint64_t fin_seq;
	int et_strict, et_relaxed;	/* arrivals an ET waiter must hear of */
	int sig_strict, sig_relaxed;	/* the same for SIGIO */
	bool sig_unsure;	/* bytes may wait on its backlog (rcvbuf_full()) */
	struct lane lanes[MAX_LANES];
	int nlanes;
};

/* What a receiver can be sure of at a read (model_expect()). */
struct expect {
	uint64_t ing;		/* redirected, delivered: readable now */
	uint64_t tcp;		/* over TCP, not held: readable soon */
	uint64_t held;		/* over TCP, held by the sender's cork */
	uint64_t lossy;		/* may be missing */
	uint64_t total;
	bool eof_ok;		/* EOF is allowed now */
	bool eof_due;		/* EOF must come: FIN sent, nothing else due */
};

/* main.c */
extern uint64_t run_seed;
extern uint64_t op_seq;
extern int trace_verbose;
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool failed(void);
void note_unsure(const char *what);
int unsure_count(void);
void note_late(int slot, const char *what, double ms);
void note_known(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t mix64(uint64_t x);

/* ops.c */
void ops_generate(uint64_t seed, int nops, struct oplist *l);
void op_format(const struct op *o, char *buf, size_t len);
int ops_read(const char *path, struct oplist *l);
void ops_write(FILE *f, const struct oplist *l, const char *header);
void ops_push(struct oplist *l, struct op o);

/* exec.c, reads.c */
extern struct fsock socks[NSOCK];
extern int npairs;
int world_init(const char *bpf_obj);
void world_begin(void);
void world_end(void);
void exec_op(const struct op *o, char *res, size_t len);
void exec_drain(void);
bool told_by_signal(struct fsock *r);
struct fsock *sock_by_uid(int uid);
void plan_write(struct fsock *s);
uint64_t plan_runs(struct fsock *s);
void pressure_restore(void);

/* model.c */
void model_reset(void);
int stream_new(int slot);
bool stream_lenient(int sid);
void stream_set_lenient(int sid);
/* The operation running made a stream lenient: where its bytes went is unknown. */
extern bool lost_track_op;
struct lane *lane_get(struct fsock *r, int sid, int path);
void lane_append(struct lane *l, uint64_t off, uint64_t len, uint64_t seq, bool held);
uint64_t lane_pending(const struct lane *l);
void lane_clear(struct lane *l);
void stream_gen(int sid, uint64_t off, uint8_t *buf, size_t len);
void model_new_sock(struct fsock *s);
void model_send(struct fsock *s, size_t len, int flags, ssize_t ret, int64_t runs);
void model_sendfile(struct fsock *s, size_t len, ssize_t ret);
void model_push(struct fsock *s);
void model_expect(struct fsock *r, struct expect *e);
bool model_read(struct fsock *r, const uint8_t *buf, size_t n, bool peek);
void model_eof(struct fsock *r, bool reset);
void model_looked(struct fsock *r);
void model_all_lossy(struct fsock *r);
void model_psock_gone(struct fsock *s);
void model_shut(struct fsock *s);
void model_close(struct fsock *s, bool abort);
void model_vdelete(struct fsock *r);
bool model_plan_ok(struct fsock *s, const struct fz_plan *p, const char **why);
void model_final(struct fsock *r);
uint64_t model_verified(void);

#endif
