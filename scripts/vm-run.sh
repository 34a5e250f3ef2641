#!/usr/bin/env bash
# Run a command in a QEMU (TCG) guest whose root file system is the host's
# own /, read-only over virtio-9p, with a writable results directory:
#   vm-run.sh --kernel BZIMAGE [options] -- COMMAND [ARGS...]
# Options:
#   --kernel PATH     bzImage to boot (required)
#   --results DIR     host directory for the results, writable from the
#                     guest at the same path; exported there as $RESULTS
#                     (default: build/vm-results/<timestamp>)
#   --timeout SECS    kill the guest after this long (default 1800)
#   --boot-timeout SECS
#                     kill the guest if its init has not said "started" on
#                     the console after this long (default 600; a debug
#                     kernel boots in 1-3 minutes here): a guest that hangs
#                     while booting fails in minutes, not after --timeout
#   --cpus N          vCPUs (default 2)
#   --mem SIZE        guest memory (default 4G)
#   --append "ARGS"   extra kernel command line
#   --splat-ok        report a kernel splat but do not fail for it (the
#                     unpatched kernel in the benchmark: its own bugs are
#                     not what is measured there)
#   --icount          count instructions instead of time: one host thread runs
#                     the vCPUs in turn and guest time advances 1 ns per
#                     instruction executed (qemu -icount shift=0,sleep=off;
#                     idle time is skipped), so what the guest times is the
#                     work done, the same on every run and whatever the host
#                     is doing. With nohz=off: with the tick stopped on idle
#                     vCPUs, a wake-up of an idle vCPU was at times not seen
#                     until a timer far away (a ping-pong stood still for
#                     400 s of guest time); the tick bounds that to 4 ms.
#   --pin             run vCPU N's thread on host CPU N only (the host needs
#                     as many CPUs as the guest): otherwise the host's
#                     scheduler may move both vCPU threads onto one host CPU
#                     (it pulls a thread it wakes next to its waker), and a
#                     guest whose two CPUs take turns measures something
#                     else than one whose CPUs run side by side. The other
#                     qemu threads (I/O, timers) stay free. Not with --icount.
#   --plugin SPEC     load a QEMU TCG plugin (qemu -plugin SPEC: PATH,ARG=V,...;
#                     bench/insnprof.c)
#   --no-erms         a guest CPU without ERMS, for the benchmark: with it
#                     the kernel copies user data of 64 bytes and more with
#                     rep movsb, which TCG runs one byte per step. A byte
#                     copied then weighs five times what it does on
#                     hardware against the rest of a message: vanilla
#                     sockmap's copying cost as much as everything else of a
#                     message at 4 KB, where the published bare-metal numbers
#                     put that at 21 KB. Without ERMS the copies use rep
#                     movsq, 8 bytes per step (scripts/bench-report.py
#                     prints where the two costs meet for every run).
# The command runs as root in the host's current directory, with stdin from
# /dev/null and its output on the guest console. RESULTS/ then holds
# console.log (everything qemu printed), cmd, exit-status, dmesg.txt,
# kmemleak.txt (if the kernel has kmemleak) and splats.txt (the splat
# scan's report; empty if it found nothing).
# Exit status: the command's if non-zero; 124 on timeout; 125 if the guest
# wrote no exit status (crash, panic, setup failure, or init not started
# within --boot-timeout: RESULTS/boot-timeout then says so); 1 for a kernel splat
# (see scripts/splat-scan.sh) after a successful command.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

kernel='' results='' timeout=1800 boot_timeout=600 cpus=2 mem=4G append='' icount='' splat_ok='' pin='' cpu=max,la57=off plugin=()
need() { [ "$2" -ge 2 ] || die "$1 needs a value (try --help)"; }
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) need "$1" $#; kernel=$2; shift 2 ;;
	--results) need "$1" $#; results=$2; shift 2 ;;
	--timeout) need "$1" $#; timeout=$2; shift 2 ;;
	--boot-timeout) need "$1" $#; boot_timeout=$2; shift 2 ;;
	--cpus) need "$1" $#; cpus=$2; shift 2 ;;
	--mem) need "$1" $#; mem=$2; shift 2 ;;
	--append) need "$1" $#; append=$2; shift 2 ;;
	--icount) icount=1; shift ;;
	--splat-ok) splat_ok=1; shift ;;
	--pin) pin=1; shift ;;
	--no-erms) cpu+=,erms=off; shift ;;
	--plugin) need "$1" $#; plugin=(-plugin "$2"); shift 2 ;;
	-h | --help) usage 0 ;;
	--) shift; break ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
