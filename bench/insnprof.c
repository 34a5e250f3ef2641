// SPDX-License-Identifier: GPL-2.0
/*
 * insnprof: a QEMU TCG plugin that counts the instructions the guest
 * executes, by the address of the translation block they start at, between
 * marks. A mark is an execution of the guest address given as mark=ADDR
 * (the entry of a system call that the guest makes on purpose, see
 * guest/bench.py): at each mark the counts since the previous one are
 * appended to out=FILE as a window and set to zero.
 *
 *   qemu-system-x86_64 ... -plugin insnprof.so,mark=0xffffffff81234560,out=F
 *
 * Output: "window N" and then one line a block address, "ADDR INSNS
 * EXECS" (instructions, and how often a block starting there ran), for
 * every address that ran in the window. All of user space counts at
 * address 1: its blocks are at new addresses in every process (hundreds of
 * thousands a benchmark), and scripts/insnprof.py names it as one line.
 * Counting is inline in the translated code and not atomic: for -accel
 * tcg,thread=single (-icount), where one host thread runs every vCPU.
 * scripts/insnprof.py maps the addresses to the kernel's symbols.
 *
 * QEMU ships the plugin API as a header only in its sources; the few
 * declarations used here are those of its plugin API version 1 (QEMU 7.2).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  void (*cb)(unsigned int vcpu, void *udata),
					  enum qemu_plugin_cb_flags flags, void *udata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *),
				    void *udata);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define SLOTS	(1u << 20)	/* distinct block addresses; a power of two */
#define USER	1		/* the address all of user space counts at */

static struct slot {
	uint64_t addr;
	uint64_t insns;
	uint64_t execs;
} slots[SLOTS];
static uint64_t mark;
static unsigned int window, used;
static FILE *out;

static struct slot *slot_of(uint64_t addr)
{
	uint64_t h = (addr * 0x9e3779b97f4a7c15ULL) >> 44;

	for (;; h = (h + 1) & (SLOTS - 1)) {
		if (slots[h].addr == addr)
			return &slots[h];
		if (!slots[h].addr) {
			if (++used > SLOTS / 2) {
				fprintf(stderr, "insnprof: more than %u block addresses\n",
					SLOTS / 2);
				abort();
			}
			slots[h].addr = addr;
			return &slots[h];
		}
	}
}

static void dump(void)
{
	unsigned int i;

	fprintf(out, "window %u\n", window++);
	for (i = 0; i < SLOTS; i++)
		if (slots[i].execs) {
			fprintf(out, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", slots[i].addr,
				slots[i].insns, slots[i].execs);
			slots[i].insns = slots[i].execs = 0;
		}
	fflush(out);
}

static void on_mark(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	(void)udata;
	dump();
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t addr = qemu_plugin_tb_vaddr(tb);
	struct slot *slot = slot_of(addr >> 63 ? addr : USER);

	(void)id;
	if (addr == mark)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &slot->insns,
						 qemu_plugin_tb_n_insns(tb));
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &slot->execs, 1);
}

static void on_qemu_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	fclose(out);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv)
{
	const char *path = NULL;
	int i;

	(void)info;
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "mark=", 5))
			mark = strtoull(argv[i] + 5, NULL, 0);
		else if (!strncmp(argv[i], "out=", 4))
			path = argv[i] + 4;
	}
	if (!mark || !path) {
		fprintf(stderr, "insnprof: wants mark=ADDR,out=FILE\n");
		return -1;
	}
	out = fopen(path, "w");
	if (!out) {
		perror(path);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
	return 0;
}
