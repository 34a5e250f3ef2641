#!/bin/sh
# PID 1 of a scripts/vm-run.sh guest (POSIX sh: it runs with the host's
# /bin/sh). The root file system is the host's /, read-only over 9p.
# RESULTS (the host's results directory) comes from the kernel command line,
# which passes unknown NAME=VALUE words to init as environment variables.
# Runs the command in $RESULTS/cmd, writes its status to $RESULTS/exit-status,
# saves the kmemleak report and the kernel log there, and powers off.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HOME=/tmp
export PATH HOME RESULTS
umask 022

say() { read -r t _ </proc/uptime; printf "vm-init [%s]: %s\n" "$t" "$*"; }
# mount that only warns: most of these are optional for most commands.
try_mount() { mount "$@" || say "warning: 'mount $*' failed"; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
# CONFIG_DEVTMPFS_MOUNT is off, and the host's /dev seen over 9p is no use.
mount -t devtmpfs devtmpfs /dev
# The kernel opened the console on the host's /dev/console over 9p: use ours.
exec </dev/console >/dev/console 2>&1
say "started"

mkdir -p /dev/shm /dev/pts
try_mount -t tmpfs -o mode=1777 tmpfs /dev/shm
try_mount -t devpts -o mode=620,ptmxmode=666 devpts /dev/pts
for d in /tmp /var/tmp; do try_mount -t tmpfs -o mode=1777 tmpfs "$d"; done
try_mount -t tmpfs -o mode=755 tmpfs /run
# No tmpfs on /mnt: test_progs mounts cgroup2 there itself.
try_mount -t cgroup2 cgroup2 /sys/fs/cgroup
try_mount -t bpf bpf /sys/fs/bpf
try_mount -t debugfs debugfs /sys/kernel/debug
[ -d /sys/kernel/tracing ] && try_mount -t tracefs tracefs /sys/kernel/tracing

say "$(nproc) CPUs online;" \
	"clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"

power_off() {
	sync
	# No CONFIG_MAGIC_SYSRQ: use the reboot syscall. qemu runs with
	# -no-reboot, so a reboot ends it too; if all fails, PID 1 exiting
	# panics the kernel, and panic=-1 reboots.
	busybox poweroff -f
	busybox reboot -f
	exit 1
}

# The results share goes over the read-only view of the same path, so that
# paths are the same inside and outside (a path under one of the tmpfs
# above, e.g. /tmp/x, gets its mount point made there).
[ -z "${RESULTS:-}" ] || [ -d "$RESULTS" ] || mkdir -p "$RESULTS"
if [ -z "${RESULTS:-}" ] ||
	! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results "$RESULTS"; then
	say "error: cannot mount the results share on '${RESULTS:-}'"
	power_off
fi

if command -v ip >/dev/null; then ip link set lo up; else busybox ip link set lo up; fi ||
	say "warning: cannot bring up lo"
# shellcheck disable=SC3045 # not POSIX, but dash has them
ulimit -l unlimited 2>/dev/null
# shellcheck disable=SC3045
ulimit -n 65536 2>/dev/null

say "running $(tail -n 1 "$RESULTS/cmd")"

# The command runs in its own sh; cmd does the cd, the exports and the exec.
sh "$RESULTS/cmd" </dev/null
status=$?
echo "$status" >"$RESULTS/exit-status"
say "command exited with status $status"

# kmemleak ignores objects younger than 5 s; scan twice (as syzkaller does)
# so that pointers in flight during the first scan do not count.
leak=/sys/kernel/debug/kmemleak
if [ -e "$leak" ]; then
	say "kmemleak: scanning"
	sleep 6
	echo scan >"$leak" && sleep 2 && echo scan >"$leak" &&
		tee -a "$RESULTS/kmemleak.txt" <"$leak"
	say "kmemleak: done"
fi

dmesg >"$RESULTS/dmesg.txt"
say "powering off"
power_off
