// SPDX-License-Identifier: GPL-2.0
/*
 * sockredir [--pass] CGROUP_DIR
 *
 * Loads sockredir.bpf.c, attaches its sockops program to the cgroup v2
 * directory CGROUP_DIR and its sk_msg program to the sockhash, prints
 * "ready" and then serves its standard input: each line "stats" is answered
 * with one JSON line of the counters so far, summed over CPUs:
 *   {"connected": {"redirected": {"msgs": N, "bytes": N}, "passed": {...}},
 *    "accepted": {...}, "unknown": {...}}
 * At end of input it detaches everything and exits. With --pass the sockets
 * still enter the sockhash but no message is redirected.
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
	bool pass = false;
	char line[64];
	int cg_fd, err;

	if (argc == 3 && !strcmp(argv[1], "--pass")) {
		pass = true;
		argv++;
		argc--;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: sockredir [--pass] CGROUP_DIR\n");
		return 2;
	}
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
	skel->rodata->redirect = !pass;
	err = sockredir_bpf__load(skel);
	if (err) {
		fprintf(stderr, "sockredir: load: %s\n", strerror(-err));
		goto out;
	}
	err = bpf_prog_attach(bpf_program__fd(skel->progs.redirect_to_peer),
			      bpf_map__fd(skel->maps.flows), BPF_SK_MSG_VERDICT, 0);
	if (err) {
		err = -errno;
		fprintf(stderr, "sockredir: attach sk_msg: %s\n", strerror(-err));
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
