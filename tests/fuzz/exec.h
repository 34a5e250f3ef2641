/* SPDX-License-Identifier: GPL-2.0 */
/* sockmap_fuzz: what exec.c and reads.c share. */
#ifndef SOCKMAP_FUZZ_EXEC_H
#define SOCKMAP_FUZZ_EXEC_H

#include "fuzz.h"

struct world {
	int socks_fd, vsocks_fd, plans_fd, msg_prog;
	int listen_fd, memfd, uids;
	bool attached, pressure_used;
	uint8_t *buf, *buf2;
};

extern struct world w;

const char *errno_name(int err);
void signals_init(void);
void sigio_check(char *res, size_t len);
void op_read(const struct op *o, struct fsock *r, char *res, size_t len);
void op_async(struct fsock *r, bool on, char *res, size_t len);

#endif
