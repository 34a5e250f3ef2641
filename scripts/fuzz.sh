#!/usr/bin/env bash
# Build the sequence tester (tests/fuzz) and run it in a guest:
#   fuzz.sh [--kernel BZIMAGE [--kernel BZIMAGE2]] [--config CONFIG]
#           [--seeds N] [--seed S]... [--duration SECS] [--no-reduce]
#           [-- TESTER ARGS...]
# One kernel (default: the series' kernel for CONFIG, default debug): the
# kept regression lists, then the seeds given, then N random seeds or
# random seeds for SECS (default: 120 s when neither is given); a failing
# seed is reduced in the same guest (up to 300 s) to a short operation
# list (RESULTS/seed-S.ops). Two kernels (differential mode: the first
# the reference, normally vanilla): the first runs as above without
# reducing, the second the very seeds the first ran, and
# scripts/fuzz-diff.py compares their traces seed by seed
# (tests/fuzz/known-faults.txt lists the reference's known faults).
# Results go to build/results/fuzz-<time>/ (one subdirectory a kernel:
# k1, k2; traces in traces/). Prints the tester's
# 'fuzz: sequences: OK|FAIL' line and an 'N passed, N failed, N skipped'
# summary for each kernel, the guest kernel log counting as one more
# check (no splat, no kmemleak report). Exits non-zero if the (last)
# kernel failed anything, or if the comparison found a difference that
# is not a legitimate one.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

kernels=() config=debug args=() seeds=() nseeds='' duration='' reduce=1
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernels+=("${2:?}"); shift 2 ;;
	--config) config=${2:?}; shift 2 ;;
	--seeds) nseeds=${2:?}; shift 2 ;;
	--seed) seeds+=("${2:?}"); shift 2 ;;
	--duration) duration=${2:?}; shift 2 ;;
	--no-reduce) reduce=0; shift ;;
	-h | --help) usage 0 ;;
	--) shift; args+=("$@"); break ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
done
[ ${#kernels[@]} -gt 0 ] || kernels=("$(out_for patched "$config")/arch/x86/boot/bzImage")
[ ${#kernels[@]} -le 2 ] || die "at most two kernels"
for k in "${kernels[@]}"; do
	[ -f "$k" ] || die "no kernel at $k (make kernel CONFIG=$config, or --kernel)"
done
[ -n "$nseeds$duration" ] || [ ${#seeds[@]} -gt 0 ] || duration=120

top=$BUILD/results/fuzz-$(date +%Y%m%d-%H%M%S)
mkdir -p "$top"

# run_one N KERNEL TESTER-ARGS...: boot KERNEL, run the tester; results in
# $top/kN. Returns the summary's status.
run_one() {
	local kernel=$2 results=$top/k$1 vm_rc=0 budget
	shift 2
	mkdir -p "$results"
	stage_fuzz "$results"
	# The reference kernel of a comparison leaves out the regression
	# lists that crash it (known-faults.txt: crash@LABEL).
	if [ "$results" = "$top/k1" ] && [ ${#kernels[@]} -eq 2 ]; then
		for label in $(sed -n 's/^crash@\([^ ]*\).*/\1/p' "$TOP/tests/fuzz/known-faults.txt"); do
			rm -f "$results/regressions/$label.ops"
		done
	fi
	budget=$((${duration:-0} + 60 * (${nseeds:-0} + ${#seeds[@]} + 1) + 3600))
	log "fuzz on $kernel (log: $results/console.log)"
	"$TOP/scripts/vm-run.sh" --kernel "$kernel" --results "$results" --timeout "$budget" \
		--append slab_nomerge -- "$TOP/guest/run-selftests.sh" "$results" "$results" fuzz \
		--regressions "$results/regressions" --trace-dir "$results/traces" \
		--reduce-out "$results" "$@" || vm_rc=$?
	log "fuzz: VM exited with $vm_rc"
	"$TOP/scripts/selftests-summary.py" "$results" || return 1
	[ "$vm_rc" -eq 0 ]
}

first=()
for s in ${seeds[@]+"${seeds[@]}"}; do first+=(--seed "$s"); done
[ -z "$nseeds" ] || first+=(--seeds "$nseeds")
[ -z "$duration" ] || first+=(--duration "$duration")
# The reference kernel's failures are compared, not reduced: reducing its
# known faults would take the time its random seeds are run for.
[ "$reduce" = 0 ] || [ ${#kernels[@]} -eq 2 ] || first+=(--reduce --reduce-time 300)
rc=0
run_one 1 "${kernels[0]}" "${first[@]}" ${args[@]+"${args[@]}"} || rc=1
[ ${#kernels[@]} -eq 2 ] || exit $rc

# The same seeds on the second kernel: those the first one ran or was
# running, one trace each (the first kernel may have crashed, its tester
# never printing its list).
second=()
for f in "$top"/k1/traces/seed-*.trace; do
	[ -e "$f" ] || continue
	f=${f##*/seed-}
	second+=(--seed "${f%.trace}")
done
[ ${#second[@]} -gt 0 ] || [ -n "$(ls "$top/k1/regressions" 2>/dev/null)" ] || die "no seeds ran on ${kernels[0]}"
[ "$reduce" = 0 ] || second+=(--reduce --reduce-time 300)
rc=0
run_one 2 "${kernels[1]}" ${second[@]+"${second[@]}"} ${args[@]+"${args[@]}"} || rc=1
echo
"$TOP/scripts/fuzz-diff.py" --known "$TOP/tests/fuzz/known-faults.txt" \
	"$top/k1/traces" "$top/k2/traces" | tee "$top/diff.txt" || rc=1
exit $rc
