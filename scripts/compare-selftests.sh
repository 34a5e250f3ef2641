#!/usr/bin/env bash
# Run the sockmap selftests on the vanilla and on the patched kernel
# (compare-selftests.sh [CONFIG], default debug) and check that they give
# the same results (pass, skip or fail).
#
# Both kernels run the same test binaries, built from the series tree: the
# series changes no existing test, so the old tests are the same code on
# both sides, and the tests the series adds show what vanilla lacks. Those
# (prog_tests files the series adds) are reported for vanilla, not compared.
. "$(dirname "$0")/lib.sh"

config=${1:-debug}
# The selftests build against the patched kernel's build (vmlinux BTF).
"$TOP/scripts/build-kernel.sh" "$config" patched
"$TOP/scripts/build-selftests.sh" "$config" patched
for v in vanilla patched; do
	"$TOP/scripts/build-kernel.sh" "$config" "$v"
	"$TOP/scripts/run-selftests.sh" "$config" "$v" sockmap patched ||
		log "$v: selftests failed (compared below)"
	"$TOP/scripts/selftests-summary.py" --list "$BUILD/results/selftests-$config-$v-sockmap" \
		>"$BUILD/results/units-$config-$v" || true
done
added=$(git -C "$SERIES_TREE" diff --name-only --diff-filter=A base series -- \
	tools/testing/selftests/bpf/prog_tests/ | sed 's|.*/||; s|\.c$||')
python3 - "$BUILD/results/units-$config-vanilla" "$BUILD/results/units-$config-patched" $added <<'PY'
import sys
def units(path):
    return dict(line.rstrip("\n").rsplit(": ", 1) for line in open(path))
vanilla, patched = units(sys.argv[1]), units(sys.argv[2])
added = set(sys.argv[3:])
def is_new(unit):  # "test_progs: TEST/SUBTEST" or "test_progs: TEST (...)"
    return unit.split(": ", 1)[-1].replace(" ", "/").split("/")[0] in added
old = {t: r for t, r in vanilla.items() if not is_new(t)}
bad = [f"{t}: vanilla {r}, patched {patched.get(t, 'missing')}"
       for t, r in sorted(old.items()) if patched.get(t) != r]
bad += [f"{t}: patched only" for t in sorted(patched) if not is_new(t) and t not in vanilla]
print("\n".join(bad))
for t in sorted(u for u in vanilla if is_new(u)):
    print(f"new test on vanilla: {t}: {vanilla[t]} (patched: {patched.get(t, 'missing')})")
print(f"{len(old)} tests compared, {len(bad)} differ; "
      f"{sum(is_new(t) for t in patched)} added by the series")
sys.exit(1 if bad or not old else 0)
PY
