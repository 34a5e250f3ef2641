# Workbench for the sk_msg ingress corking series. `make help` lists targets.
# Everything builds under build/ (ignored by git); patches/ is the product.
#
# Variables: CONFIG=bench|debug|kcsan|ci, VARIANT=vanilla|patched|anchor (the
# published earlier posting, from ../shared/anchor, for comparison only),
# LINUX_SRC=<tarball, tree or git checkout> for another base (make tree);
# make bench: QUICK=1, VARIANTS="vanilla patched", CONFIG only if given;
# make compare: VARIANTS="vanilla anchor patched".

CONFIG  ?= debug
VARIANT ?= patched
S := scripts
# The CONFIG/VARIANT kernel, where scripts/build-kernel.sh builds it (a shell word).
bzimage = "$$(bash -c '. $(S)/lib.sh && out_for $(VARIANT) $(CONFIG)')/arch/x86/boot/bzImage"

.PHONY: help deps tree export kernel kernels selftests check check-vanilla \
	compare compare-all check-all series-check apps tests stress fuzz bench results-md \
	lint clean

help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## check          the test run: deps, debug kernel with the series, sockmap
##                selftests, the real-application check, then a stress run (DURATION=secs, default 120;
##                SEED=n) and the sequence tester (the seeds of tests/fuzz/check-seeds, one random
##                seed, FUZZ_SECS=n: more up to n s, the kept regression lists) in the VM with the splat
##                scan; one summary line
check: deps tree
	$(S)/build-kernel.sh debug patched
	$(S)/build-selftests.sh debug patched
	APPS=1 STRESS=$(or $(DURATION),120) STRESS_SEED=$(SEED) FUZZ=1 \
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
##                vanilla and the patched kernel (CONFIG=debug): of the tests
##                both have, what passes on vanilla must pass with the series
##                (what only the series passes is listed as fixed); VARIANTS="vanilla
##                anchor patched": on the anchor's kernel too, its results
##                side by side with theirs, reported, not judged; SUITE=all:
##                the whole of test_progs, as BPF CI runs it
compare: deps tree
	$(S)/compare-selftests.sh $(CONFIG) "$(or $(VARIANTS),vanilla patched)" $(or $(SUITE),sockmap)

## compare-all    the whole of test_progs, as BPF CI runs it, on the vanilla
##                and the patched kernel configured as BPF CI configures its
##                VMs (config/ci.config, with module support), compared as
##                make compare does (VARIANTS as there); the guests, one
##                vCPU each, run side by side: about 25 minutes
compare-all: deps tree
	$(S)/compare-selftests.sh ci "$(or $(VARIANTS),vanilla patched)" all

## check-all      the whole of test_progs on CONFIG/VARIANT
check-all: deps tree
	$(S)/build-kernel.sh $(CONFIG) $(VARIANT)
	$(S)/build-selftests.sh $(CONFIG) $(VARIANT)
	$(S)/run-selftests.sh $(CONFIG) $(VARIANT) all

## series-check   checkpatch --strict, per-patch build, W=1/sparse, kernel-doc;
##                TESTS=1: every patch's kernel also runs the sockmap selftests
series-check: deps tree
	TESTS=$(TESTS) $(S)/check-series.sh

## stress         the sockmap stress and fault harness (tests/stress) in the VM
##                on the CONFIG/VARIANT kernel (default debug/patched; kcsan:
##                the data-race detector; VARIANT=anchor: the anchor's), or
##                KERNEL=bzImage; DURATION=secs (default 120), SEED=n to
##                replay a run, FAIL_ALLOC=pct to fail that share of the
##                writers' sk_msg and page allocations (fault injection)
stress: deps $(if $(KERNEL),,tree)
	$(if $(KERNEL),,$(S)/build-kernel.sh $(CONFIG) $(VARIANT))
	$(S)/stress.sh --kernel $(or $(KERNEL),$(bzimage)) \
		$(if $(DURATION),--duration $(DURATION)) $(if $(SEED),--seed $(SEED)) \
		$(if $(FAIL_ALLOC),-- --fail-alloc $(FAIL_ALLOC))

## fuzz           the sequence tester (tests/fuzz) in the VM on the
##                CONFIG/VARIANT kernel (default debug/patched), or KERNEL=bzImage:
##                the kept regression lists, then random seeds for DURATION=secs
##                (default 120) or SEED=n alone; a failing seed is reduced to a
##                short operation list; VARIANTS="vanilla patched": differential,
##                the same seeds on both kernels, their traces compared
fuzz: deps $(if $(KERNEL),,tree)
	$(if $(KERNEL),,for v in $(or $(VARIANTS),$(VARIANT)); do \
		$(S)/build-kernel.sh $(CONFIG) $$v || exit 1; done)
	$(S)/fuzz.sh $(if $(KERNEL),--kernel $(KERNEL),$(foreach v,$(or $(VARIANTS),$(VARIANT)),\
		--kernel "$$(bash -c '. $(S)/lib.sh && out_for $(v) $(CONFIG)')/arch/x86/boot/bzImage")) \
		$(if $(DURATION),--duration $(DURATION)) $(if $(SEED),--seed $(SEED))

## bench          vanilla vs patched benchmark (bench kernels, booted
##                alternately): results/<date>/; QUICK=1: one size, one
##                repetition, build/results/bench-quick/ (a smoke test);
##                CONFIG=debug on the command line: the debug kernels (the
##                bench config otherwise, whatever CONFIG defaults to);
##                VARIANTS=patched or =vanilla: that kernel alone, no
##                comparison (CI: QUICK=1 CONFIG=debug VARIANTS=patched);
##                VARIANTS="vanilla anchor patched": the anchor's kernel
##                too, in the same rotation, compared with both;
##                ONLY=stream (a comma-separated list): those workloads
##                alone, REPS=n boots of each kernel (default 4); PROFILE=1:
##                profile.md, the counted boots' instructions by function
bench: deps tree
	$(S)/deps.sh bench
	$(S)/bench.sh $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY)) $(if $(REPS),--reps $(REPS)) \
		$(if $(filter command line,$(origin CONFIG)),--config $(CONFIG)) \
		$(if $(VARIANTS),--variants "$(VARIANTS)") $(if $(PROFILE),--profile)

## results-md     docs/results.md from results/: a section for each run,
##                its tables rendered from its raw data, with the text of its
##                NOTE.md (scripts/bench-report.py --results-md)
results-md:
	$(S)/bench-report.py --results-md results/ > docs/results.md.tmp
	mv docs/results.md.tmp docs/results.md

## lint           no function in scripts/ or guest/ over 120 lines, no source
##                file in scripts/, guest/, bench/ or tests/ over 800
lint:
	$(S)/check-size.py

## deps           install the Debian packages the tests need (root);
##                make bench adds the benchmark's
deps:
	$(S)/deps.sh

## tree           build/linux: the base (LINUX_SRC, default the pinned 7.3.4
##                tarball) with patches/ applied, unless already current;
##                with anchor in VARIANT or VARIANTS also build/linux-anchor,
##                the base with the anchor (../shared/anchor) applied
tree:
	$(S)/tree.sh ensure
	$(if $(filter anchor,$(VARIANT) $(VARIANTS)),$(S)/tree.sh anchor)

## export         write the series tree's commits back to patches/
export:
	$(S)/tree.sh export

## kernel         build CONFIG/VARIANT (default debug/patched; VARIANT=anchor:
##                the published anchor, for comparison only)
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
