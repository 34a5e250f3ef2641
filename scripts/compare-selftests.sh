#!/usr/bin/env bash
# Run the sockmap selftests on the vanilla and on the patched kernel
# (compare-selftests.sh [CONFIG [VARIANTS [SUITE]]], CONFIG default debug)
# and check that what passes on vanilla passes with the series (what only
# the series passes is reported as fixed). SUITE all:
# the whole of test_progs instead, as BPF CI runs it (see
# guest/run-selftests.sh).
#
# Both kernels run the same test binaries, built from the series tree: the
# series changes no existing test, so the old tests are the same code on
# both sides, and the tests the series adds show what vanilla lacks. Those
# (prog_tests files the series adds) are reported for vanilla, not compared.
#
# VARIANTS "vanilla anchor patched" (default "vanilla patched") runs the
# same binaries on the anchor's kernel too (build/linux-anchor, scripts/tree.sh
# anchor): every test's results are then printed side by side, and how many
# of the anchor's differ from vanilla's and from patched's; that is reported,
# never a failure (the anchor's known bugs are kept, and it splats).
. "$(dirname "$0")/lib.sh"

config=${1:-debug}
suite=${3:-sockmap}
read -r -a words <<<"${2:-vanilla patched}"
order_variants "${words[@]}"
[[ "${variants[*]:-}" == vanilla*patched ]] ||
	die "the comparison needs vanilla and patched (and may add anchor), not '${2:-}'"
# The selftests build against the patched kernel's build (vmlinux BTF).
"$TOP/scripts/build-kernel.sh" "$config" patched
"$TOP/scripts/build-selftests.sh" "$config" patched
kmods=$(cd "$(out_for patched "$config")/selftests" && ls -- *.ko 2>/dev/null) || true
run() {
	"$TOP/scripts/run-selftests.sh" "$config" "$1" "$suite" patched >"$BUILD/results/run-$config-$suite-$1.log" 2>&1 ||
		log "$1: selftests failed (compared below)"
	"$TOP/scripts/selftests-summary.py" --list "$BUILD/results/selftests-$config-$1-$suite" \
		>"$BUILD/results/units-$config-$suite-$1" || true
}
for v in "${variants[@]}"; do
	"$TOP/scripts/build-kernel.sh" "$config" "$v"
	# The whole of test_progs loads the test modules (those the series
	# tree's build made): built against each kernel, from its own tree.
	if [ "$suite" = all ] && [ "$v" != patched ] && [ -n "$kmods" ]; then
		"$TOP/scripts/build-selftests.sh" "$config" "$v" $kmods
	fi
done
mkdir -p "$BUILD/results"
# The whole of test_progs has one vCPU per guest (run-selftests.sh): the
# kernels run side by side, each on a host CPU of its own as far as there
# are enough; the sockmap tests run one kernel after the other.
log "running the $suite tests on ${variants[*]} (logs: $BUILD/results/run-$config-$suite-*.log)"
for v in "${variants[@]}"; do
	if [ "$suite" = all ]; then
		run "$v" &
	else
		run "$v"
	fi
done
wait
for v in "${variants[@]}"; do
	tail -n 4 "$BUILD/results/run-$config-$suite-$v.log"
done
# The tests the series adds, and the subtests it adds to existing tests
# (those of the bpf fixes fail on vanilla by design).
mapfile -t added < <(selftests_added base series)
python3 - "$BUILD/results/units-$config-$suite" "${variants[*]}" "${added[@]}" <<'PY'
import sys
def units(path):
    return dict(line.rstrip("\n").rsplit(": ", 1) for line in open(path))
results = {v: units(f"{sys.argv[1]}-{v}") for v in sys.argv[2].split()}
vanilla, patched = results["vanilla"], results["patched"]
added = set(sys.argv[3:])
def is_new(unit):  # "test_progs: TEST/SUBTEST" or "test_progs: TEST (...)"
    name = unit.split(": ", 1)[-1]
    return name.replace(" ", "/").split("/")[0] in added or name in added
old = {t: r for t, r in vanilla.items() if not is_new(t)}
anchor = results.get("anchor")
if anchor is not None:
    # Every test's results side by side, "*" where they differ.
    tests = sorted(set().union(*results.values()))
    width = max(map(len, tests))
    print(f"{'test':{width}}   " + " ".join(f"{v:8}" for v in results).rstrip())
    for t in tests:
        row = [r.get(t, "missing") for r in results.values()]
        mark = "*" if len(set(row)) > 1 else " "
        print(f"{t:{width}} {mark} " + " ".join(f"{x:8}" for x in row).rstrip())
# The contract: what passes on vanilla passes with the series. What only
# the series passes (the kernel log, when the fixes' tests make vanilla
# splat) is reported as fixed, not as a difference.
fixed = [t for t, r in sorted(old.items()) if r != "OK" and patched.get(t) == "OK"]
bad = [f"{t}: vanilla {r}, patched {patched.get(t, 'missing')}"
       for t, r in sorted(old.items()) if patched.get(t) != r and t not in fixed]
bad += [f"{t}: patched only" for t in sorted(patched) if not is_new(t) and t not in vanilla]
print("\n".join(bad))
for t in sorted(u for u in vanilla if is_new(u)):
    print(f"new test on vanilla: {t}: {vanilla[t]} (patched: {patched.get(t, 'missing')})")
if anchor is not None:
    print(f"anchor (reported, not judged): {sum(anchor.get(t) != r for t, r in old.items())} "
          f"of the {len(old)} tests compared differ from vanilla, "
          f"{sum(anchor.get(t) != r for t, r in patched.items())} of all {len(patched)} "
          "from patched")
for t in fixed:
    print(f"fixed by the series: {t}: vanilla {old[t]}, patched OK")
print(f"{len(old)} tests compared, {len(bad)} differ, {len(fixed)} fixed; "
      f"{sum(is_new(t) for t in patched)} added by the series")
sys.exit(1 if bad or not old else 0)
PY
