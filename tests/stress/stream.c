// SPDX-License-Identifier: GPL-2.0
/* Streams: the byte pattern each one carries, made and checked at any
 * offset; a new stream, its progress and its end.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "stress.h"

/* ---- streams and their byte pattern ---- */

uint8_t pattern[65536];

static uint8_t block_mix(const struct stream *st, uint64_t block)
{
	return mix(st->salt ^ block);
}

void gen(const struct stream *st, uint64_t off, uint8_t *buf, size_t len)
{
	while (len) {
		size_t in = off & 0xffff, n = 65536 - in;
		uint8_t x = block_mix(st, off >> 16);
		uint8_t tag = st->tag << 6;

		if (n > len)
			n = len;
		for (size_t i = 0; i < n; i++)
			buf[i] = ((pattern[(in + i + st->salt) & 0xffff] ^ x) & 63) | tag;
		buf += n;
		off += n;
		len -= n;
	}
}

static uint8_t expect(const struct stream *st, uint64_t off)
{
	uint8_t b;

	gen(st, off, &b, 1);
	return b;
}

/* Where in @st do the @len bytes at @got belong, near @off? */
static int64_t locate(const struct stream *st, uint64_t off, const uint8_t *got, size_t len)
{
	uint64_t lo = off > (8u << 20) ? off - (8u << 20) : 0;
	uint64_t hi = atomic_load(&st->written) + MAX_WRITE;

	if (len > 32)
		len = 32;
	if (len < 8)
		return -1;
	for (uint64_t c = lo; c < hi; c++) {
		size_t i = 0;

		while (i < len && expect(st, c + i) == got[i])
			i++;
		if (i == len)
			return c;
	}
	return -1;
}

void mismatch(const struct stream *st, const char *where, uint64_t off,
		     const uint8_t *got, size_t avail)
{
	int64_t at = locate(st, off, got, avail);
	char why[128];

	if (at < 0)
		snprintf(why, sizeof(why), "found nowhere in the stream");
	else if ((uint64_t)at > off)
		snprintf(why, sizeof(why), "the bytes of offset %lld: %llu bytes lost",
			 (long long)at, (unsigned long long)(at - off));
	else
		snprintf(why, sizeof(why), "the bytes of offset %lld: %llu bytes duplicated or reordered",
			 (long long)at, (unsigned long long)(off - at));
	fail("stream %d (%s): byte at offset %llu is 0x%02x, expected 0x%02x: %s (written %llu)",
	     st->id, where, (unsigned long long)off, got[0], expect(st, off), why,
	     (unsigned long long)atomic_load(&st->written));
}

void touch(struct stream *st)
{
	atomic_store(&st->progress, now());
}

void end_stream(struct stream *st, enum stream_end how)
{
	int running = RUNNING;

	if (atomic_compare_exchange_strong(&st->end, &running, how)) {
		atomic_store(&st->ended_at, now());
		touch(st);
	}
}

static atomic_int next_stream_id;

struct stream *new_stream(int tag, bool bounded)
{
	struct stream *st = calloc(1, sizeof(*st));

	st->id = atomic_fetch_add(&next_stream_id, 1);
	st->tag = tag;
	st->salt = rnd_seed(0x57, st->id);
	st->bounded = bounded;
	atomic_store(&st->progress, now());
	count(streams, 1);
	return st;
}
