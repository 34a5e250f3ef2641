// SPDX-License-Identifier: GPL-2.0
/*
 * Operation lists of sockmap_fuzz: made from a seed, written and read as
 * text. A list is a pure function of its seed (nothing a kernel does
 * changes it), so the same seed runs the same operations on every kernel
 * and a reduced list replays as it is.
 *
 * One operation a line: its name, the socket slot (pair for connect) and
 * four numbers, then a comment that spells them out:
 *
 *   pairs    N                          N connected pairs, slots 2p, 2p+1
 *   insert   S                          slot S into the sockhash
 *   delete   S                          slot S out of it
 *   vinsert  S / vdelete S              into / out of the verdict map
 *   plan     S ACTION TARGET APPLY CORK its sk_msg plan (0 pass, 1 drop,
 *                                       2 redirect to TARGET's ingress)
 *   skb      S REDIR                    its sk_skb plan (pass / redirect)
 *   detach / attach                     the sk_msg program from/to the map
 *   send     S LEN FLAGS STYLE          FLAGS 1 MSG_DONTWAIT, 2 MSG_MORE;
 *                                       STYLE 0 send, 1 sendmsg (iovec), 2 write
 *   sendfile S LEN                      from a memfd
 *   opt      S KIND VALUE               0 TCP_NODELAY, 1 TCP_CORK, 2 SO_SNDBUF,
 *                                       3 SO_RCVBUF, 4 SO_RCVLOWAT
 *   read     S STYLE LEN                0 blocking, 1 MSG_DONTWAIT, 2 MSG_PEEK,
 *                                       3 FIONREAD, 4 poll, 5 epoll LT, 6 epoll ET
 *   async    S ON                       O_ASYNC with a signal per arrival
 *   shut     S                          shutdown(SHUT_WR)
 *   close    S ABORT                    close (ABORT: with SO_LINGER 0)
 *   connect  P INSERT                   pair P anew (INSERT: bit 0 client,
 *                                       bit 1 server into the sockhash)
 *   pressure 0 ON                       net.ipv4.tcp_mem thresholds at 1 page
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"

static const char *const names[NOPKINDS] = {
	"pairs", "insert", "delete", "vinsert", "vdelete", "plan", "skb", "detach", "attach",
	"send", "sendfile", "opt", "read", "async", "shut", "close", "connect", "pressure",
};
static const char *const opt_names[NOPTS] = { "TCP_NODELAY", "TCP_CORK", "SO_SNDBUF", "SO_RCVBUF",
					      "SO_RCVLOWAT" };
static const char *const read_names[NREADS] = { "blocking", "dontwait", "peek", "fionread", "poll",
						 "epoll-lt", "epoll-et" };
static const char *const style_names[NSSTYLES] = { "send", "sendmsg", "write" };
static const char *const action_names[FZ_NACTIONS] = { "pass", "drop", "redirect" };

/* Weights of the operations after the setup. */
static const int weight[NOPKINDS] = {
	[OP_SEND] = 300, [OP_SENDFILE] = 30, [OP_OPT] = 70, [OP_READ] = 300, [OP_PLAN] = 50,
	[OP_SKB] = 8, [OP_INSERT] = 20, [OP_DELETE] = 15, [OP_VINSERT] = 8, [OP_VDELETE] = 8,
	[OP_DETACH] = 8, [OP_ATTACH] = 10, [OP_ASYNC] = 10, [OP_SHUT] = 6, [OP_CLOSE] = 6,
	[OP_CONNECT] = 24, [OP_PRESSURE] = 4,
};

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9E3779B97F4A7C15ULL;
	return mix64(*s);
}

static bool one_in(uint64_t *s, unsigned int n)
{
	return rnd(s) % n == 0;
}

/* 1 .. max, log-uniform. */
static int rnd_size(uint64_t *s, int max)
{
	int bits = 0, v;

	while ((1 << bits) < max)
		bits++;
	v = 1 + rnd(s) % (1u << (rnd(s) % (bits + 1)));
	return v > max ? max : v;
}

void ops_push(struct oplist *l, struct op o)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = o;
}

static struct op gen_plan(uint64_t *r, int s, int nsock)
{
	struct op o = { OP_PLAN, s, FZ_REDIR, s ^ 1, 0, 0 };
	int x = rnd(r) % 100;

	if (x < 20)
		o.a = FZ_PASS;
	else if (x < 30)
		o.a = FZ_DROP;
	else if (x < 45)
		o.b = rnd(r) % nsock;		/* fan-in (or any) */
	else if (x < 55)
		o.b = s;			/* itself */
	if (o.a == FZ_DROP)
		return o;
	if (one_in(r, 5))
		o.c = rnd_size(r, 65536);
	else if (one_in(r, 6))
		o.d = rnd_size(r, 65536);
	return o;
}

static struct op gen_one(uint64_t *r, int nsock, int npairs)
{
	struct op o = { 0 };
	int total = 0, k, x;

