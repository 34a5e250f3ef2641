#!/bin/sh
# Runs inside the guest: run-selftests.sh DIR RESULTS_DIR SUITE [ARGS...]
#   SUITE sockmap  test_sockmap and the sockmap tests of test_progs (DIR:
#                  the selftests); then, given ARGS, the stress harness
#                  with ARGS from RESULTS_DIR (where the host put it);
#                  the real-application check first if the host put it
#                  there too, the sequence tester last (its arguments in
#                  RESULTS_DIR/fuzz.args, one a line) if the host put it
#                  there
#         apps     the real-application check (tests/apps) alone
#         all      the whole of test_progs; ARGS: see below
#         stress   the sockmap stress harness (DIR: its build, see
#                  tests/stress) with ARGS
#         fuzz     the sequence tester (DIR: its build, see tests/fuzz)
#                  with ARGS
# Each program's output goes to RESULTS_DIR/<program>.log and to the console;
# its exit status to RESULTS_DIR/<program>.status. The host summarises.
set -u
dir=$1 results=$2 suite=${3:-sockmap}
shift 2
[ $# -eq 0 ] || shift # the harness's ARGS remain
cd "$dir" || exit 1

# The sockmap tests of test_progs (sockmap_ingress_cork is added by the
# series: an unknown name matches nothing on vanilla); SOCKMAP_TESTS
# overrides the list, SOCKMAP_SKIP leaves tests out of it (test_progs -b).
: "${SOCKMAP_TESTS:=sockmap_basic,sockmap_redir,sockmap_listen,sockmap_ktls,sockmap_strp,sockmap_ingress_cork}"

run() {
	name=$1
	shift
	echo "=== $name: $*"
	start=$(date +%s)
	{ "$@"; echo $? >"$results/$name.status"; } 2>&1 | tee "$results/$name.log"
	echo "=== $name: exit $(cat "$results/$name.status") after $(($(date +%s) - start))s"
}

case $suite in
sockmap)
	# Line-buffered: test_sockmap forks, and a full stdio buffer would be
	# printed once by each process.
	run test_sockmap stdbuf -oL ./test_sockmap
	# -w: the default 120 s watchdog is too short under emulation with
	# KASAN for sockmap_listen's 1000-connection race tests.
	run test_progs ./test_progs -w 600 -t "$SOCKMAP_TESTS" ${SOCKMAP_SKIP:+-b "$SOCKMAP_SKIP"}
	[ ! -e "$results/apps_check.py" ] || run apps "$results/apps_check.py" --tools "$results"
	[ $# -eq 0 ] || run stress "$results/sockmap_stress" "$@"
	if [ -e "$results/fuzz.args" ]; then
		# One argument a line; paths hold no white space (vm-run.sh).
		# shellcheck disable=SC2046
		run fuzz "$results/sockmap_fuzz" $(cat "$results/fuzz.args")
	fi
	;;
all)
	# ARGS: a directory with the test modules (bpf_testmod.ko and the
	# others) built against this kernel, when the test binaries were built
	# against another: they take the place of those in DIR, which the
	# module loader would refuse (symbol versions, BTF).
	if [ $# -gt 0 ]; then
		for ko in "$1"/*.ko; do
			[ ! -e "$dir/${ko##*/}" ] || mount --bind "$ko" "$dir/${ko##*/}" || exit 1
		done
	fi
	# Left out: the tests of the DENYLIST the host put there (the tree's
	# and guest/DENYLIST.tcg).
	deny=
	[ ! -e "$results/DENYLIST" ] || deny="-d @$results/DENYLIST"
	run test_progs ./test_progs -w 600 $deny
	;;
apps)
	run apps "$results/apps_check.py" --tools "$results"
	;;
stress)
	run stress ./sockmap_stress "$@"
	;;
fuzz)
	run fuzz ./sockmap_fuzz "$@"
	;;
*)
	echo "unknown suite $suite" >&2
	exit 2
	;;
esac

# The host judges the results from the logs; this script fails only if a
# program could not be run at all.
for f in "$results"/*.status; do
	[ -s "$f" ] || exit 1
done
