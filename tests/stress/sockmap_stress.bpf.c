// SPDX-License-Identifier: GPL-2.0
/* BPF side of the sockmap stress harness (main.c, stress.h and the rest).
 *
 * sockops: every established TCP connection of the cgroup goes into
 * sock_hash, keyed by its 4-tuple (from the socket's own point of view).
 * sk_msg: every sendmsg() is redirected with BPF_F_INGRESS to the socket
 * that routes[own 4-tuple] names (fan-in, redirect to self), by default
 * to the peer, i.e. the key with both ends swapped; a writer with a plan
 * (struct plan) passes some of its messages to plain TCP instead. A
 * socket that is not in sock_hash (deleted, or inserted while the
 * program was detached) has no sk_msg program and sends over plain TCP.
 * sk_skb stream_verdict (on verdict_hash, where the harness puts the
 * receivers of verdict slots): everything that arrives over TCP, the FIN
 * included, is passed to the receiver's own ingress queue, or, by the
 * receiver's plan, redirected to it with bpf_sk_redirect_hash() and
 * BPF_F_INGRESS. stats counts the verdicts, so the harness can tell that
 * each path was taken at all.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sockmap_stress.h"

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, __u64);
} sock_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, __u64);
} verdict_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, struct sock_key);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, struct plan);
} plans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static void count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		__sync_fetch_and_add(v, n);
}

/* Is verdict n of @p one of the one_in picked? (splitmix64 of salt, n) */
static int pick(struct plan *p)
{
	__u64 x = p->salt + p->n++ * 0x9E3779B97F4A7C15ULL;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	x ^= x >> 31;
	return p->one_in && x % p->one_in == 0;
}

SEC("sockops")
int stress_sockops(struct bpf_sock_ops *skops)
{
	struct sock_key key;

	if (skops->family != 2 /* AF_INET */)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		key.sip = skops->local_ip4;
		key.dip = skops->remote_ip4;
		key.sport = skops->local_port;
		key.dport = bpf_ntohl(skops->remote_port);
		bpf_sock_hash_update(skops, &sock_hash, &key, BPF_ANY);
		break;
	}
	return 1;
}

SEC("sk_msg")
int stress_sk_msg(struct sk_msg_md *msg)
{
	struct sock_key own, dst, *route;
	struct plan *plan;
	int ret;

	own.sip = msg->local_ip4;
	own.dip = msg->remote_ip4;
	own.sport = msg->local_port;
	own.dport = bpf_ntohl(msg->remote_port);
	/* Runs under the sender's socket lock: one run per socket at a time. */
	plan = bpf_map_lookup_elem(&plans, &own);
	if (plan && (plan->passing || pick(plan))) {
		plan->passing = 1;
		plan->passed++;
		count(STAT_PASS_MSGS, 1);
		count(STAT_PASS_BYTES, msg->size);
		return SK_PASS;
	}
	route = bpf_map_lookup_elem(&routes, &own);
	if (route) {
		dst = *route;
	} else {
		dst.sip = own.dip;
		dst.dip = own.sip;
		dst.sport = own.dport;
		dst.dport = own.sport;
	}
	ret = bpf_msg_redirect_hash(msg, &sock_hash, &dst, BPF_F_INGRESS);
	if (plan && ret == SK_PASS)
		plan->redirected++;
	/* SK_DROP: the target is not in the map (a race with its close):
	 * sendmsg() fails with EACCES.
	 */
	count(ret == SK_PASS ? STAT_REDIR_MSGS : STAT_DROP_MSGS, 1);
	count(ret == SK_PASS ? STAT_REDIR_BYTES : STAT_DROP_BYTES, msg->size);
	return ret;
}

SEC("sk_skb/stream_verdict")
int stress_sk_skb(struct __sk_buff *skb)
{
	struct sock_key own;
	struct plan *plan;

	own.sip = skb->local_ip4;
	own.dip = skb->remote_ip4;
	own.sport = skb->local_port;
	own.dport = bpf_ntohl(skb->remote_port);
	plan = bpf_map_lookup_elem(&plans, &own);
	/* Redirect to self; if the receiver already left the map (its
	 * close), pass: nobody reads it any more.
	 */
	if (plan && pick(plan) &&
	    bpf_sk_redirect_hash(skb, &verdict_hash, &own, BPF_F_INGRESS) == SK_PASS) {
		count(STAT_SKB_REDIR, 1);
		count(STAT_SKB_REDIR_BYTES, skb->len);
		return SK_PASS;
	}
	count(STAT_SKB_PASS, 1);
	count(STAT_SKB_PASS_BYTES, skb->len);
	return SK_PASS;
}

char _license[] SEC("license") = "GPL";
