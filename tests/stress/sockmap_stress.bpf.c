// SPDX-License-Identifier: GPL-2.0
/* BPF side of the sockmap stress harness (sockmap_stress.c).
 *
 * sockops: every established TCP connection of the cgroup goes into
 * sock_hash, keyed by its 4-tuple (from the socket's own point of view).
 * sk_msg: every sendmsg() is redirected with BPF_F_INGRESS to the socket
 * that routes[own 4-tuple] names (fan-in, redirect to self), by default
 * to the peer, i.e. the key with both ends swapped. A socket that is not in
 * sock_hash (deleted, or inserted while the program was detached) has no
 * sk_msg program and sends over plain TCP. stats counts the verdicts, so
 * the harness can tell that the redirect path was taken at all.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct sock_key {
	__u32 sip, dip; /* network byte order */
	__u32 sport, dport; /* host byte order */
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, __u64);
} sock_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, struct sock_key);
} routes SEC(".maps");

/* Indexed by enum stress_stat (sockmap_stress.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static void count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		__sync_fetch_and_add(v, n);
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
	int ret;

	own.sip = msg->local_ip4;
	own.dip = msg->remote_ip4;
	own.sport = msg->local_port;
	own.dport = bpf_ntohl(msg->remote_port);
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
	/* SK_DROP: the target is not in the map (a race with its close):
	 * sendmsg() fails with EACCES.
	 */
	count(ret == SK_PASS ? 0 : 2, 1);
	count(ret == SK_PASS ? 1 : 3, msg->size);
	return ret;
}

char _license[] SEC("license") = "GPL";
