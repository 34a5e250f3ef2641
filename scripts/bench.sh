#!/usr/bin/env bash
# The benchmark: vanilla vs patched, bench kernels, booted alternately.
#   bench.sh [--quick] [--reps N] [--out DIR] [--config bench|debug]
#            [--variants "vanilla anchor patched"] [--only WORKLOADS]
#            [--icount-only --out DIR] [--profile]
# Builds (or reuses) the bench kernels, our BPF programs and tools (bench/)
# and the selftests' bench binary, then boots vanilla, patched, patched,
# vanilla, ... (N repetitions each; full: 4, quick: 1; every other
# repetition in reverse order, so that a host that drifts slower or faster
# over the run favours neither) and runs guest/bench.py in each boot. Full
# mode then boots each kernel once more under vm-run.sh --icount (guest
# time counts instructions: the same on every run) and writes
# results/<date>/ (raw/*.json, one per boot, icount/*.json, report.md,
# *.png); quick mode (one size, short runs, one repetition, no icount)
# writes build/results/bench-quick/. Every measurement proves that its bytes
# went the way it claims (see guest/bench.py); any failure fails the run.
# --config debug uses the debug kernels instead (what make check builds);
# --variants boots the kernels named (default "vanilla patched") in the
# order vanilla, anchor, patched, reversed every other repetition; with
# one, the report has no comparison. "anchor" is the published anchor
# (build/linux-anchor, scripts/tree.sh anchor), for comparison only: it is
# booted as vanilla is, its splats recorded. CI runs the quick mode on
# debug/patched: a smoke test of the benchmark on the kernel it already has.
# --only runs only the workloads named (comma-separated: iperf3, stream,
# sockperf, redis, wrk, syscall, bench, manyflow, nonredir; see
# guest/bench.py), in every boot: more repetitions of one comparison in the
# same time.
# --profile counts, in the instruction-counted boots, where each
# measurement's instructions go: bench/insnprof.c (a QEMU plugin) counts
# them by code address between marks that guest/bench.py sets around each
# measurement, and scripts/insnprof.py writes profile.md, the kernels side
# by side by function, in instructions per send, and budget.md, the
# stream's sends by part of the kernel, plain TCP against sockmap.
# --icount-only runs only the instruction-counted boots, into DIR, a full
# run's directory that has its timed boots, and writes its report again:
# for a run whose counted boots failed.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

mode=full reps='' out='' config=bench want='vanilla patched' icount_only='' only=() profile=()
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick; shift ;;
	--reps) reps=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--config) config=${2:?}; shift 2 ;;
	--variants) want=${2?}; shift 2 ;;
	--icount-only) icount_only=1; shift ;;
	--only) only=(--only "${2:?}"); shift 2 ;;
	--profile) profile=(--profile); shift ;;
	-h | --help) usage 0 ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
