// SPDX-License-Identifier: GPL-2.0
/* BPF side of the sockmap sequence tester (sockmap_fuzz.c).
 *
 * socks: the sockhash the tester puts sockets in itself, keyed by their
 * slot; its sk_msg program (fz_msg) does what the sending socket's plan
 * says: pass, drop, or redirect with BPF_F_INGRESS to the socket of
 * another slot (the peer, another connection's socket, itself), after
 * bpf_msg_apply_bytes() and bpf_msg_cork_bytes() with the plan's values.
 * A redirect to a slot that is not in socks is a drop (the kernel's).
 * vsocks: the verdict map, keyed by slot, with an sk_skb stream_verdict
 * program (fz_skb) that passes what arrives over TCP to the receiver's own
 * ingress queue, or redirects it there through vsocks.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fuzz_bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} vsocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct fz_key);
	__type(value, struct fz_plan);
} plans SEC(".maps");

SEC("sk_msg")
int fz_msg(struct sk_msg_md *msg)
{
	struct fz_key key = { msg->local_port, bpf_ntohl(msg->remote_port) };
	struct fz_plan *p = bpf_map_lookup_elem(&plans, &key);
	__u32 target;

	if (!p)
		return SK_PASS;
	/* Runs under the sending socket's lock: one run a socket at a time. */
	p->runs++;
	p->bytes += msg->size;
	if (p->apply)
		bpf_msg_apply_bytes(msg, p->apply);
	if (p->cork)
		bpf_msg_cork_bytes(msg, p->cork);
	switch (p->action) {
	case FZ_PASS:
		return SK_PASS;
	case FZ_REDIR:
		target = p->target;
		return bpf_msg_redirect_hash(msg, &socks, &target, BPF_F_INGRESS);
	default:
		return SK_DROP;
	}
}

SEC("sk_skb/stream_verdict")
int fz_skb(struct __sk_buff *skb)
{
	struct fz_key key = { skb->local_port, bpf_ntohl(skb->remote_port) };
	struct fz_plan *p = bpf_map_lookup_elem(&plans, &key);
	__u32 self;

	if (!p)
		return SK_PASS;
	__sync_fetch_and_add(&p->skbs, 1);
	__sync_fetch_and_add(&p->skb_bytes, skb->len);
	if (p->skb_redir) {
		self = p->self;
		/* Gone from vsocks (a race with its deletion): pass. */
		if (bpf_sk_redirect_hash(skb, &vsocks, &self, BPF_F_INGRESS) == SK_PASS)
			return SK_PASS;
	}
	return SK_PASS;
}

char _license[] SEC("license") = "GPL";
