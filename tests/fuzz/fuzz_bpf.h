/* SPDX-License-Identifier: GPL-2.0 */
/* What the sequence tester (sockmap_fuzz) and its BPF programs
 * (sockmap_fuzz.bpf.c) share: map keys and values.
 */
#ifndef SOCKMAP_FUZZ_BPF_H
#define SOCKMAP_FUZZ_BPF_H

#include <linux/types.h>

/* A socket's ports, from its own point of view (host byte order): the
 * key of its plan.
 */
struct fz_key {
	__u32 lport, rport;
};

enum fz_action { FZ_PASS, FZ_DROP, FZ_REDIR, FZ_NACTIONS };

/* A socket's plan (the plans map), set by the tester. sk_msg: the verdict
 * for every message the socket sends, with bpf_msg_apply_bytes(apply) and
 * bpf_msg_cork_bytes(cork) called first when not 0; FZ_REDIR redirects to
 * the socket under key target of the sockhash, with BPF_F_INGRESS. sk_skb
 * (a receiver in the verdict map): pass its skbs to its own ingress queue,
 * or with skb_redir redirect them there through the verdict map (key
 * self). runs and bytes count the sk_msg program's runs and the message
 * sizes it saw.
 */
struct fz_plan {
	__u32 action, target, apply, cork;
	__u32 skb_redir, self;
	__u64 runs, bytes;
	__u64 skbs, skb_bytes;
};

#endif
