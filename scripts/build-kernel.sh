#!/usr/bin/env bash
# Build one kernel: build-kernel.sh CONFIG VARIANT
#   CONFIG   bench | debug | kcsan
#                              (config/base.config, then config/CONFIG.config
#                               and what it names as its base, over tinyconfig)
#   VARIANT  vanilla | patched | anchor
#                              (the base, base + patches/, or base + the
#                               published anchor from ../shared/anchor, for
#                               comparison only: scripts/tree.sh anchor)
# Output: build/linux{-vanilla,,-anchor}/out-CONFIG/{arch/x86/boot/bzImage,vmlinux}.
# Incremental and ccache'd; the full log goes to out-CONFIG/build.log.
. "$(dirname "$0")/lib.sh"

config=${1:?config: bench or debug}
variant=${2:?variant: vanilla, patched or anchor}
tree=$(tree_for "$variant")
out=$(out_for "$variant" "$config")
[ -d "$tree" ] || die "no tree at $tree: run 'make tree VARIANT=$variant' first"

setup_ccache
kernel_configure "$tree" "$out" "$config"

log "kernel $config/$variant: building ($(git -C "$tree" describe --always --tags), -j$JOBS)"
start=$SECONDS
set +e
# With module support (config/ci.config), the modules too: the selftests'
# test modules build against the kernel's Module.symvers.
targets=(bzImage)
! grep -qx 'CONFIG_MODULES=y' "$out/.config" || targets+=(modules)
kmake "$tree" "$out" "${targets[@]}" 2>&1 | tee "$out/build.log" | awk -v start="$(date +%s)" '
	/^  (CC|AS|LD|AR|BTF|GEN)/ { n++ }
	/ (error|Error) / || /error:/ { print > "/dev/stderr" }
	n && n % 200 == 0 && n != last { last = n; printf "  ... %d steps, %ds\n", n, systime() - start > "/dev/stderr"; fflush("/dev/stderr") }'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { tail -30 "$out/build.log" >&2; die "kernel build failed (log: $out/build.log)"; }
log "kernel $config/$variant: done in $((SECONDS - start))s: $out/arch/x86/boot/bzImage"
ccache --show-stats 2>/dev/null | grep -iE 'hits|misses' | head -3 >&2 || true
