#!/usr/bin/env bash
# Boot CONFIG/VARIANT and run a selftest suite in it:
#   run-selftests.sh CONFIG VARIANT [sockmap|all|apps] [TESTS_VARIANT] [TESTS_CONFIG]
# TESTS_VARIANT: whose selftests build to run (default VARIANT); the
# comparison runs the series tree's test binaries on the vanilla kernel.
# TESTS_CONFIG: the build of which kernel config (default CONFIG); the KCSAN
# kernel runs the debug build's.
# Results (logs, console, dmesg) go to build/results/selftests-CONFIG-VARIANT-SUITE.
# Prints one line per test that did not pass and an 'N passed, N failed,
# N skipped' summary; the guest kernel log counts as one more test, which
# fails on any splat. Exits non-zero if anything failed.
# STRESS=SECS (sockmap suite): then run the stress harness (tests/stress)
# for SECS in the same guest; STRESS_SEED=N replays a run. APPS=1 (sockmap
# suite), or suite apps alone: the real-application check (tests/apps).
# FUZZ=1 (sockmap suite): then the sequence tester (tests/fuzz) on the seeds
# of tests/fuzz/check-seeds (FUZZ_SECS=n: random seeds up to n s) and the
# kept regression lists.
. "$(dirname "$0")/lib.sh"

config=${1:?config}
variant=${2:?variant}
suite=${3:-sockmap}
tests_variant=${4:-$variant}
tests_config=${5:-$config}
kout=$(out_for "$variant" "$config")
tests=$(out_for "$tests_variant" "$tests_config")/selftests
results=$BUILD/results/selftests-$config-$variant-$suite
[ "$suite" != apps ] || tests=$results # needs no selftests
timeout=${TIMEOUT:-3600}
[ "$suite" = sockmap ] || timeout=${TIMEOUT:-7200}
# The whole of test_progs patches live kernel text (static keys,
# trampolines) while tests run, and with two vCPUs the emulator at times
# runs an int3 of a finished patch on the other one ("Oops: int3" and a
# panic, seen in __schedule() and in a BPF program on vanilla): one vCPU.
cpus=2
[ "$suite" != all ] || cpus=1

rm -rf "$results"
mkdir -p "$results"
guest_args=()
# The whole of test_progs loads the test modules, which must be built
# against the kernel that runs them (build-selftests.sh CONFIG VARIANT
# with their targets, as compare-selftests.sh does).
if [ "$suite" = all ] && [ "$tests_variant" != "$variant" ]; then
	guest_args=("$kout/selftests")
fi
# As BPF CI does, the whole of test_progs leaves out the tests the tree's
# DENYLIST names (known to be broken there), and ours those that bring the
# guest down on every kernel alike (guest/DENYLIST.tcg).
if [ "$suite" = all ]; then
	cat "$(tree_for "$tests_variant")/tools/testing/selftests/bpf/DENYLIST" \
		"$TOP/guest/DENYLIST.tcg" 2>/dev/null >"$results/DENYLIST" || true
fi
if [ "$suite" = sockmap ] && [ "${STRESS:-0}" -gt 0 ]; then
	stage_stress "$results"
	guest_args=(--duration "$STRESS")
	[ -z "${STRESS_SEED:-}" ] || guest_args+=(--seed "$STRESS_SEED")
fi
if [ "$suite" = sockmap ] && [ -n "${FUZZ:-}" ]; then
	stage_fuzz "$results"
	fuzz_check_args "$results" >"$results/fuzz.args"
fi
if [ "$suite" = apps ] || { [ "$suite" = sockmap ] && [ -n "${APPS:-}" ]; }; then
	stage_apps "$results"
fi
log "selftests $suite on $config/$variant: booting (log: $results/console.log)"
# slab_nomerge: the stress harness counts the sk_msg cache's objects.
vm_rc=0
"$TOP/scripts/vm-run.sh" --kernel "$kout/arch/x86/boot/bzImage" --results "$results" \
	--cpus "$cpus" --timeout "$timeout" --append slab_nomerge -- "$TOP/guest/run-selftests.sh" "$tests" "$results" "$suite" "${guest_args[@]}" ||
	vm_rc=$?
log "selftests $suite on $config/$variant: VM exited with $vm_rc"
echo
"$TOP/scripts/selftests-summary.py" "$results" || exit 1
[ "$vm_rc" -eq 0 ] || exit 1
