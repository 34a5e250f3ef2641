// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap_fuzz: a deterministic random sequence tester for sk_msg
 * redirection to ingress. Runs as root (in a guest of scripts/vm-run.sh,
 * see scripts/fuzz.sh; on any host that allows BPF too).
 *
 * A seed makes a list of operations (ops.c) over two to four connected
 * loopback TCP pairs that the tester puts in a sockhash itself: sends of
 * every kind, socket options, reads of every style, shutdowns, closes, map
 * deletions and insertions, plan changes for the sk_msg program (pass,
 * drop, redirect to any socket's ingress, apply and cork bytes), program
 * detach and attach, an sk_skb verdict on some receivers, TCP memory
 * pressure. Single-threaded, it runs them in order (exec.c, reads.c), and
 * an oracle (sim.c, model.c) says for every read what it may return. A
 * sequence ends with a drain (every socket shut down and read to EOF:
 * nothing may be missing) and a look at the kernel log: any splat fails
 * it. Each operation's outcome is one line of the trace (--trace), the
 * same on every kernel where both behave alike; scripts/fuzz-diff.py
 * compares two kernels' traces.
 *
 * A failing seed replays; --reduce drops operations (delta debugging,
 * re-running in the same process) to a short list, written as a file that
 * --ops replays. --regressions DIR runs every list kept there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/stat.h>
#include "fuzz.h"

/* Seeds a run takes with --seed, and names in its "fuzz seeds:" line. */
#define MAX_SEEDS	4096

uint64_t run_seed;
uint64_t op_seq;
int trace_verbose;

static struct {
	uint64_t seeds[MAX_SEEDS];
	int nseeds, random_seeds, nops, duration, reduce_time;
	bool reduce, splat_scan;
	const char *trace, *trace_dir, *ops, *regressions, *bpf_obj, *reduce_out;
} opt = { .nops = 200, .reduce_time = 600, .splat_scan = true };

static FILE *trace_f;
static char fail_kind[32], fail_msg[1024];
static int unsure, lates, knowns;
static int kmsg_fd = -1;

uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

void trace(const char *fmt, ...)
{
	va_list ap;

	if (trace_f) {
		va_start(ap, fmt);
		vfprintf(trace_f, fmt, ap);
		va_end(ap);
	}
	if (trace_verbose && !trace_f) {
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
}

void fail(const char *kind, const char *fmt, ...)
{
	va_list ap;

	if (*fail_kind)
		return;
	snprintf(fail_kind, sizeof(fail_kind), "%s", kind);
	va_start(ap, fmt);
	vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	trace("FAIL %s: %s\n", fail_kind, fail_msg);
}

bool failed(void)
{
	return *fail_kind;
}

void note_unsure(const char *what)
{
	unsure++;
	trace("  unsure: %s\n", what);
}

int unsure_count(void)
{
	return unsure;
}

void note_late(int slot, const char *what, double ms)
{
	lates++;
	trace("  late: slot %d: %s readable after %.0f ms\n", slot, what, ms);
}

void note_known(const char *id, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	knowns++;
	trace("  known: %s: %s\n", id, what);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- the kernel log ---- */

static const char *const splat_words[] = {
	"BUG:", "kernel BUG at", "WARNING:", "KASAN", "UBSAN", "possible recursive locking",
	"possible circular locking", "inconsistent lock state", "suspicious RCU usage",
	"detected stalls", "blocked for more than", "Kernel panic", "Oops",
	"general protection fault", "refcount_t:", "list_add corruption", "list_del corruption",
	"ODEBUG:", "soft lockup", "hard LOCKUP",
};

static void kmsg_open(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
}

/* New kernel log records since the last look: a splat fails the run. */
static void kmsg_scan(void)
{
	char rec[8192], *m;
	ssize_t n;
	size_t i;

	while (kmsg_fd >= 0) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records */
		if (n <= 0)
			break;
		rec[n] = 0;
		m = strchr(rec, ';');
		m = m ? m + 1 : rec;
		*strchrnul(m, '\n') = 0;
		if (strstr(m, "Spectre V2 : WARNING"))
			continue;
		for (i = 0; i < sizeof(splat_words) / sizeof(*splat_words); i++)
			if (strstr(m, splat_words[i]))
				fail("splat", "kernel log: %s", m);
	}
}

/* ---- one sequence ---- */

struct outcome {
	char kind[32];
	int ran, skipped, fail_at;
	uint64_t verified;
	double secs;
};

static void run_list(const struct oplist *l, struct outcome *out)
{
	char res[256], text[256];
	double t0 = now_s();
	int i;

	*fail_kind = 0;
	memset(out, 0, sizeof(*out));
	out->fail_at = -1;
	world_begin();
	for (i = 0; i < l->n && !failed(); i++) {
		op_seq = i + 1;
		*res = 0;
		exec_op(&l->v[i], res, sizeof(res));
		op_format(&l->v[i], text, sizeof(text));
		*strstr(text, "  #") = 0;
		trace("%4d %-34s => %s\n", i, text, res);
		if (!strncmp(res, "skip:", 5))
			out->skipped++;
		else
			out->ran++;
		if (failed())
			out->fail_at = i;
	}
	if (!failed()) {
		op_seq = l->n + 1;
		exec_drain();
		trace("drain => %s\n", failed() ? "FAIL" : "ok");
		if (failed())
			out->fail_at = l->n;
	}
	out->verified = model_verified();
	world_end();
	if (opt.splat_scan) {
		/* Let deferred work (psock teardown, RCU) say its part. */
		usleep(200 * 1000);
		kmsg_scan();
		if (failed() && !strcmp(fail_kind, "splat") && out->fail_at < 0)
			out->fail_at = l->n;
	}
	snprintf(out->kind, sizeof(out->kind), "%s", fail_kind);
	out->secs = now_s() - t0;
}

/* ---- reduction ---- */

static bool still_fails(const struct oplist *l, const char *kind)
{
	struct outcome o;
	FILE *saved = trace_f;

	trace_f = NULL;
	run_list(l, &o);
	trace_f = saved;
	return !strcmp(o.kind, kind);
}

/* Delta debugging over the operations (the first, pairs, stays). */
static void reduce(struct oplist *l, const char *kind, int fail_at)
{
	double until = now_s() + opt.reduce_time;
	struct oplist t = { 0 };
	int chunks = 2, i, c, tries = 0;

	if (fail_at >= 0 && fail_at + 1 < l->n)
		l->n = fail_at + 1;
	while (l->n > 2 && now_s() < until) {
		int body = l->n - 1, size = (body + chunks - 1) / chunks;
		bool cut = false;

		for (c = 0; c < chunks && now_s() < until; c++) {
			int from = 1 + c * size, to = from + size;

			t.n = 0;
			for (i = 0; i < l->n; i++)
				if (i < from || i >= to)
					ops_push(&t, l->v[i]);
			if (t.n == l->n)
				continue;
			tries++;
			if (still_fails(&t, kind)) {
				l->n = 0;
				for (i = 0; i < t.n; i++)
					ops_push(l, t.v[i]);
				chunks = chunks > 2 ? chunks - 1 : 2;
				cut = true;
				break;
			}
		}
		if (!cut) {
			if (chunks >= body)
				break;
			chunks = chunks * 2 < body ? chunks * 2 : body;
		}
	}
	printf("fuzz reduce: %d operations after %d tries (%s)\n", l->n, tries,
	       now_s() < until ? "minimal" : "time is up");
	free(t.v);
}

static void write_reduced(const struct oplist *l, const char *label, const char *kind)
{
	char path[512], header[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.ops", opt.reduce_out ? opt.reduce_out : ".", label);
	snprintf(header, sizeof(header),
		 "# sockmap_fuzz: %s, reduced; fails with '%s'\n# replay: sockmap_fuzz --ops %s\n",
		 label, kind, path);
	f = fopen(path, "w");
	if (f) {
		ops_write(f, l, header);
		fclose(f);
	}
	ops_write(stdout, l, header);
}

/* ---- seeds, lists, the summary ---- */

static struct {
	int seqs, failed, ops;
	uint64_t verified;
	double secs;
	char first[1200];
} tot;

static void trace_open(const char *label)
{
	char path[512];

	if (opt.trace_dir) {
		snprintf(path, sizeof(path), "%s/%s.trace", opt.trace_dir, label);
		trace_f = fopen(path, "w");
	} else if (opt.trace && !trace_f) {
		trace_f = fopen(opt.trace, "w");
	}
	trace("=== %s\n", label);
}

/* With --trace-dir, the trace of a failed sequence is kept as
 * failed-LABEL.trace too: a seed run again (to catch one that fails at
 * times) writes LABEL.trace anew.
 */
static void trace_close(const char *label, bool failed)
{
	char path[512], kept[512], buf[8192];
	FILE *in, *out;
	size_t n;

	if (trace_f && opt.trace_dir) {
		fclose(trace_f);
		trace_f = NULL;
	} else if (trace_f) {
		fflush(trace_f);
	}
	if (!failed || !opt.trace_dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.trace", opt.trace_dir, label);
	snprintf(kept, sizeof(kept), "%s/failed-%s.trace", opt.trace_dir, label);
	in = fopen(path, "r");
	out = in ? fopen(kept, "w") : NULL;
	while (out && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	if (out)
		fclose(out);
	if (in)
		fclose(in);
}

/* Run one list; 0 if it passed. */
static int run_one(struct oplist *l, const char *label)
{
	struct outcome o;
	int unsure0 = unsure, late0 = lates, known0 = knowns;

	trace_open(label);
	run_list(l, &o);
	trace("=== %s: %s%s%s\n", label, *o.kind ? "FAIL " : "OK", o.kind,
	      *o.kind ? "" : "");
	trace_close(label, *o.kind);
	tot.seqs++;
	tot.ops += o.ran;
	tot.verified += o.verified;
	tot.secs += o.secs;
	printf("fuzz %s: %s%s  # %d ops run, %d skipped, %llu bytes verified, %d unsure, %d late, "
	       "%d known, %.1f s (%.1f ops/s)\n", label, *o.kind ? "FAIL " : "OK", o.kind, o.ran,
	       o.skipped, (unsigned long long)o.verified, unsure - unsure0, lates - late0,
	       knowns - known0, o.secs,
	       o.secs > 0 ? o.ran / o.secs : 0);
	if (!*o.kind) {
		fflush(stdout);
		return 0;
	}
	printf("fuzz %s: at operation %d: %s: %s\n", label, o.fail_at, o.kind, fail_msg);
	if (!tot.failed++)
		snprintf(tot.first, sizeof(tot.first), "%s at op %d: %s: %s", label, o.fail_at,
			 o.kind, fail_msg);
	fflush(stdout);
	if (opt.reduce) {
		char kind[32];

		snprintf(kind, sizeof(kind), "%s", o.kind);
		reduce(l, kind, o.fail_at);
		write_reduced(l, label, kind);
	}
	return 1;
}

static void run_one_seed(uint64_t seed)
{
	struct oplist l = { 0 };
	char label[64];

	run_seed = seed;
	ops_generate(seed, opt.nops, &l);
	snprintf(label, sizeof(label), "seed-%llu", (unsigned long long)seed);
	run_one(&l, label);
	free(l.v);
}

static int run_file(const char *path)
{
	struct oplist l = { 0 };
	char label[256];
	const char *base = strrchr(path, '/');
	int rc;

	if (ops_read(path, &l)) {
		fprintf(stderr, "sockmap_fuzz: %s: not an operation list\n", path);
		tot.failed++;
		return 1;
	}
	run_seed = 1;
	snprintf(label, sizeof(label), "%s", base ? base + 1 : path);
	if (strstr(label, ".ops"))
		*strstr(label, ".ops") = 0;
	rc = run_one(&l, label);
	free(l.v);
	return rc;
}

static int run_regressions(const char *dir)
{
	struct dirent **ents;
	char path[1024];
	int n, i, count = 0;

	n = scandir(dir, &ents, NULL, alphasort);
	for (i = 0; i < n; i++) {
		size_t len = strlen(ents[i]->d_name);

		if (len > 4 && !strcmp(ents[i]->d_name + len - 4, ".ops")) {
			snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
			run_file(path);
			count++;
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	return count;
}

static void usage(int status)
{
	printf("usage: sockmap_fuzz [--seed S]... [--seeds N] [--duration SECS] [--ops FILE]\n"
	       "                    [--regressions DIR] [--nops N] [--trace FILE | --trace-dir DIR]\n"
	       "                    [--reduce [--reduce-time SECS] [--reduce-out DIR]]\n"
	       "                    [--bpf-obj FILE] [--no-splat-scan] [--list] [-v]\n"
	       "Runs the operation list of each seed (or of FILE) and checks every outcome;\n"
	       "see docs/fuzz.md. Exit status 0 if every sequence passed.\n");
	exit(status);
}

static void parse_args(int argc, char **argv, bool *list)
{
	static const struct option lo[] = {
		{ "seed", 1, 0, 's' }, { "seeds", 1, 0, 'n' }, { "duration", 1, 0, 'd' },
		{ "ops", 1, 0, 'o' }, { "regressions", 1, 0, 'R' }, { "nops", 1, 0, 'N' },
		{ "trace", 1, 0, 't' }, { "trace-dir", 1, 0, 'T' }, { "reduce", 0, 0, 'r' },
		{ "reduce-time", 1, 0, 'x' }, { "reduce-out", 1, 0, 'O' }, { "bpf-obj", 1, 0, 'b' },
		{ "no-splat-scan", 0, 0, 'S' }, { "list", 0, 0, 'l' }, { "help", 0, 0, 'h' },
		{ 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			if (opt.nseeds < MAX_SEEDS)
				opt.seeds[opt.nseeds++] = strtoull(optarg, NULL, 0);
			break;
		case 'n': opt.random_seeds = atoi(optarg); break;
		case 'd': opt.duration = atoi(optarg); break;
		case 'o': opt.ops = optarg; break;
		case 'R': opt.regressions = optarg; break;
		case 'N': opt.nops = atoi(optarg); break;
		case 't': opt.trace = optarg; break;
		case 'T': opt.trace_dir = optarg; break;
		case 'r': opt.reduce = true; break;
		case 'x': opt.reduce_time = atoi(optarg); break;
		case 'O': opt.reduce_out = optarg; break;
		case 'b': opt.bpf_obj = optarg; break;
		case 'S': opt.splat_scan = false; break;
		case 'l': *list = true; break;
		case 'v': trace_verbose++; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind < argc)
		usage(2);
}

static const char *default_obj(const char *argv0)
{
	static char path[4096];
	const char *slash = strrchr(argv0, '/');

	snprintf(path, sizeof(path), "%.*ssockmap_fuzz.bpf.o", slash ? (int)(slash - argv0 + 1) : 0,
		 argv0);
	return path;
}

static void on_exit_signal(int sig)
{
	pressure_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	double t0 = now_s();
	bool list = false;
	int i, regs = 0, random_done = 0;
	static char seeds[MAX_SEEDS * 21];
	size_t off = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv, &list);
	if (list) {
		struct oplist l = { 0 };

		for (i = 0; i < opt.nseeds; i++) {
			ops_generate(opt.seeds[i], opt.nops, &l);
			ops_write(stdout, &l, NULL);
		}
		return 0;
	}
	if (!opt.nseeds && !opt.random_seeds && !opt.duration && !opt.ops && !opt.regressions)
		opt.random_seeds = 1;
	if (opt.trace_dir)
		mkdir(opt.trace_dir, 0755);
	if (world_init(opt.bpf_obj ? opt.bpf_obj : default_obj(argv[0])))
		return 2;
	signal(SIGINT, on_exit_signal);
	signal(SIGTERM, on_exit_signal);
	atexit(pressure_restore);
	kmsg_open();
	if (opt.regressions)
		regs = run_regressions(opt.regressions);
	if (opt.ops)
		run_file(opt.ops);
	for (i = 0; i < opt.nseeds; i++) {
		run_one_seed(opt.seeds[i]);
		off += snprintf(seeds + off, sizeof(seeds) - off, " %llu",
				(unsigned long long)opt.seeds[i]);
	}
	srand(time(NULL) ^ getpid());
	while ((opt.random_seeds && random_done < opt.random_seeds) ||
	       (opt.duration && now_s() - t0 < opt.duration)) {
		uint64_t s = ((uint64_t)rand() << 31 ^ rand()) % 1000000000ULL;

		run_one_seed(s);
		random_done++;
		if (off < sizeof(seeds) - 24)
			off += snprintf(seeds + off, sizeof(seeds) - off, " %llu", (unsigned long long)s);
	}
	printf("fuzz seeds:%s\n", seeds);
	printf("fuzz: sequences: %s  # %d sequences (%d seeds, %d regression lists), %d ops in %.0f s "
	       "(%.1f ops/s), %llu bytes verified, %d unsure, %d late, %d known%s%s\n",
	       tot.failed ? "FAIL" : "OK", tot.seqs, opt.nseeds + random_done, regs, tot.ops,
	       tot.secs, tot.secs > 0 ? tot.ops / tot.secs : 0, (unsigned long long)tot.verified,
	       unsure, lates, knowns, tot.failed ? "; first: " : "", tot.first);
	return tot.failed ? 1 : 0;
}