done
case $config in
bench | debug) ;;
*) die "--config wants bench or debug, not '$config'" ;;
esac
# The variants asked for, in the boot order of odd repetitions.
read -r -a words <<<"$want"
order_variants "${words[@]}"
[ ${#variants[@]} -gt 0 ] || die "--variants wants vanilla, anchor and/or patched"
if [ "$mode" = quick ]; then
	reps=${reps:-1}
	out=${out:-$BUILD/results/bench-quick}
	rm -rf "$out"
else
	reps=${reps:-4}
	out=${out:-$TOP/results/$(date +%Y-%m-%d-%H%M)}
fi
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps wants a positive number"
if [ -n "$icount_only" ]; then
	[ "$mode" = full ] || die "--icount-only is for a full run"
	compgen -G "$out/raw/*.json" >/dev/null ||
		die "--icount-only wants --out DIR of a full run, with its raw/*.json"
fi
tools=$BUILD/bench/tools
bench_bin=$(out_for "${variants[0]}" "$config")/selftests/bench
what=''
[ "$config ${variants[*]}" = "bench vanilla patched" ] || what=", $config: ${variants[*]}"

log "bench ($mode, $reps repetition(s)$what): building"
for v in "${variants[@]}"; do "$TOP/scripts/build-kernel.sh" "$config" "$v"; done
make -s -C "$TOP/bench" O="$tools"
# One bench binary for all kernels, so that only the kernel differs (the
# series and the anchor do not touch tools/): the first variant's.
"$TOP/scripts/build-selftests.sh" "$config" "${variants[0]}" bench

mkdir -p "$out/raw"
out=$(cd "$out" && pwd -P)

# run_boot MODE VARIANT REP DEST: one boot of VARIANT running guest/bench.py
# in MODE (under vm-run.sh --icount for MODE icount); its JSON goes to DEST.
run_boot() {
	local mode=$1 v=$2 rep=$3 dest=$4 tree kout vm opts=(--no-erms)
	tree=$(tree_for "$v") kout=$(out_for "$v" "$config")
	vm=$BUILD/results/bench-vm/$mode-$rep-$v
	# Timed boots: each vCPU thread on its own host CPU, as the anchor
	# pinned sender and receiver to CPUs 0 and 1 (see vm-run.sh --pin).
	if [ "$mode" = icount ]; then
		opts+=(--icount)
		# shellcheck disable=SC2054 # the commas are qemu's
		[ ${#profile[@]} = 0 ] || opts+=(--plugin "$tools/insnprof.so,out=$vm/insnprof.txt,mark=0x$(
			awk '$3 == "__x64_sys_getppid" { print $1 }' "$kout/System.map")")
	elif [ "$(nproc)" -ge 2 ]; then
		opts+=(--pin)
	fi
	# A splat of the unpatched kernel or of the anchor (whose known bugs
	# are kept) is that kernel's own bug: recorded with the boot's results
	# and in the report; one of the patched kernel fails.
	[ "$v" = patched ] || opts+=(--splat-ok)
	rm -rf "$vm"
	mkdir -p "$vm"
	python3 - "$vm/meta.json" <<-EOF
		import json, subprocess, sys
		def git(d, *a):
		    return subprocess.run(["git", "-C", d, *a], capture_output=True,
		                          text=True).stdout.strip()
		json.dump({
		    "variant": "$v", "rep": $rep, "reps": $reps, "mode": "$mode",
		    "workbench_commit": git("$TOP", "describe", "--always", "--dirty"),
		    "kernel_tree_commit": git("$tree", "rev-parse", "HEAD"),
		    "kernel_tree_base": git("$tree", "rev-parse", "base"),
		    "series": git("$tree", "log", "--format=%h %s", "base..HEAD").splitlines(),
		    "config": "$config",
		    "config_sha256": subprocess.run(["sha256sum", "$kout/.config"],
		        capture_output=True, text=True).stdout.split()[0],
		    "qemu": subprocess.run(["qemu-system-x86_64", "--version"],
		        capture_output=True, text=True).stdout.splitlines()[0],
		    "host_cpus": $(nproc),
		    "vcpus_pinned": "$mode" != "icount" and $(nproc) >= 2,
		}, open(sys.argv[1], "w"), indent=1)
	EOF
	log "bench: $mode boot: $v, repetition $rep/$reps (console: $vm/console.log)"
	# QEMU TCG now and then lets a vCPU run kernel text that another vCPU
	# is patching at boot (an "Oops: int3" at a static key, seen in about
	# one boot in 25). A guest that died before its init started measured
	# nothing: it is booted again, once, and the report says so.
	local early=''
	while ! "$TOP/scripts/vm-run.sh" "${opts[@]}" --kernel "$kout/arch/x86/boot/bzImage" \
		--results "$vm" --timeout 3600 -- "$TOP/guest/bench.py" --mode "$mode" \
		--tools "$tools" --bench "$bench_bin" --meta "$vm/meta.json" --out "$vm/bench.json" \
		"${only[@]}" "${profile[@]}"; do
		if [ -n "$early" ] || grep -q "$INIT_STARTED" "$vm/console.log"; then
			die "bench: $mode $v repetition $rep failed (see $vm/console.log)"
		fi
		early=$vm/console-early-death.log
		mv "$vm/console.log" "$early"
		log "bench: $mode $v repetition $rep died before init started (see $early); booting it again"
	done
	[ -s "$vm/bench.json" ] || die "bench: $mode $v repetition $rep left no results"
	if [ -e "$vm/insnprof.txt" ]; then
		mkdir -p "$out/profile"
		"$TOP/scripts/insnprof.py" windows "$vm/insnprof.txt" "$kout/System.map" \
			"$vm/bench.json" >"$out/profile/$v.json"
	fi
	# With what vm-run.sh's splat scan found (nothing, but for vanilla and
	# the anchor), and the lines that explain an early death before this boot.
	python3 - "$vm/bench.json" "$dest" "$vm/splats.txt" "$early" <<-EOF
		import json, re, sys
		doc = json.load(open(sys.argv[1]))
		doc["kernel_splat"] = open(sys.argv[3]).read().splitlines()[:40]
		if sys.argv[4]:
		    doc["early_death"] = [l.strip() for l in open(sys.argv[4], errors="replace")
		                          if re.search(r"Oops|BUG|WARNING|panic", l)][:5]
		json.dump(doc, open(sys.argv[2], "w"), indent=1)
	EOF
}

for rep in $(seq 1 "$reps"); do
	[ -z "$icount_only" ] || break
	order=("${variants[@]}")
	[ $((rep % 2)) = 1 ] || mapfile -t order < <(printf '%s\n' "${variants[@]}" | tac)
	for v in "${order[@]}"; do
		run_boot "$mode" "$v" "$rep" "$out/raw/$rep-$v.json"
	done
done
# Full mode: then one boot of each kernel under --icount, where timings
# count instructions and come out the same on every run (the spread of the
# boots above is the host's, not the kernel's).
if [ "$mode" = full ]; then
	mkdir -p "$out/icount"
	for v in "${variants[@]}"; do
		reps=1 run_boot icount "$v" 1 "$out/icount/$v.json"
	done
fi
log "bench: all boots done; report in $out"
"$TOP/scripts/bench-report.py" "$out"
if [ ${#profile[@]} != 0 ]; then
	"$TOP/scripts/insnprof.py" report "$out/profile" >"$out/profile.md"
	"$TOP/scripts/insnprof.py" budget "$out/profile" >"$out/budget.md"
fi
