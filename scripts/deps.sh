#!/usr/bin/env bash
# Install what the workbench needs from Debian's packages (run as root):
#   deps.sh          what the tests need (make check and the others)
#   deps.sh bench    that and what the benchmark needs
. "$(dirname "$0")/lib.sh"

pkgs=(
	# kernel build
	build-essential flex bison bc libelf-dev libssl-dev dwarves ccache cpio kmod python3 git
	# checks on the series (checkpatch's SPDX check needs ply and GitPython;
	# b4 takes each series from a mailbox as its recipients would)
	sparse python3-ply python3-git b4
	# BPF selftests
	clang-22 llvm-22 lld-22 rsync openssl libcap-dev libzstd-dev zlib1g-dev pkg-config
	# the stress harness (tests/stress)
	libbpf-dev
	# the real-application check (tests/apps) and its loader (bench/)
	bpftool redis-server python3-redis nginx-light curl
	# guest
	qemu-system-x86 busybox-static iproute2
	# the whole of test_progs (make compare-all) pings
	iputils-ping
)
# The benchmark: workloads, our BPF loader, plots.
[ "${1:-}" != bench ] || pkgs+=(iperf3 sockperf redis-tools wrk python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	log "deps: all installed"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || die "need root to install: ${missing[*]}"
log "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "deps: done"
