// SPDX-License-Identifier: GPL-2.0
/*
 * Transparent sockmap acceleration of local TCP, the way users run it: a
 * sockops program puts every established IPv4 TCP socket of the cgroup it is
 * attached to into a sockhash keyed by its 4-tuple, and an sk_msg program
 * redirects each sendmsg() straight into the peer socket's receive queue
 * (bpf_msg_redirect_hash(..., BPF_F_INGRESS)).
 *
 * With redirect = false (set by the loader before load) the sockets still go
 * into the sockhash and every message still runs the sk_msg program, which
 * then passes it on to TCP: sockmap in use, but nothing redirected. The
 * loader may also leave the sk_msg program out (the sockets in the sockhash
 * with no program on their data) or attach pass_skb instead, a stream
 * verdict that passes every skb the sockets receive to them.
 *
 * Counters, per sending side (the connecting or the accepting socket) and
 * outcome, prove what happened to every byte; inserted counts the sockets
 * put into the sockhash.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sockredir.h"

#define AF_INET 2

const volatile bool redirect = true;

/* Sockets the sockops program put into the sockhash so far. */
__u64 inserted;

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, __u64);
} flows SEC(".maps");

/* The side of the connection a socket is on (enum role). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} roles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_ROLES * NR_OUTCOMES);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

SEC("sockops")
int add_established(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct flow_key key;
	__u32 *role;

	if (skops->family != AF_INET || !sk)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		break;
	default:
		return 1;
	}
	role = bpf_sk_storage_get(&roles, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!role)
		return 1;
	*role = skops->op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB ? ROLE_CONNECTED : ROLE_ACCEPTED;
	key.local_ip4 = skops->local_ip4;
	key.remote_ip4 = skops->remote_ip4;
	key.local_port = skops->local_port;
	key.remote_port = bpf_ntohl(skops->remote_port);
	if (!bpf_sock_hash_update(skops, &flows, &key, BPF_NOEXIST))
		__sync_fetch_and_add(&inserted, 1);
	return 1;
}

SEC("sk_msg")
int redirect_to_peer(struct sk_msg_md *msg)
{
	/* The peer's key: our 4-tuple seen from the other end. */
	struct flow_key peer = {
		.local_ip4 = msg->remote_ip4,
		.remote_ip4 = msg->local_ip4,
		.local_port = bpf_ntohl(msg->remote_port),
		.remote_port = msg->local_port,
	};
	__u32 role = ROLE_UNKNOWN, outcome = OUTCOME_PASSED, idx;
	struct counter *c;
	__u32 *r;

	r = bpf_sk_storage_get(&roles, msg->sk, 0, 0);
	if (r && *r < NR_ROLES)
		role = *r;
	if (redirect && bpf_msg_redirect_hash(msg, &flows, &peer, BPF_F_INGRESS) == SK_PASS)
		outcome = OUTCOME_REDIRECTED;
	idx = role * NR_OUTCOMES + outcome;
	c = bpf_map_lookup_elem(&counters, &idx);
	if (c) {
		c->msgs++;
		c->bytes += msg->size;
	}
	return SK_PASS;
}

/*
 * An sk_skb stream verdict on the sockhash, alone (no sk_msg program): each
 * skb a socket of the sockhash receives passes to that socket, its bytes
 * counted as passed. Which side sent it is not looked up: "unknown".
 */
SEC("sk_skb/stream_verdict")
int pass_skb(struct __sk_buff *skb)
{
	__u32 idx = ROLE_UNKNOWN * NR_OUTCOMES + OUTCOME_PASSED;
	struct counter *c;

	c = bpf_map_lookup_elem(&counters, &idx);
	if (c) {
		c->msgs++;
		c->bytes += skb->len;
	}
	return SK_PASS;
}

char LICENSE[] SEC("license") = "GPL";
