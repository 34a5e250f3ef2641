/* SPDX-License-Identifier: GPL-2.0 */
/* Shared by sockredir.bpf.c and its loader, sockredir.c. */
#ifndef SOCKREDIR_H
#define SOCKREDIR_H

/* A TCP socket's 4-tuple as it sees it; addresses in network byte order,
 * ports in host byte order. */
struct flow_key {
	__u32 local_ip4;
	__u32 remote_ip4;
	__u32 local_port;
	__u32 remote_port;
};

enum role { ROLE_CONNECTED, ROLE_ACCEPTED, ROLE_UNKNOWN, NR_ROLES };
enum outcome { OUTCOME_REDIRECTED, OUTCOME_PASSED, NR_OUTCOMES };

/* Messages the sk_msg program saw, and their bytes (msg->size); or the skbs
 * the sk_skb verdict saw, and theirs (skb->len). */
struct counter {
	__u64 msgs;
	__u64 bytes;
};

#endif
