#!/usr/bin/env bash
# The checks netdev/bpf patchwork runs on a submission, on patches/ (the
# fixes for bpf, then the feature for bpf-next):
#   - each series as its recipients get it: b4 am takes it whole from a
#     mailbox, git am applies the fixes and then the feature on the base,
#     and the tree that gives is the series tree
#   - each cover letter and patch is addressed as get_maintainer.pl says
#   - checkpatch.pl --strict on every patch
#   - every patch builds on its own (bench config, incremental, in turn)
#   - no new warnings with W=1 or sparse (C=1) in the files a patch touches,
#     compared with the same files on the base
#   - scripts/kernel-doc -none on touched files is silent
#   - with TESTS=1, every patch that changes the kernel passes the sockmap
#     selftests: its bench kernel boots under QEMU and runs test_sockmap
#     and test_progs' sockmap tests, the series' debug build of them (the
#     tests and subtests the series adds only from the patch that adds
#     them on)
# It works in its own worktree (build/linux-bisect), leaving the others be.
. "$(dirname "$0")/lib.sh"

tree=$BUILD/linux-bisect
out=$tree/out-bench
setup_ccache
[ -d "$SERIES_TREE/.git" ] || die "no series tree: run 'make tree'"
fail=0
if [ "${TESTS:-0}" = 1 ]; then
	"$TOP/scripts/build-kernel.sh" debug patched
	"$TOP/scripts/build-selftests.sh" debug patched
fi

log "checkpatch --strict"
# FILE_PATH_CHANGES ("does MAINTAINERS need updating?") fires for every new
# file; what it asks is checked instead: each file the series adds must
# belong to a MAINTAINERS section other than THE REST.
for f in $(git -C "$SERIES_TREE" diff --name-only --diff-filter=A base series); do
	if (cd "$SERIES_TREE" && scripts/get_maintainer.pl --no-email --no-l --sections -f "$f") |
		grep -v '^THE REST' | grep -q '^[A-Z][^:]'; then
		echo "ok   MAINTAINERS covers $f"
	else
		echo "FAIL MAINTAINERS: no section covers $f"
		fail=1
	fi
done
# A base unpacked from a tarball has no history: the commit a Fixes: tag
# names is not in it, and checkpatch would call it unknown. The tag's form
# is still checked; on a git checkout of bpf-next, the commit itself too.
ignore=FILE_PATH_CHANGES
git -C "$SERIES_TREE" rev-parse -q --verify base^ >/dev/null ||
	ignore+=,UNKNOWN_COMMIT_ID
for p in $(series_patches); do
	# checkpatch must run from the top of a kernel tree to read patches right.
	# Debian's python3 first, whose python3-ply the SPDX check imports.
	if ! (cd "$SERIES_TREE" && PATH=/usr/bin:$PATH scripts/checkpatch.pl --strict -q \
		--ignore "$ignore" "$p") >/tmp/checkpatch.$$ 2>&1; then
		echo "FAIL checkpatch: $(basename "$p")"
		cat /tmp/checkpatch.$$
		fail=1
	else
		echo "ok   checkpatch: $(basename "$p")"
	fi
done
rm -f /tmp/checkpatch.$$

# (A worktree left from an earlier series tree is not one of this one's.)
if [ "$(git_common "$tree")" != "$(git_common "$SERIES_TREE")" ]; then
	rm -rf "$tree"
	git -C "$SERIES_TREE" worktree prune
	git -C "$SERIES_TREE" worktree add -q --detach "$tree" base
fi

# Each series as a mailing list delivers it: b4 am, then git am of what
# b4 made, fixes first; the result must be the series tree. And its To:
# and Cc: must be what get_maintainer.pl gives for its patches now.
log "b4 am and get_maintainer.pl"
mail=$BUILD/series-check-mail
rm -rf "$mail"
mkdir -p "$mail"
git -C "$tree" checkout -q --detach base
am_committer
for d in $SERIES_DIRS; do
	mapfile -t ps < <(compgen -G "$TOP/patches/$d/0*.patch" | grep -v /0000-cover-letter.patch)
	"$TOP/scripts/series-mbox.py" "$TOP/patches/$d" >"$mail/$d.mbox"
	mkdir -p "$mail/$d"
	if ! (cd "$mail" && b4 -n am -m "$d.mbox" -o "$d") >"$mail/$d.log" 2>&1 ||
		grep -q WARNING "$mail/$d.log" || ! git -C "$tree" am -q "$mail/$d"/*.mbx; then
		echo "FAIL b4 am: patches/$d (log: $mail/$d.log)"
		git -C "$tree" am --abort 2>/dev/null
		fail=1
	else
		echo "ok   b4 am, git am: patches/$d ($(grep -c '^  \[PATCH' "$mail/$d.log") patches)"
	fi
	want=$(recipients to "${ps[@]}"; recipients cc "${ps[@]}")
	for f in "$TOP/patches/$d"/0*.patch; do
		have=$(sed -n '/^$/q; p' "$f" | sed -z 's/\n / /g' |
			sed -n 's/^\(To\|Cc\): //p' | tr ',' '\n' | sed 's/^ *//; s/ *$//; /^$/d')
		if [ "$(sort <<<"$have")" != "$(sed 's/^--[a-z]*=//' <<<"$want" | sort)" ]; then
			echo "FAIL get_maintainer.pl: $(basename "$f") is not addressed as it says"
			fail=1
		fi
	done
