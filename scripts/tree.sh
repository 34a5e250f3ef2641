#!/usr/bin/env bash
# Manage the series tree: build/linux is a git repository whose first commit
# ("base") is the base kernel and whose branch "series" is base + patches/.
#
#   tree.sh create   recreate build/linux from the base and patches/
#   tree.sh ensure   create it unless it is already current
#   tree.sh export   write the commits base..series back to patches/: the
#                    leading ones with Fixes: tags to patches/bpf/, the
#                    rest to patches/bpf-next/
#   tree.sh anchor   create build/linux-anchor unless it is already current:
#                    a worktree of the same repository, the base with the
#                    published anchor (ANCHOR_DIR, default
#                    ../shared/anchor/v4-on-7.3.4) applied on branch
#                    "anchor", for comparison only
#
# LINUX_SRC selects the base: unset for the pinned Linux 7.3.4 tarball, or a
# tarball, a plain kernel tree, or a git checkout (its HEAD is the base).
# The anchor is ported to the pinned base: on another it may not apply.
. "$(dirname "$0")/lib.sh"

STAMP=$BUILD/.series-stamp
# The version "tree.sh export" puts in the subjects of patches/bpf-next/:
# bump it for each posting (the fixes for bpf are a first posting).
SERIES_VERSION=v7
ANCHOR_STAMP=$BUILD/.anchor-stamp

# What the series tree is made from, as the stamp records it: the base (its
# real path, and its commit if it is a git checkout), then the patches (not
# the cover letter, whose text changes nothing in the tree), then the tree's
# HEAD once they are applied.
want_base() {
	local src=${LINUX_SRC:-$BASE_TARBALL}
	{
		realpath -m "$src"
		[ ! -d "$src/.git" ] || git -C "$src" rev-parse HEAD
	} | sha256sum | cut -d' ' -f1
}
want_patches() {
	series_patches | while read -r f; do cat "$f"; done | sha256sum | cut -d' ' -f1
}
write_stamp() {
	{ want_base; want_patches; git -C "$SERIES_TREE" rev-parse HEAD; } >"$STAMP"
}

import_base() {
	local src=${LINUX_SRC:-$BASE_TARBALL}
	# Worktrees of the old repository go with it.
	rm -rf "$SERIES_TREE" "$VANILLA_TREE" "$ANCHOR_TREE" "$BUILD/linux-bisect"
	mkdir -p "$BUILD"
	if [ -d "$src/.git" ] || git -C "$src" rev-parse --git-dir >/dev/null 2>&1 && [ -d "$src" ]; then
		log "base: git checkout $src ($(git -C "$src" rev-parse --short HEAD))"
		git clone -q --no-checkout "$src" "$SERIES_TREE"
		git -C "$SERIES_TREE" checkout -q -B series "$(git -C "$src" rev-parse HEAD)"
	else
		mkdir -p "$SERIES_TREE"
		if [ -d "$src" ]; then
			log "base: plain tree $src"
			cp -a "$src"/. "$SERIES_TREE"/
		else
			[ -f "$src" ] || die "no base at $src"
			if [ "$src" = "$BASE_TARBALL" ]; then
				(cd "$(dirname "$BASE_SUMS")" && sha256sum --quiet -c "$BASE_SUMS") ||
					die "pinned base tarball fails its sha256 check"
			fi
			log "base: tarball $src"
			tar -xf "$src" -C "$SERIES_TREE" --strip-components=1
		fi
		log "base: committing the tree"
		git -C "$SERIES_TREE" init -q -b series
		# No background repack of ~90k loose objects competing with the build.
		git -C "$SERIES_TREE" config gc.auto 0
		git -C "$SERIES_TREE" add -A -f .
		(
			while read -r kv; do export "${kv?}"; done <<<"$GIT_BASE_ENV"
			git -C "$SERIES_TREE" commit -q -m "base: $(basename "$src")"
		)
	fi
	git -C "$SERIES_TREE" tag -f base >/dev/null
	# Build outputs sit inside the trees (see lib.sh); keep git blind to them.
	# (git init without templates, as on some machines, makes no info/.)
	local info
	info="$(git -C "$SERIES_TREE" rev-parse --git-common-dir)/info"
	mkdir -p "$info"
	echo "/out-*/" >>"$info/exclude"
	git -C "$SERIES_TREE" worktree add -q --detach "$VANILLA_TREE" base
}

