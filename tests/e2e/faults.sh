#!/usr/bin/env bash
# End to end: the pool's own faults never reach the program (issue 9).
# Every driver entry point the pool uses for its own work is made to fail
# (FAKECUDA_FAIL): once at its Nth call (NAME#N), and from its Nth call on
# (NAME@N). The trainer runs under the shim in three shapes: pooling with
# hits and captures on the legacy stream from a pinned source (events,
# waits, the gather kernel, the pinned-source check), synchronous copies
# (cudaMemcpy: the pool's own waiting), and memory pressure (a mid-run
# allocation that fits only if the pool frees slabs). Every run must exit 0
# with every byte verified, and the shim's counters must agree with the
# emulated device's (requested == h2d + served, h2d == the device's bytes).
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=20
ROW=3072

# run NAME SPEC SHAPE: one trainer run with FAKECUDA_FAIL=SPEC.
run() {
	local name=$1 spec=$2 shape=$3 args envs=()
	case $shape in
	pool) args="--samples 240 --row $ROW --batch 24 --epochs 3"
	      envs=(VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M) ;;
	sync) args="--samples 240 --row $ROW --batch 24 --epochs 3 --sync"
	      envs=(VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M) ;;
	oom)  args="--samples 4000 --row $ROW --batch 200 --epochs 3 --alloc-mid 52M@3"
	      envs=(VRAMPOOL_BUDGET=40M FAKECUDA_MEM=64M) ;;
	esac
	# shellcheck disable=SC2086
	env VRAMPOOL_LAYOUT=$ROW "${envs[@]}" FAKECUDA_FAIL="$spec" LD_PRELOAD="$SHIM" \
		VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		"$TRAINER" $args >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	if [ $rc -ne 0 ] || ! grep -q 'verified OK' "$TMP/$name.out"; then
		echo "$spec ($shape): exit $rc"
		tail -n 4 "$TMP/$name.out" "$TMP/$name.err"
		return 1
	fi
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$name.json" "$TMP/$name.fake.json" ||
		{ echo "$spec ($shape): counters disagree"; return 1; }
}

# sweep SHAPE NAME...: each name failing once at calls 1..3 and from call 2
# on (SWEEP_ONCE=1: once only: a free that always fails cannot free).
sweep() {
	local shape=$1 fn n bad=0 kinds=("#1" "#2" "#3" "@2"); shift
	[ -n "${SWEEP_ONCE:-}" ] && kinds=("#1" "#2" "#3")
	for fn in "$@"; do
		for n in "${kinds[@]}"; do
			run "$shape-$fn-${n:1}${n:0:1}" "$fn$n" "$shape" || bad=1
		done
	done
	return $bad
}

POOL_CALLS="cuMemAlloc_v2 cuMemGetInfo_v2 cuEventCreate cuEventRecord cuEventQuery
	cuStreamWaitEvent cuLaunchHostFunc cuLaunchKernel cuModuleLoadData cuModuleGetFunction
	cuMemsetD32Async cuMemcpyDtoHAsync_v2 cuStreamCreate cuStreamQuery cuStreamIsCapturing
	cuPointerGetAttributes cuCtxGetCurrent cuCtxSetCurrent cuCtxGetId cuThreadExchangeStreamCaptureMode
	cuEventElapsedTime_v2"
SYNC_CALLS="cuStreamSynchronize cuEventSynchronize cuEventRecord cuCtxSynchronize cuLaunchKernel"
OOM_CALLS="cuCtxSynchronize cuMemGetInfo_v2 cuStreamSynchronize"

# shellcheck disable=SC2086
check "faults in the pool's own calls while pooling never reach the program" sweep pool $POOL_CALLS
# shellcheck disable=SC2086
check "faults in the pool's own waiting for cudaMemcpy never reach the program" sweep sync $SYNC_CALLS
# shellcheck disable=SC2086
check "faults while giving memory back never make the program's allocation fail" sweep oom $OOM_CALLS
sweep_once() { SWEEP_ONCE=1 sweep "$@"; }
check "a free that fails once while giving memory back is tried again" sweep_once oom cuMemFree_v2

without_kernel() {
	local bad=0 fn
	for fn in cuMemcpyBatchAsync_v2 cuMemcpyDtoDAsync_v2 cuStreamCreate; do
		FAKECUDA_KERNEL=none run "nokernel-$fn" "$fn#2" pool || bad=1
		FAKECUDA_KERNEL=none run "nokernel-$fn-on" "$fn@2" pool || bad=1
	done
	return $bad
}
check "without the kernel, faults in batched copies never reach the program" without_kernel

# A failed free is not counted as evicted, and a failed context
# synchronisation during reclaim still frees memory by waiting on the
# streams the pool used: the allocation succeeds.
reclaim_details() {
	run reclaim-sync "cuCtxSynchronize@1" oom || return 1
	[ "$(jget "$TMP/reclaim-sync.json" pool.evictions)" -ge 1 ] || { echo "nothing evicted"; return 1; }
	run reclaim-free "cuMemFree_v2#1" oom || return 1
	local ev slabs
	ev=$(jget "$TMP/reclaim-free.json" pool.evictions)
	slabs=$(jget "$TMP/reclaim-free.json" pool.slabs)
	[ "$ev" -ge 1 ] || { echo "nothing evicted after one failed free"; return 1; }
	[ "$(jget "$TMP/reclaim-free.json" pool.faults)" -ge 1 ] || { echo "the failed free was not counted"; return 1; }
	echo "evictions $ev, slabs left $slabs"
}
check "a failed free is not counted and a failed context sync still frees memory" reclaim_details

# Transient faults are transient: a slab allocation and the probe that
# fail once are tried again, and the pool then works.
transient() {
	run tr-alloc "cuMemAlloc_v2#1" pool || return 1
	[ "$(jget "$TMP/tr-alloc.json" rows.hits)" -gt 0 ] || { echo "a failed slab allocation disabled the pool"; return 1; }
	run tr-probe "cuMemGetInfo_v2#1" pool || return 1
	[ "$(jget "$TMP/tr-probe.json" rows.hits)" -gt 0 ] || { echo "a failed probe disabled the pool"; return 1; }
	[ "$(jget "$TMP/tr-probe.json" probe.decided)" = true ]
}
check "a slab allocation or probe that fails once is retried and the pool then serves" transient
