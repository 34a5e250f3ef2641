#!/usr/bin/env bash
# Build the sockmap stress harness (tests/stress) and run it in a guest:
#   stress.sh [--kernel BZIMAGE | --config CONFIG] [--duration SECS] [--seed N]
#             [-- HARNESS ARGS...]
# The kernel defaults to the series' kernel for CONFIG (default debug:
# build/linux/out-debug), the duration to 120 s. Results (the harness and
# its log, console, dmesg, kmemleak) go to build/results/stress-<time>.
# HARNESS ARGS: see sockmap_stress --help (e.g. --conns, --corrupt). Prints the
# harness's checks and an 'N passed, N failed, N skipped' summary in which
# the guest kernel log counts as one more check (no splat, no kmemleak
# report). Exits non-zero if anything failed.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

kernel='' config=debug duration=120 args=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=${2:?}; shift 2 ;;
	--config) config=${2:?}; shift 2 ;;
	--duration) duration=${2:?}; shift 2 ;;
	--seed) args+=(--seed "${2:?}"); shift 2 ;;
	-h | --help) usage 0 ;;
	--) shift; args+=("$@"); break ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
done
[ -n "$kernel" ] || kernel=$(out_for patched "$config")/arch/x86/boot/bzImage
[ -f "$kernel" ] || die "no kernel at $kernel (make kernel CONFIG=$config, or --kernel)"

results=$BUILD/results/stress-$(date +%Y%m%d-%H%M%S)
mkdir -p "$results"
stage_stress "$results"
log "stress on $kernel for ${duration}s (log: $results/console.log)"
# Boot and the kmemleak scans each took up to 10 minutes under TCG on a
# busy machine; the harness's own watchdog ends a stalled run. slab_nomerge
# keeps the sk_msg cache apart, for the harness to count its objects and to
# fail its allocations.
vm_rc=0
"$TOP/scripts/vm-run.sh" --kernel "$kernel" --results "$results" --timeout $((duration + 3600)) \
	--append slab_nomerge -- "$TOP/guest/run-selftests.sh" "$results" "$results" stress --duration "$duration" "${args[@]}" ||
	vm_rc=$?
log "stress: VM exited with $vm_rc"
"$TOP/scripts/selftests-summary.py" "$results" || exit 1
[ "$vm_rc" -eq 0 ] || exit 1
