/* SPDX-License-Identifier: GPL-2.0 */
/* What the sockmap stress harness (main.c and the files stress.h lists)
 * and its BPF programs (sockmap_stress.bpf.c) share: map keys and values,
 * and the counters.
 */
#ifndef SOCKMAP_STRESS_H
#define SOCKMAP_STRESS_H

#include <linux/types.h>

/* A socket's 4-tuple, from its own point of view. */
struct sock_key {
	__u32 sip, dip;		/* network byte order */
	__u32 sport, dport;	/* host byte order */
};

/* A socket's plan for the verdicts of its programs (the plans map, keyed
 * by its 4-tuple), set by the harness before the socket sends or
 * receives. Verdict n is chosen by a hash of salt and n, so a seed
 * replays it. sk_msg (a writer): from a message picked one in one_in on,
 * pass to plain TCP instead of redirecting, until the harness clears
 * passing (once the reader has caught up). sk_skb (a verdict receiver):
 * redirect one skb in one_in to the receiver's own ingress instead of
 * passing it.
 */
struct plan {
	__u64 salt;
	__u64 n;		/* verdicts so far */
	__u32 one_in;		/* 0: never */
	__u32 passing;		/* sk_msg: passing until the harness clears it */
	__u32 passed, redirected; /* sk_msg: messages, whatever the plan */
};

/* The stats map: what the programs did, messages (skbs) and bytes. */
enum stress_stat {
	STAT_REDIR_MSGS, STAT_REDIR_BYTES,	/* sk_msg: redirected to ingress */
	STAT_DROP_MSGS, STAT_DROP_BYTES,	/* sk_msg: target gone */
	STAT_PASS_MSGS, STAT_PASS_BYTES,	/* sk_msg: passed to TCP (plan) */
	STAT_SKB_PASS, STAT_SKB_PASS_BYTES,	/* sk_skb: passed to own ingress */
	STAT_SKB_REDIR, STAT_SKB_REDIR_BYTES,	/* sk_skb: redirected to self */
	NSTATS
};

#endif