done
[ $# -gt 0 ] || die "no command given (vm-run.sh [options] -- COMMAND [ARGS...])"
[ -n "$kernel" ] || die "--kernel is required"
[ -f "$kernel" ] || die "no kernel image at '$kernel'"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a number of seconds"
[[ $boot_timeout =~ ^[1-9][0-9]*$ ]] || die "--boot-timeout wants a number of seconds"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus wants a number"
[ -z "$pin" ] || [ -z "$icount" ] || die "--pin is for the multi-threaded guest, not --icount"
[ -z "$pin" ] || [ "$(nproc)" -ge "$cpus" ] ||
	die "--pin: $cpus vCPUs need as many host CPUs, this host has $(nproc)"

results=${results:-$BUILD/vm-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
results=$(cd "$results" && pwd -P)
init=$TOP/guest/init.sh
# These paths go into the kernel command line (split at white space) and
# into qemu options (where a comma separates options).
for p in "$results" "$init"; do
	[[ $p != *[[:space:],]* ]] || die "path '$p' must not contain white space or commas"
done
[ -x "$init" ] || die "$init is not executable"
rm -f "$results"/{console.log,cmd,exit-status,dmesg.txt,kmemleak.txt,splats.txt,qemu.pid,pinned,boot-timeout}
# For the splat scan, here and in scripts/selftests-summary.py.
realpath "$kernel" >"$results/kernel"
export SPLAT_KERNEL=$kernel

# The command, for guest/init.sh to run with sh: every word single-quoted
# (a ' inside becomes '\''), so no argument is ever re-split or expanded.
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	echo "# from scripts/vm-run.sh: guest/init.sh runs this with sh"
	echo "cd $(quote "$PWD") || exit 125"
	echo "export RESULTS=$(quote "$results")"
	printf 'exec'
	for arg in "$@"; do printf ' %s' "$(quote "$arg")"; done
	echo
} >"$results/cmd"

# -cpu max, but with 4-level paging: with LA57 (5-level paging) our KASAN
# kernels reported a wild-memory-access in an early-boot timer interrupt.
# acpi=noirq: with full ACPI, AML under TCG crawls through AE_AML_LOOP_TIMEOUT
# errors; this keeps the CPUs and the TSC. panic=-1: a panic reboots, which
# -no-reboot turns into qemu exiting. loglevel=4: errors and worse on the
# console, the whole log in dmesg.txt (log_buf_len: room for all of it).
# RESULTS=... is passed to init as an environment variable.
# cache=loose on the read-only root: several times faster (exec, lookups)
# under TCG; a file the host changes while the guest runs may look stale.
ninep=trans=virtio,version=9p2000.L,msize=512000
cmdline="console=ttyS0 root=/dev/root rootfstype=9p rootflags=$ninep,cache=loose ro"
cmdline+=" init=$init acpi=noirq panic=-1 loglevel=4 log_buf_len=16M"
[ -z "$icount" ] || cmdline+=" nohz=off"
# A kernel with KCSAN's own test suite (config/kcsan.config) runs it while
# booting (under a minute): every run on it shows that the detector catches
# races on this machine (scripts/kcsan-report.py checks the suite's result).
if grep -qsx 'CONFIG_KCSAN_KUNIT_TEST=y' "$(dirname "$kernel")/../../../.config"; then
	cmdline+=" kunit.enable=1 kunit.filter_glob=kcsan"
fi
cmdline+=" RESULTS=$results${append:+ $append}"
# shellcheck disable=SC2054 # the commas are qemu's
accel=(-accel tcg,thread=multi)
# shellcheck disable=SC2054
[ -z "$icount" ] || accel=(-accel tcg,thread=single -icount shift=0,sleep=off)

# shellcheck disable=SC2054 # the commas are qemu's
qemu=(
	qemu-system-x86_64 -nodefaults -no-user-config -no-reboot
	-machine q35 "${accel[@]}" "${plugin[@]}" -cpu "$cpu" -smp "$cpus" -m "$mem"
	-display none -serial stdio -name guest,debug-threads=on -pidfile "$results/qemu.pid"
	-kernel "$kernel" -append "$cmdline"
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=root,mount_tag=/dev/root
	-fsdev "local,id=results,path=$results,security_model=none,multidevs=remap"
	-device virtio-9p-pci,fsdev=results,mount_tag=results
)

# pin_vcpus: once qemu has started its vCPU threads (named "CPU N/TCG" with
# debug-threads=on), bind each to its host CPU; "pinned" then lists them, a
# line per vCPU. Gives up after 60 s; the check after the run fails it then.
pin_vcpus() {
	local pid='' n tid comm
	for _ in $(seq 600); do
		[ -n "$pid" ] || pid=$(cat "$results/qemu.pid" 2>/dev/null) || true
		if [ -n "$pid" ]; then
			n=0
			for tid in /proc/"$pid"/task/*; do
				comm=$(cat "$tid/comm" 2>/dev/null) || continue
				[[ $comm =~ ^CPU\ ([0-9]+)/TCG$ ]] && n=$((n + 1))
			done
			[ "$n" -lt "$cpus" ] || break
		fi
		sleep 0.1
	done
	for tid in /proc/"$pid"/task/*; do
		comm=$(cat "$tid/comm" 2>/dev/null) || continue
		[[ $comm =~ ^CPU\ ([0-9]+)/TCG$ ]] || continue
		taskset -p -c "${BASH_REMATCH[1]}" "${tid##*/}" >/dev/null &&
			echo "vCPU ${BASH_REMATCH[1]}: thread ${tid##*/} on host CPU ${BASH_REMATCH[1]}"
	done >"$results/pinned"
}

