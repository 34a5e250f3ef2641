// SPDX-License-Identifier: GPL-2.0
/*
 * sockredir [--pass | --no-msg | --skb] CGROUP_DIR
 *
 * Loads sockredir.bpf.c, attaches its sockops program to the cgroup v2
 * directory CGROUP_DIR and its sk_msg program (or, as the options below
 * say, none, or its sk_skb verdict) to the sockhash, prints "ready" and
 * then serves its standard input: each line "stats" is answered
 * with one JSON line of the counters so far, summed over CPUs:
 *   {"connected": {"redirected": {"msgs": N, "bytes": N}, "passed": {...}},
 *    "accepted": {...}, "unknown": {...}}
 * and each line "sockets" with the sockets put into the sockhash so far:
 *   {"inserted": N}
 * At end of input it detaches everything and exits. The sockets always
 * enter the sockhash; what runs on their data:
 *   (none)    the sk_msg program redirects every message to the peer's ingress
 *   --pass    the sk_msg program passes every message on to TCP
 *   --no-msg  nothing: no sk_msg program attached, nothing counted
 *   --skb     no sk_msg program; an sk_skb stream verdict passes every skb
 *             the sockets receive, its bytes counted as "passed" ("unknown")
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sockredir.h"
#include "sockredir.skel.h"

static const char *const role_names[NR_ROLES] = { "connected", "accepted", "unknown" };
static const char *const outcome_names[NR_OUTCOMES] = { "redirected", "passed" };

/* What runs on the data of the sockets in the sockhash (see above). */
enum shape { REDIRECT, PASS, NO_MSG, SKB, NR_SHAPES };
static const char *const shape_flags[NR_SHAPES] = {
	[PASS] = "--pass", [NO_MSG] = "--no-msg", [SKB] = "--skb",
};

static int print_stats(int map_fd)
{
	int ncpus = libbpf_num_possible_cpus();
	struct counter *percpu;
	__u32 role, outcome, idx;
	int cpu;

	if (ncpus < 0)
		return ncpus;
	percpu = calloc(ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	printf("{");
	for (role = 0; role < NR_ROLES; role++) {
		printf("%s\"%s\": {", role ? ", " : "", role_names[role]);
		for (outcome = 0; outcome < NR_OUTCOMES; outcome++) {
			struct counter sum = {};

			idx = role * NR_OUTCOMES + outcome;
			if (bpf_map_lookup_elem(map_fd, &idx, percpu)) {
				free(percpu);
				return -errno;
			}
			for (cpu = 0; cpu < ncpus; cpu++) {
				sum.msgs += percpu[cpu].msgs;
				sum.bytes += percpu[cpu].bytes;
			}
			printf("%s\"%s\": {\"msgs\": %llu, \"bytes\": %llu}", outcome ? ", " : "",
			       outcome_names[outcome], (unsigned long long)sum.msgs,
			       (unsigned long long)sum.bytes);
		}
		printf("}");
	}
	printf("}\n");
	fflush(stdout);
	free(percpu);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockredir_bpf *skel;
	struct bpf_link *link = NULL;
	enum shape shape = REDIRECT;
	bool msg;
	char line[64];
	int cg_fd, err;

	if (argc == 3) {
		for (shape = PASS; shape < NR_SHAPES; shape++)
			if (!strcmp(argv[1], shape_flags[shape]))
				break;
		argv++;
		argc--;
	}
	if (argc != 2 || shape == NR_SHAPES) {
		fprintf(stderr, "usage: sockredir [--pass | --no-msg | --skb] CGROUP_DIR\n");
		return 2;
	}
	msg = shape == REDIRECT || shape == PASS;
	cg_fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (cg_fd < 0) {
		fprintf(stderr, "sockredir: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	skel = sockredir_bpf__open();
	if (!skel) {
		fprintf(stderr, "sockredir: cannot open the BPF object\n");
		return 1;
	}
	skel->rodata->redirect = shape == REDIRECT;
	/* Only the programs attached are loaded. */
	bpf_program__set_autoload(skel->progs.redirect_to_peer, msg);
	bpf_program__set_autoload(skel->progs.pass_skb, shape == SKB);
	err = sockredir_bpf__load(skel);
	if (err) {
		fprintf(stderr, "sockredir: load: %s\n", strerror(-err));
		goto out;
	}
	if (msg && bpf_prog_attach(bpf_program__fd(skel->progs.redirect_to_peer),
				   bpf_map__fd(skel->maps.flows), BPF_SK_MSG_VERDICT, 0)) {
		err = -errno;
		fprintf(stderr, "sockredir: attach sk_msg: %s\n", strerror(-err));
		goto out;
	}
	if (shape == SKB && bpf_prog_attach(bpf_program__fd(skel->progs.pass_skb),
					    bpf_map__fd(skel->maps.flows),
					    BPF_SK_SKB_STREAM_VERDICT, 0)) {
		err = -errno;
		fprintf(stderr, "sockredir: attach sk_skb: %s\n", strerror(-err));
		goto out;
	}
	link = bpf_program__attach_cgroup(skel->progs.add_established, cg_fd);
	if (!link) {
		err = -errno;
		fprintf(stderr, "sockredir: attach sockops to %s: %s\n", argv[1], strerror(-err));
		goto out;
	}
	printf("ready\n");
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "sockets\n")) {
			printf("{\"inserted\": %llu}\n",
			       (unsigned long long)*(volatile __u64 *)&skel->bss->inserted);
			fflush(stdout);
			continue;
		}
		if (strcmp(line, "stats\n")) {
			fprintf(stderr, "sockredir: unknown command %s", line);
			err = -EINVAL;
			break;
		}
		err = print_stats(bpf_map__fd(skel->maps.counters));
		if (err) {
			fprintf(stderr, "sockredir: reading counters: %s\n", strerror(-err));
			break;
		}
	}
out:
	bpf_link__destroy(link);
	sockredir_bpf__destroy(skel);
	close(cg_fd);
	return err ? 1 : 0;
}
