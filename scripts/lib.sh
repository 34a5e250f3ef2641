# Common settings for the workbench scripts; sourced, not run.
# shellcheck shell=bash
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
SERIES_TREE=$BUILD/linux            # base + patches/, the tree developers edit
VANILLA_TREE=$BUILD/linux-vanilla   # git worktree of the base commit
ANCHOR_TREE=$BUILD/linux-anchor     # git worktree: base + the anchor, for comparison only
BASE_TARBALL=$TOP/../shared/base/linux-source-7.3.tar.xz
BASE_SUMS=$TOP/../shared/base/SHA256SUMS
# The published earlier posting of this idea (v4), ported to the pinned base:
# applied to ANCHOR_TREE at build time, never part of patches/.
ANCHOR_DIR=${ANCHOR_DIR:-$TOP/../shared/anchor/v4-on-7.3.4}
JOBS=${JOBS:-$(($(nproc) + 1))}
# What guest/init.sh prints on the console once it runs (grep pattern).
INIT_STARTED='^vm-init \[[0-9.]*\]: started'

# Fixed identity and dates for the synthetic base commit, so that the same
# base tree always gets the same commit id (it is recorded as base-commit).
# One assignment a line.
export GIT_BASE_ENV="GIT_AUTHOR_NAME=base
GIT_AUTHOR_EMAIL=base@localhost
GIT_COMMITTER_NAME=base
GIT_COMMITTER_EMAIL=base@localhost
GIT_AUTHOR_DATE=2000-01-01T00:00:00Z
GIT_COMMITTER_DATE=2000-01-01T00:00:00Z"

SECONDS=0
log() { printf '[%4dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# usage [STATUS]: print the calling script's header comment and exit.
usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-2}"; }

# tree_for VARIANT -> source tree path
tree_for() {
	case $1 in
	vanilla) echo "$VANILLA_TREE" ;;
	patched) echo "$SERIES_TREE" ;;
	anchor) echo "$ANCHOR_TREE" ;;
	*) die "unknown variant '$1' (vanilla, patched or anchor)" ;;
	esac
}

# order_variants WORD...: sets the array variants to the variants the WORDs
# name, in the order vanilla, anchor, patched (the order in which boots and
# reports list them); dies on a word that names none.
order_variants() {
	local v w
	for w in "$@"; do tree_for "$w" >/dev/null; done
	variants=()
	for v in vanilla anchor patched; do
		for w in "$@"; do
			[ "$w" != "$v" ] || { variants+=("$v"); break; }
		done
	done
}

# Build outputs live in an immediate subdirectory of the source tree: the
# kernel then refers to its sources as "..", so the compiler command lines
# of all trees are identical and ccache shares objects between them.
out_for() { echo "$(tree_for "$1")/out-$2"; }

# git_common DIR: the real path of the repository DIR belongs to (git's
# common directory), empty if there is none.
git_common() { (cd "$1" && realpath "$(git rev-parse --git-common-dir 2>/dev/null)") 2>/dev/null; }

setup_ccache() {
	export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1
	export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
	ccache --max-size=20G >/dev/null
}

# kmake TREE OUT ARGS...: make in TREE with objects in OUT, through ccache.
kmake() {
	local tree=$1 out=$2
	shift 2
	make -C "$tree" O="$out" CC="ccache gcc" HOSTCC="ccache gcc" -j"$JOBS" "$@"
}

# kernel_configure TREE OUT CONFIG: OUT/.config from tinyconfig and the
# fragments for CONFIG (base.config, then CONFIG.config). It is
# regenerated only when the fragments change, so builds stay incremental.
# Fails if an option asked for did not make it into the result.
# A fragment that starts from another says so in a line "# over: NAME"
# (config/NAME.config is merged first; the later fragment's options win),
# and one that takes a fragment from the kernel tree in "# tree: PATH".
kernel_configure() {
	local tree=$1 out=$2 config=$3 missing over
	[ -f "$TOP/config/$config.config" ] || die "no config/$config.config"
	local fragments=("$TOP/config/base.config")
	for over in $(sed -n 's/^# over: //p' "$TOP/config/$config.config"); do
		[ -f "$TOP/config/$over.config" ] || die "config/$config.config: no config/$over.config"
		fragments+=("$TOP/config/$over.config")
	done
	# "# tree: PATH": a fragment the kernel tree itself carries (the BPF
	# selftests' config), merged before ours, so it follows the base.
	for over in $(sed -n 's/^# tree: //p' "$TOP/config/$config.config"); do
		[ -f "$tree/$over" ] || die "config/$config.config: no $over in $tree"
		fragments+=("$tree/$over")
	done
	fragments+=("$TOP/config/$config.config")
	mkdir -p "$out"
	cat "${fragments[@]}" >"$out/fragments.config"
	cmp -s "$out/fragments.config" "$out/.fragments-used" 2>/dev/null && return 0
	log "configuring $out ($config)"
	kmake "$tree" "$out" -s tinyconfig >/dev/null
	"$tree/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >"$out/merge.log"
	kmake "$tree" "$out" -s olddefconfig >/dev/null
	# Each option as the last fragment that sets it asks for it.
	missing=$(grep -h '^CONFIG_' "${fragments[@]}" | tac | awk -F= '!seen[$1]++' | while IFS= read -r line; do
		case $line in
		*=n) grep -q "^${line%%=*}=" "$out/.config" && echo "$line" ;;
		*) grep -qx "$line" "$out/.config" || echo "$line" ;;
		esac
	done || true)
	[ -z "$missing" ] || die "options that did not stick (missing dependency?):"$'\n'"$missing"
	cp "$out/fragments.config" "$out/.fragments-used"
}

