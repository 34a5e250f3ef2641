# Workbench for the sk_msg ingress corking series. `make help` lists targets.
# Everything builds under build/ (ignored by git); patches/ is the product.
#
# Variables: CONFIG=bench|debug|kcsan, VARIANT=vanilla|patched,
# LINUX_SRC=<tarball, tree or git checkout> for another base (make tree);
# make bench: QUICK=1, VARIANTS="vanilla patched", CONFIG only if given.

CONFIG  ?= debug
VARIANT ?= patched
S := scripts

.PHONY: help deps tree export kernel kernels selftests check check-vanilla \
	compare check-all series-check apps tests stress bench clean

help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## check          the test run: deps, debug kernel with the series, sockmap
##                selftests, the real-application check, then a stress run (DURATION=secs, default 120;
##                SEED=n) in the VM with the splat scan; one summary line
check: deps tree
	$(S)/build-kernel.sh debug patched
	$(S)/build-selftests.sh debug patched
	APPS=1 STRESS=$(or $(DURATION),120) STRESS_SEED=$(SEED) \
		$(S)/run-selftests.sh debug patched sockmap

## apps           the real-application check alone (redis, nginx through
##                transparent sockmap acceleration, every byte verified) on
##                CONFIG/VARIANT
apps: deps tree
	$(S)/build-kernel.sh $(CONFIG) $(VARIANT)
	$(S)/run-selftests.sh $(CONFIG) $(VARIANT) apps

## tests          the sockmap selftests and the real-application check on
##                CONFIG/VARIANT (default debug/patched; CONFIG=kcsan runs
##                the debug build's selftests on the KCSAN kernel)
tests: deps tree
	$(S)/build-kernel.sh $(CONFIG) $(VARIANT)
	$(S)/build-kernel.sh debug $(VARIANT)
	$(S)/build-selftests.sh debug $(VARIANT)
	APPS=1 $(S)/run-selftests.sh $(CONFIG) $(VARIANT) sockmap $(VARIANT) debug

## compare        sockmap selftests (the series tree's binaries) on the
##                vanilla and the patched kernel (CONFIG=debug): the tests
##                both have must give the same results
compare: deps tree
	$(S)/compare-selftests.sh $(CONFIG)

## check-all      the whole of test_progs on CONFIG/VARIANT
check-all: deps tree
	$(S)/build-kernel.sh $(CONFIG) $(VARIANT)
	$(S)/build-selftests.sh $(CONFIG) $(VARIANT)
	$(S)/run-selftests.sh $(CONFIG) $(VARIANT) all

## series-check   checkpatch --strict, per-patch build, W=1/sparse, kernel-doc
series-check: deps tree
	$(S)/check-series.sh

## stress         the sockmap stress and fault harness (tests/stress) in the VM
##                on the series' kernel for CONFIG (debug; kcsan: the data-race
##                detector), or KERNEL=bzImage; DURATION=secs (default 120),
##                SEED=n to replay a run, FAIL_ALLOC=pct to fail that share of
##                the writers' sk_msg and page allocations (fault injection)
stress: deps
	$(if $(KERNEL),,$(S)/tree.sh ensure && $(S)/build-kernel.sh $(CONFIG) patched)
	$(S)/stress.sh $(if $(KERNEL),--kernel $(KERNEL),--config $(CONFIG)) \
		$(if $(DURATION),--duration $(DURATION)) $(if $(SEED),--seed $(SEED)) \
		$(if $(FAIL_ALLOC),-- --fail-alloc $(FAIL_ALLOC))

## bench          vanilla vs patched benchmark (bench kernels, booted
##                alternately): results/<date>/; QUICK=1: one size, one
##                repetition, build/results/bench-quick/ (a smoke test);
##                CONFIG=debug on the command line: the debug kernels (the
##                bench config otherwise, whatever CONFIG defaults to);
##                VARIANTS=patched or =vanilla: that kernel alone, no
##                comparison (CI: QUICK=1 CONFIG=debug VARIANTS=patched)
bench: deps tree
	$(S)/deps.sh bench
	$(S)/bench.sh $(if $(QUICK),--quick) \
		$(if $(filter command line,$(origin CONFIG)),--config $(CONFIG)) \
		$(if $(VARIANTS),--variants "$(VARIANTS)")

## deps           install the Debian packages the tests need (root);
##                make bench adds the benchmark's
deps:
	$(S)/deps.sh

## tree           build/linux: the base (LINUX_SRC, default the pinned 7.3.4
##                tarball) with patches/ applied, unless already current
tree:
	$(S)/tree.sh ensure

## export         write the series tree's commits back to patches/
export:
	$(S)/tree.sh export

## kernel         build CONFIG/VARIANT (default debug/patched)
kernel: tree
	$(S)/build-kernel.sh $(CONFIG) $(VARIANT)

## kernels        build all four kernels
kernels: tree
	for c in bench debug; do for v in vanilla patched; do \
		$(S)/build-kernel.sh $$c $$v || exit 1; done; done

## selftests      build the BPF selftests for CONFIG/VARIANT
selftests: kernel
	$(S)/build-selftests.sh $(CONFIG) $(VARIANT)

## clean          remove build/ (the kernel trees and all outputs)
clean:
	rm -rf build
