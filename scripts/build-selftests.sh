#!/usr/bin/env bash
# Build the BPF selftests we run from a tree:
#   build-selftests.sh CONFIG VARIANT [TARGET...]
# TARGETs default to test_progs, test_sockmap and bench.
# Uses the tree's own tools/testing/selftests/bpf/Makefile with clang-22,
# against the BTF of the kernel built for CONFIG/VARIANT. Output goes to
# out-CONFIG/selftests in that tree; make keeps it incremental.
. "$(dirname "$0")/lib.sh"

config=${1:?config: bench or debug}
variant=${2:?variant: vanilla, patched or anchor}
tree=$(tree_for "$variant")
kout=$(out_for "$variant" "$config")
out=$kout/selftests
[ -f "$kout/vmlinux" ] || die "no kernel at $kout: build it first"

shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(test_progs test_sockmap bench)
export PATH=/usr/lib/llvm-22/bin:$PATH
command -v clang >/dev/null || die "clang-22 is missing (make deps)"
setup_ccache
# Not here: with a base dir ccache writes relative paths into the .d files,
# which the selftests' sub-makes then resolve from another directory, and
# incremental builds fail with "No rule to make target".
unset CCACHE_BASEDIR

mkdir -p "$out"
log "selftests $config/$variant: building ${targets[*]} in $out"
start=$SECONDS
# The test modules (bpf_testmod.ko and friends) build against the kernel
# only if it has module support (config/ci.config); the bench and debug
# kernels have none, and BPF_STRICT_BUILD=0 skips them there: none of the
# sockmap tests uses them.
if ! make -C "$tree/tools/testing/selftests/bpf" -j"$JOBS" \
	OUTPUT="$out" VMLINUX_BTF="$kout/vmlinux" KBUILD_OUTPUT="$kout" BPF_STRICT_BUILD=0 \
	CC="ccache gcc" HOSTCC="ccache gcc" CLANG="ccache clang" "${targets[@]/#/$out/}" >"$out/build.log" 2>&1; then
	grep -E 'error|Error' "$out/build.log" | head -30 >&2
	die "selftests build failed (log: $out/build.log)"
fi
log "selftests $config/$variant: done in $((SECONDS - start))s"
