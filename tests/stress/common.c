// SPDX-License-Identifier: GPL-2.0
/* Output (progress lines, failures, check results), the random numbers,
 * and reading and writing cgroup, proc and sysfs files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "stress.h"

/* ---- results and reporting ---- */

atomic_bool failed, stop_writers;
int units[3]; /* passed, failed, skipped */

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

double t0;

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	printf("[%8.3f] %s%s\n", now() - t0, prefix, line);
	fflush(stdout);
}

void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/* A failure of the data path: reported, and the run ends. */
void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("FAIL: ", fmt, ap);
	va_end(ap);
	atomic_store(&failed, true);
	atomic_store(&stop_writers, true);
}

void unit(const char *name, int result /* 0 OK, 1 FAIL, 2 SKIP */, const char *fmt, ...)
{
	static const char *const word[] = { "OK", "FAIL", "SKIP" };
	char detail[512] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	units[result]++;
	printf("stress: %s: %s%s%s\n", name, word[result], *detail ? "  # " : "", detail);
	fflush(stdout);
}

void die(const char *what)
{
	fprintf(stderr, "sockmap_stress: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- random numbers (xorshift64*), one state per thread ---- */

uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

uint64_t rnd_seed(uint64_t a, uint64_t b)
{
	return mix(mix(opt.seed ^ a) + b) | 1;
}

bool one_in(uint64_t *s, unsigned int n)
{
	return rnd(s) % n == 0;
}

/* 1 .. 2^(bits - 1), log-uniform: as many tiny ones as huge ones. */
size_t rnd_upto(uint64_t *s, unsigned int bits)
{
	bits = rnd(s) % bits;
	return 1 + rnd(s) % (1u << bits);
}

/* 1 .. MAX_WRITE */
size_t rnd_size(uint64_t *s)
{
	return rnd_upto(s, 19);
}

/* ---- cgroup files ---- */

/* Write to a cgroup (or proc, sysfs) file: 0, or -1 with errno. */
int write_file(const char *path, const char *fmt, ...)
{
	int fd = open(path, O_WRONLY), ret;
	va_list ap;

	if (fd < 0)
		return -1;
	va_start(ap, fmt);
	ret = vdprintf(fd, fmt, ap) < 0 ? -1 : 0;
	va_end(ap);
	if (close(fd))
		ret = -1;
	return ret;
}

/* The number after @key (the first number if @key is NULL) in @path, or
 * -1.
 */
long long read_figure(const char *path, const char *key)
{
	long long v = -1;
	char line[256];
	size_t len = key ? strlen(key) : 0;
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f)) {
		if (!key) {
			sscanf(line, "%lld", &v);
			break;
		}
		if (!strncmp(line, key, len) && line[len] == ' ') {
			sscanf(line + len, "%lld", &v);
			break;
		}
	}
	if (f)
		fclose(f);
	return v;
}