# watch_boot: kill qemu if init has not started after --boot-timeout
# seconds: a guest that hangs while booting would otherwise hold the run
# until --timeout. It stops looking once init has started; killed once
# qemu has exited.
watch_boot() {
	local pid
	for _ in $(seq "$boot_timeout"); do
		grep -q "$INIT_STARTED" "$results/console.log" 2>/dev/null && return
		sleep 1
	done
	pid=$(cat "$results/qemu.pid" 2>/dev/null) || return 0
	echo "init had not started after ${boot_timeout}s: qemu killed" >"$results/boot-timeout"
	kill "$pid"
}

log "booting $kernel (${cpus} CPUs, $mem${icount:+, icount}${pin:+, vCPUs pinned}, timeout ${timeout}s); results in $results"
start=$SECONDS
[ -z "$pin" ] || pin_vcpus &
watch_boot &
watcher=$!
# --foreground: qemu stays in our process group, so ^C reaches it. The
# console goes both to our stdout and, in full, to console.log (tee -p: keep
# logging even if our stdout goes away).
set +e
timeout --foreground -k 10 "$timeout" "${qemu[@]}" </dev/null 2>&1 | tee -p "$results/console.log"
rc=${PIPESTATUS[0]}
set -e
log "qemu exited (status $rc) after $((SECONDS - start))s"
kill "$watcher" 2>/dev/null || true
wait

status=0
if [ -n "$pin" ] && [ "$(grep -c '^vCPU' "$results/pinned" 2>/dev/null)" != "$cpus" ]; then
	log "FAIL: --pin: not all $cpus vCPU threads were pinned (see $results/pinned)"
	status=125
elif [ -s "$results/boot-timeout" ]; then
	log "FAIL: $(<"$results/boot-timeout") (see $results/console.log)"
	status=125
elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	log "FAIL: timed out after ${timeout}s: qemu killed"
	status=124
elif [ ! -s "$results/exit-status" ]; then
	log "FAIL: the guest wrote no exit status (crashed or panicked?): see $results/console.log"
	status=125
else
	status=$(<"$results/exit-status")
	[ "$status" = 0 ] || log "FAIL: the command exited with status $status"
fi

# The kernel's own log first (no false alarms from the command's output);
# the console too, kernel lines only, for a guest that died before saving it.
# Their report is kept in splats.txt, emptied if they found nothing (their
# notes on ignored lines are no finding).
if ! { "$TOP/scripts/splat-scan.sh" "$results/dmesg.txt" "$results/kmemleak.txt" &&
	"$TOP/scripts/splat-scan.sh" -k "$results/console.log"; } | tee "$results/splats.txt"; then
	if [ -n "$splat_ok" ]; then
		log "WARNING: kernel splat (see above and $results/dmesg.txt), not failing (--splat-ok)"
	else
		log "FAIL: kernel splat (see above and $results/dmesg.txt)"
		[ "$status" != 0 ] || status=1
	fi
else
	: >"$results/splats.txt"
fi
[ "$status" != 0 ] || log "OK: results in $results"
exit "$status"
