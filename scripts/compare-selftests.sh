#!/usr/bin/env bash
# Run the sockmap selftests on vanilla and on patched (compare-selftests.sh
# [CONFIG], default debug), each built from its own tree, and check that the
# tests both trees have give the same results (pass, skip or fail).
. "$(dirname "$0")/lib.sh"

config=${1:-debug}
for v in vanilla patched; do
	"$TOP/scripts/build-kernel.sh" "$config" "$v"
	"$TOP/scripts/build-selftests.sh" "$config" "$v"
	"$TOP/scripts/run-selftests.sh" "$config" "$v" sockmap || log "$v: selftests failed (compared below)"
	"$TOP/scripts/selftests-summary.py" --list "$BUILD/results/selftests-$config-$v-sockmap" \
		>"$BUILD/results/units-$config-$v" || true
done
# Tests the series adds exist on patched only; every test of vanilla must
# be there on patched with the same result.
python3 - "$BUILD/results/units-$config-vanilla" "$BUILD/results/units-$config-patched" <<'PY'
import sys
def units(path):
    return dict(line.rstrip("\n").rsplit(": ", 1) for line in open(path))
vanilla, patched = units(sys.argv[1]), units(sys.argv[2])
bad = [f"{t}: vanilla {r}, patched {patched.get(t, 'missing')}"
       for t, r in sorted(vanilla.items()) if patched.get(t) != r]
print("\n".join(bad))
print(f"{len(vanilla)} tests compared, {len(bad)} differ, {len(patched) - len(vanilla)} new on patched")
sys.exit(1 if bad or not vanilla else 0)
PY