	for (k = 0; k < NOPKINDS; k++)
		total += weight[k];
	x = rnd(r) % total;
	for (k = 0; x >= weight[k]; k++)
		x -= weight[k];
	o.kind = k;
	o.s = rnd(r) % nsock;
	switch (k) {
	case OP_PLAN:
		return gen_plan(r, o.s, nsock);
	case OP_SKB:
		o.a = one_in(r, 2);
		break;
	case OP_SEND:
		o.a = rnd_size(r, MAX_LEN);
		o.b = (one_in(r, 3) ? 0 : SF_DONTWAIT) | (one_in(r, 6) ? SF_MORE : 0);
		o.c = rnd(r) % NSSTYLES;
		break;
	case OP_SENDFILE:
		o.a = rnd_size(r, MAX_LEN);
		break;
	case OP_OPT:
		o.a = rnd(r) % NOPTS;
		if (o.a <= O_CORK)
			o.b = one_in(r, 2);
		else if (o.a == O_LOWAT)
			o.b = one_in(r, 2) ? 1 : rnd_size(r, 65536);
		else
			o.b = 4096 << (rnd(r) % 11);
		break;
	case OP_READ:
		o.a = rnd(r) % NREADS;
		o.b = one_in(r, 4) ? MAX_LEN : rnd_size(r, MAX_LEN);
		break;
	case OP_ASYNC:
		o.a = !one_in(r, 3);
		break;
	case OP_CLOSE:
		o.a = one_in(r, 3);
		break;
	case OP_CONNECT:
		o.s = rnd(r) % npairs;
		o.a = one_in(r, 8) ? rnd(r) % 3 : 3;
		break;
	case OP_PRESSURE:
		o.s = 0;
		o.a = !one_in(r, 3);
		break;
	case OP_DETACH:
	case OP_ATTACH:
		o.s = 0;
		break;
	}
	return o;
}

void ops_generate(uint64_t seed, int nops, struct oplist *l)
{
	uint64_t r = mix64(seed ^ 0x5EEDF00DULL);
	int npairs = 2 + rnd(&r) % (MAX_PAIRS - 1), nsock = 2 * npairs, s, i;

	l->n = 0;
	ops_push(l, (struct op){ OP_PAIRS, 0, npairs, 0, 0, 0 });
	for (s = 0; s < nsock; s++) {
		ops_push(l, gen_plan(&r, s, nsock));
		if (one_in(&r, 4)) {
			ops_push(l, (struct op){ OP_VINSERT, s, 0, 0, 0, 0 });
			ops_push(l, (struct op){ OP_SKB, s, one_in(&r, 2), 0, 0, 0 });
		}
		if (!one_in(&r, 8))
			ops_push(l, (struct op){ OP_INSERT, s, 0, 0, 0, 0 });
		if (one_in(&r, 5))
			ops_push(l, (struct op){ OP_ASYNC, s, 1, 0, 0, 0 });
	}
	for (i = 0; i < nops; i++)
		ops_push(l, gen_one(&r, nsock, npairs));
}

void op_format(const struct op *o, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%-8s %d %d %d %d %d  # ", names[o->kind], o->s, o->a, o->b,
			 o->c, o->d);
	char *p = buf + n;
	size_t left = len > (size_t)n ? len - n : 0;

	switch (o->kind) {
	case OP_PLAN:
		if (o->a == FZ_REDIR)
			snprintf(p, left, "slot %d: redirect to slot %d, apply %d cork %d", o->s, o->b,
				 o->c, o->d);
		else
			snprintf(p, left, "slot %d: %s, apply %d cork %d", o->s,
				 action_names[(unsigned int)o->a % FZ_NACTIONS], o->c, o->d);
		break;
	case OP_SEND:
		snprintf(p, left, "slot %d: %s %d B%s%s", o->s, style_names[o->c % NSSTYLES], o->a,
			 o->b & SF_DONTWAIT ? " MSG_DONTWAIT" : "", o->b & SF_MORE ? " MSG_MORE" : "");
		break;
	case OP_OPT:
		snprintf(p, left, "slot %d: %s %d", o->s, opt_names[o->a % NOPTS], o->b);
		break;
	case OP_READ:
		snprintf(p, left, "slot %d: %s up to %d B", o->s, read_names[o->a % NREADS], o->b);
		break;
	case OP_CONNECT:
		snprintf(p, left, "pair %d anew, insert %s", o->s,
			 (const char *[]){ "none", "client", "server", "both" }[o->a & 3]);
		break;
	case OP_SKB:
		snprintf(p, left, "slot %d: skbs %s", o->s, o->a ? "redirected to self" : "passed");
		break;
	default:
		snprintf(p, left, "%s", names[o->kind]);
	}
}

int ops_read(const char *path, struct oplist *l)
{
	char line[512], name[32];
	FILE *f = fopen(path, "r");
	struct op o;
	int k, line_no = 0;

	if (!f)
		return -1;
	l->n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');

		line_no++;
		if (hash)
			*hash = 0;
		memset(&o, 0, sizeof(o));
		if (sscanf(line, "%31s %d %d %d %d %d", name, &o.s, &o.a, &o.b, &o.c, &o.d) < 1)
			continue;
		for (k = 0; k < NOPKINDS && strcmp(names[k], name); k++)
			;
		if (k == NOPKINDS) {
			fprintf(stderr, "%s:%d: unknown operation '%s'\n", path, line_no, name);
			fclose(f);
			return -1;
		}
		o.kind = k;
		ops_push(l, o);
	}
	fclose(f);
	return l->n && l->v[0].kind == OP_PAIRS ? 0 : -1;
}

void ops_write(FILE *f, const struct oplist *l, const char *header)
{
	char buf[256];
	int i;

	if (header)
		fprintf(f, "%s", header);
	for (i = 0; i < l->n; i++) {
		op_format(&l->v[i], buf, sizeof(buf));
		fprintf(f, "%s\n", buf);
	}
}