# The two series in patches/, in the order they apply: the fixes of the
# unpatched kernel (for the bpf tree), then the feature (for bpf-next).
SERIES_DIRS="bpf bpf-next"

# series_patches: the patch files of both series in order, one a line,
# without the cover letters.
series_patches() {
	local d f
	for d in $SERIES_DIRS; do
		for f in "$TOP/patches/$d"/0*.patch; do
			[ -e "$f" ] || continue
			case $f in */0000-cover-letter.patch) continue ;; esac
			echo "$f"
		done
	done
}

# selftests_added FROM TO: the test_progs tests the series tree adds between
# commits FROM and TO, one a line: TEST for a new prog_tests file, and
# TEST/SUBTEST for a subtest added to an existing one (TEST is named after
# its file).
selftests_added() {
	local dir=tools/testing/selftests/bpf/prog_tests/
	git -C "$SERIES_TREE" diff --name-only --diff-filter=A "$1" "$2" -- "$dir" |
		sed 's|.*/||; s|\.c$||'
	git -C "$SERIES_TREE" diff -U0 --diff-filter=M "$1" "$2" -- "$dir" | sed -n \
		-e 's|^+++ b/.*/\(.*\)\.c$|\1|p' \
		-e 's|^+.*test__start_subtest("\([^"]*\)").*|/\1|p' |
		awk '/^\// { print t $0; next } { t = $0 }'
}

# git am needs a committer; a machine without a git identity gets the
# base's placeholder (authors come from the patches).
am_committer() {
	git -C "$SERIES_TREE" var GIT_COMMITTER_IDENT >/dev/null 2>&1 && return
	while read -r kv; do
		case $kv in GIT_COMMITTER_NAME=* | GIT_COMMITTER_EMAIL=*) export "${kv?}" ;; esac
	done <<<"$GIT_BASE_ENV"
}

# recipients KIND PATCH...: the addresses scripts/get_maintainer.pl gives
# for the patches, one a line, as git format-patch options: KIND "to" for
# the maintainers, "cc" for the reviewers and the mailing lists (as
# b4 prep --auto-to-cc sorts them).
recipients() {
	local kind=$1 sel=(--m --no-r --no-l)
	shift
	[ "$kind" = to ] || sel=(--no-m --r --l)
	(cd "$SERIES_TREE" && scripts/get_maintainer.pl --no-rolestats --no-git \
		--no-git-fallback --no-multiline --separator=$'\n' "${sel[@]}" "$@" 2>/dev/null) |
		sed "s/^/--$kind=/"
}

# stage_stress DIR: build the stress harness (tests/stress) and copy it, with
# its BPF object, to DIR. The guest runs that copy: a rebuild meanwhile
# cannot change it, and the results keep the binary that produced them.
stage_stress() {
	make -s -C "$TOP/tests/stress" O="$BUILD/stress"
	cp "$BUILD/stress/sockmap_stress" "$BUILD/stress/sockmap_stress.bpf.o" "$1"/
}

# stage_fuzz DIR: build the sequence tester (tests/fuzz) and copy it, with
# its BPF object and the kept regression lists (DIR/regressions), to DIR,
# as stage_stress does.
stage_fuzz() {
	make -s -C "$TOP/tests/fuzz" O="$BUILD/fuzz"
	cp "$BUILD/fuzz/sockmap_fuzz" "$BUILD/fuzz/sockmap_fuzz.bpf.o" "$1"/
	mkdir -p "$1/regressions"
	cp "$TOP"/tests/fuzz/regressions/*.ops "$1/regressions/" 2>/dev/null || true
}

# fuzz_check_args DIR: the tester's arguments in make check (one a line):
# the seeds of tests/fuzz/check-seeds, then one random seed, and more until
# FUZZ_SECS (default 0) have passed since the tester started, the regression
# lists, traces and reduced lists in DIR.
fuzz_check_args() {
	local s
	for s in $(grep -o '^[0-9]*' "$TOP/tests/fuzz/check-seeds"); do
		printf -- '--seed\n%s\n' "$s"
	done
	printf -- '--seeds\n1\n--duration\n%s\n--regressions\n%s\n--trace-dir\n%s\n--reduce\n--reduce-time\n120\n--reduce-out\n%s\n' \
		"${FUZZ_SECS:-0}" "$1/regressions" "$1/fuzz-traces" "$1"
}

# stage_apps DIR: the real-application check (tests/apps) and the loader it
# accelerates them with (bench/sockredir), copied to DIR as stage_stress does.
stage_apps() {
	make -s -C "$TOP/bench" O="$BUILD/bench/tools"
	gcc -O2 -g -Wall -Wextra -Werror -o "$1/blocking" "$TOP/tests/apps/blocking.c" -lpthread
	cp "$BUILD/bench/tools/sockredir" "$TOP/tests/apps/apps_check.py" "$1"/
}