apply_series() {
	local series
	mapfile -t series < <(series_patches)
	log "applying ${#series[@]} patches"
	am_committer
	[ ${#series[@]} -eq 0 ] || git -C "$SERIES_TREE" am -q "${series[@]}"
	git -C "$SERIES_TREE" log --oneline base..series >&2
}

create() {
	import_base
	apply_series
	write_stamp
	log "series tree ready: $SERIES_TREE"
}

# The tree is current, or made so: patches/ applied again on the same base
# in place (only the files the series touches change, so the build outputs
# stay and builds remain incremental), or the whole tree made anew for
# another base.
ensure() {
	local base='' patches='' head=''
	[ ! -f "$STAMP" ] || { read -r base; read -r patches; read -r head; } <"$STAMP"
	if [ -z "$head" ] || [ ! -d "$SERIES_TREE/.git" ] || [ "$base" != "$(want_base)" ]; then
		create
		return
	fi
	[ "$patches" != "$(want_patches)" ] || { log "series tree is current"; return; }
	# Applying them again is safe only if nobody worked in the tree.
	if [ "$(git -C "$SERIES_TREE" rev-parse HEAD)" != "$head" ] ||
		[ -n "$(git -C "$SERIES_TREE" status --porcelain)" ]; then
		die "patches/ changed and $SERIES_TREE has work of its own: export it or remove the tree"
	fi
	log "patches/ changed: applying them again on the base"
	git -C "$SERIES_TREE" checkout -q -B series base
	apply_series
	write_stamp
}

# The last of the fixes that start base..series, which go to the bpf
# tree: commits that carry a Fixes: tag, and the selftests/bpf commits
# that test them (after the first fix). Prints "base" if the series
# starts with no fix.
last_fix() {
	local c last=base
	for c in $(git -C "$SERIES_TREE" rev-list --reverse base..series); do
		git -C "$SERIES_TREE" log -1 --format=%B "$c" | grep -q '^Fixes: ' ||
			{ [ "$last" != base ] && git -C "$SERIES_TREE" log -1 --format=%s "$c" |
				grep -q '^selftests/bpf: '; } || break
		last=$c
	done
	echo "$last"
}

# export_one DIR PREFIX RANGE: write RANGE as patches/DIR with its cover
# letter, addressed as scripts/get_maintainer.pl says, keeping the old cover
# letter's subject and text (the shortlog and diffstat are made anew).
# --base=base: the bpf-next series names the fixes it applies on as
# prerequisite patches.
export_one() {
	local dir=$TOP/patches/$1 tmp addr
	tmp=$(mktemp -d)
	git -C "$SERIES_TREE" format-patch -q -o "$tmp/plain" "$3"
	mapfile -t addr < <(recipients to "$tmp"/plain/*.patch; recipients cc "$tmp"/plain/*.patch)
	git -C "$SERIES_TREE" format-patch -q --cover-letter --base=base "${addr[@]}" \
		--subject-prefix="$2" -o "$tmp" "$3"
	rm -rf "$tmp/plain"
	if [ -f "$dir/0000-cover-letter.patch" ]; then
		python3 "$TOP/scripts/cover-merge.py" "$dir/0000-cover-letter.patch" \
			"$tmp/0000-cover-letter.patch"
	fi
	mkdir -p "$dir"
	rm -f "$dir"/*.patch
	mv "$tmp"/*.patch "$dir/"
	rmdir "$tmp"
	log "exported $(ls "$dir"/*.patch | wc -l) files to patches/$1"
}

export_series() {
	local fix
	[ -z "$(git -C "$SERIES_TREE" status --porcelain)" ] || die "uncommitted changes in $SERIES_TREE"
	fix=$(last_fix)
	[ "$fix" != base ] || die "no fixes at the start of the series (commits with Fixes: tags)"
	export_one bpf "PATCH bpf" "base..$fix"
	export_one bpf-next "PATCH bpf-next $SERIES_VERSION" "$fix..series"
	write_stamp
}

# What the anchor tree is made from: the base commit and the anchor's
# patches (want_anchor_stamp PATCH...).
want_anchor_stamp() {
	{
		git -C "$SERIES_TREE" rev-parse base
		cat "$@"
	} | sha256sum | cut -d' ' -f1
}

# The anchor tree: a worktree of the series repository, moved back to the
# base and the anchor applied again when either changed; its build outputs
# stay. Nobody works in it: the anchor is compared, not improved.
anchor() {
	local patches stamp='' head=''
	[ -d "$SERIES_TREE/.git" ] || die "no series tree: run 'make tree' first"
	mapfile -t patches < <(compgen -G "$ANCHOR_DIR/*.patch" | sort)
	[ ${#patches[@]} -gt 0 ] || die "no anchor patches (*.patch) in $ANCHOR_DIR (ANCHOR_DIR)"
	[ ! -f "$ANCHOR_STAMP" ] || { read -r stamp; read -r head; } <"$ANCHOR_STAMP"
	# A worktree left from an earlier series tree is not one of this one's.
	if [ "$(git_common "$ANCHOR_TREE")" = "$(git_common "$SERIES_TREE")" ]; then
		if [ "$stamp" = "$(want_anchor_stamp "${patches[@]}")" ] &&
			[ "$head" = "$(git -C "$ANCHOR_TREE" rev-parse HEAD)" ]; then
			log "anchor tree is current"
			return
		fi
		[ -z "$(git -C "$ANCHOR_TREE" status --porcelain)" ] ||
			die "$ANCHOR_TREE has changes of its own: remove them or the tree"
	else
		rm -rf "$ANCHOR_TREE"
		git -C "$SERIES_TREE" worktree prune
		git -C "$SERIES_TREE" worktree add -q --detach "$ANCHOR_TREE" base
	fi
	git -C "$ANCHOR_TREE" checkout -q -B anchor base
	log "anchor: applying ${#patches[@]} patches from $ANCHOR_DIR"
	am_committer
	if ! git -C "$ANCHOR_TREE" am -q "${patches[@]}"; then
		git -C "$ANCHOR_TREE" am --abort
		die "the anchor's patches ($ANCHOR_DIR) do not apply to the base of" \
			"$SERIES_TREE ('$(git -C "$SERIES_TREE" log -1 --format=%s base)'):" \
			"they are ported to the pinned Linux 7.3.4, not to another LINUX_SRC"
	fi
	git -C "$ANCHOR_TREE" log --oneline base..anchor >&2
	{ want_anchor_stamp "${patches[@]}"; git -C "$ANCHOR_TREE" rev-parse HEAD; } >"$ANCHOR_STAMP"
	log "anchor tree ready: $ANCHOR_TREE"
}

case ${1:-} in
create) create ;;
ensure) ensure ;;
export) export_series ;;
anchor) anchor ;;
*) die "usage: $0 create|ensure|export|anchor" ;;
esac