done
if git -C "$tree" diff --quiet series --; then
	echo "ok   the fixes, then the feature, give the series tree"
else
	echo "FAIL the series applied from the mailboxes differ from the series tree"
	fail=1
fi

# Objects of the .c files the whole series touches, built with W=1 and
# sparse; prints the warnings with line numbers stripped, so that a
# warning that only moved does not count as new.
touched=$(git -C "$SERIES_TREE" diff --name-only base series -- '*.c' | grep -v '^tools/' || true)
objs=$(for f in $touched; do echo "${f%.c}.o"; done)
# The kernel refuses a sparse that is too old for it: Debian 12's 0.6.4
# lacks __typeof_unqual__ (sparse's own release has not moved since). It
# then runs with __typeof_unqual__ spelled __typeof__, which keeps
# qualifiers where the kernel drops them: that can only add warnings, and
# they would show on the base as well. If even that is refused, say so
# rather than pretend it ran.
valid() { [ "$(cd "$SERIES_TREE" && scripts/checker-valid.sh "$@" -m64 2>/dev/null)" = 1 ]; }
checker=(C=1 CHECK=sparse)
if ! valid sparse; then
	unqual=-D__typeof_unqual__=__typeof__
	if valid sparse "$unqual"; then
		echo "NOTE sparse: $(sparse --version 2>&1 | head -1) lacks __typeof_unqual__; run with $unqual"
		checker=(C=1 "CHECK=sparse $unqual")
	else
		echo "SKIP sparse: $(sparse --version 2>&1 | head -1) is too old for this kernel; W=1 only"
		checker=()
	fi
fi
warnings() {
	local o
	for o in $objs; do
		rm -f "$out/$o"
		[ -f "$tree/${o%.o}.c" ] || continue
		kmake "$tree" "$out" -s W=1 "${checker[@]}" "$o" 2>&1 | grep -E 'warning|error' || true
	done | sed -E 's/:[0-9]+:[0-9]+:/:/; s/:[0-9]+:/:/' | sort -u
}

# selftests COMMIT SUBJECT: boot COMMIT's bench kernel (just built) and run
# the sockmap selftests in it; results in build/results/series-check/N-*.
selftests() {
	local tests=$SERIES_TREE/out-debug/selftests skip
	local results
	results=$BUILD/results/series-check/$(git -C "$SERIES_TREE" rev-list --count "base..$1")-$(
		git -C "$SERIES_TREE" log -1 --format=%f "$1")
	# The guest's list, less the tests and subtests later patches add, as
	# test_progs -b patterns (one kernel command line word: a blank
	# becomes the wildcard).
	skip=$(selftests_added "$1" series | tr ' ' '*' | paste -sd, -)
	rm -rf "$results"
	mkdir -p "$results"
	log "selftests on: $2"
	# The guest's init passes NAME=VALUE words of the command line on
	# as environment variables: SOCKMAP_SKIP reaches guest/run-selftests.sh.
	"$TOP/scripts/vm-run.sh" --kernel "$out/arch/x86/boot/bzImage" --results "$results" \
		--timeout 3600 --append "slab_nomerge${skip:+ SOCKMAP_SKIP=$skip}" -- \
		"$TOP/guest/run-selftests.sh" "$tests" "$results" sockmap >/dev/null 2>&1
	if "$TOP/scripts/selftests-summary.py" "$results" >"$results/summary" 2>&1; then
		echo "ok   sockmap selftests ($(tail -1 "$results/summary")): $2"
	else
		echo "FAIL sockmap selftests: $2 (results: $results)"
		cat "$results/summary"
		return 1
	fi
}

git -C "$tree" checkout -q --detach base
kernel_configure "$tree" "$out" bench
log "base: building, and W=1/sparse warnings of the touched files"
kmake "$tree" "$out" -s bzImage >"$out/build.log" 2>&1 || die "the base does not build (log: $out/build.log)"
warnings >"$out/warnings.base"

for c in $(git -C "$SERIES_TREE" rev-list --reverse base..series); do
	subject=$(git -C "$SERIES_TREE" log -1 --format=%s "$c")
	git -C "$tree" checkout -q --detach "$c"
	log "building: $subject"
	if ! kmake "$tree" "$out" -s bzImage >"$out/build.log" 2>&1; then
		echo "FAIL build: $subject"
		tail -20 "$out/build.log"
		fail=1
		continue
	fi
	grep -E 'warning:' "$out/build.log" && { echo "FAIL build warnings: $subject"; fail=1; }
	warnings >"$out/warnings.new"
	if new=$(comm -13 "$out/warnings.base" "$out/warnings.new") && [ -n "$new" ]; then
		echo "FAIL new W=1/sparse warnings: $subject"
		echo "$new"
		fail=1
	else
		echo "ok   builds, no new W=1/sparse warnings: $subject"
	fi
	files=$(git -C "$SERIES_TREE" diff-tree --no-commit-id --name-only -r "$c" -- '*.c' '*.h' | grep -v '^tools/' || true)
	if [ "${TESTS:-0}" = 1 ] && [ -n "$files" ]; then
		selftests "$c" "$subject" || fail=1
	fi
	if [ -n "$files" ]; then
		kdoc=$(cd "$tree" && scripts/kernel-doc -none $files 2>&1 || true)
		if [ -n "$kdoc" ]; then
			echo "FAIL kernel-doc: $subject"
			echo "$kdoc"
			fail=1
		fi
	fi
done
[ "$fail" -eq 0 ] || die "series checks failed"
log "series checks passed"
