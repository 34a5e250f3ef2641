#!/usr/bin/env bash
# Look for kernel splats in logs: splat-scan.sh [-k] LOGFILE...
#   -k  consider only kernel lines, those that start with the printk
#       timestamp "[    1.234567]" (for a console log, where the command's
#       own output is mixed in and must not cause false alarms)
# Exit 0 if clean, 1 if any report was found (the offending lines are
# printed with context), 2 on usage errors. Missing files are skipped.
# KCSAN reports (a kernel built with config/kcsan.config) are sorted by
# scripts/kcsan-report.py instead, with SPLAT_KERNEL naming the guest's
# bzImage: only those in code the series adds or changes count (not with
# -k, where they are the console's copies of what the kernel log holds),
# and the detector's own test suite must have passed.
set -euo pipefail

kernel_only=0
if [ "${1:-}" = -k ]; then kernel_only=1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [-k] LOGFILE..." >&2; exit 2; }

# What the kernel's checkers print (extended regexes, case-sensitive).
# "WARNING:" covers WARN_ON() and lockdep's reports; "BUG:" covers KASAN,
# sleeping-in-atomic, soft lockups and bad page faults; "kernel BUG at" is
# BUG_ON(); "unreferenced object" is a kmemleak report.
patterns=(
	'BUG:' 'kernel BUG at' 'WARNING:' 'KASAN' 'UBSAN'
	'possible recursive locking' 'possible circular locking'
	'inconsistent lock state' 'suspicious RCU usage'
	'rcu.*detected stalls' 'INFO: task .* blocked for more than'
	'unreferenced object' 'Kernel panic' 'Oops' 'general protection fault'
	'refcount_t:' 'list_add corruption' 'list_del corruption' 'ODEBUG:'
	'soft lockup' 'hard LOCKUP' 'ref_tracker: .* has [0-9]+/[0-9]+ users'
)
pattern=$(IFS='|'; echo "${patterns[*]}")
# Known-harmless lines that would otherwise match.
ignore='Spectre V2 : WARNING: Unprivileged eBPF'
# kmemleak reports of objects that the boot CPU allocated in start_kernel()
# (e.g. the initial rootfs's ramfs_fs_info, which the 9p root leaves behind)
# are boot-time noise, not something a test did: counted, not failed.
boot_leak='^ +start_kernel\\+'

found=0
# A KCSAN kernel's logs go to the sorter even without a report: it checks
# that the detector's own test suite ran and passed in that boot.
kcsan_kernel() {
	[ -n "${SPLAT_KERNEL:-}" ] &&
		grep -qsx 'CONFIG_KCSAN=y' "$(dirname "$SPLAT_KERNEL")/../../../.config"
}
if grep -qs 'BUG: KCSAN:' "$@"; then
	ignore+='|BUG: KCSAN:'
	if [ "$kernel_only" = 0 ] && [ -z "${SPLAT_KERNEL:-}" ]; then
		echo "KCSAN reports, and no SPLAT_KERNEL to sort them by"
		found=1
	fi
fi
if [ "$kernel_only" = 0 ] && kcsan_kernel; then
	"$(dirname "$0")/kcsan-report.py" "$SPLAT_KERNEL" "$@" || found=1
fi
for f in "$@"; do
	[ -f "$f" ] || continue
	# Print each hit with 3 lines before and 30 after (a stack trace),
	# merging overlapping windows; cap the output per file.
	awk -v pat="$pattern" -v ign="$ignore" -v boot="$boot_leak" -v konly=$kernel_only -v file="$f" '
		{ sub(/\r$/, ""); line[NR] = $0 }
		(!konly || $0 ~ /^\[ *[0-9]+\.[0-9]+\]/) && $0 ~ pat && !($0 ~ ign) { cand[++m] = NR }
		END {
			for (i = 1; i <= m; i++) {
				h = cand[i]
				if (line[h] ~ /unreferenced object/) {
					# The record runs to the next one or a non-indented line.
					for (l = h + 1; l <= NR && line[l] ~ /^ /; l++)
						if (line[l] ~ boot) break
					if (l <= NR && line[l] ~ boot) { skipped++; continue }
				}
				hit[++n] = h; ishit[h] = 1
			}
			if (skipped) printf "%s: ignored %d boot-time kmemleak report(s) (from start_kernel)\n", file, skipped
			if (!n) exit 0
			printf "=== %s: %d kernel report line(s) ===\n", file, n
			last = 0; out = 0
			for (i = 1; i <= n && out < 400; i++) {
				from = hit[i] - 3; if (from <= last) from = last + 1; if (from < 1) from = 1
				to = hit[i] + 30; if (to > NR) to = NR
				if (from > last + 1 && last) print "--"
				for (l = from; l <= to; l++) { print (l in ishit ? ">> " : "   ") line[l]; out++ }
				if (to > last) last = to
			}
			if (out >= 400) print "... (more in " file ")"
			exit 1
		}' "$f" || found=1
done
exit $found
