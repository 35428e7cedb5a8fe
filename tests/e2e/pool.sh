#!/usr/bin/env bash
# End to end: the VRAM sample pool (issue 4). The trainer reshuffles over
# several epochs on the emulated device with jitter; every byte must verify,
# the device's own counters must show the pooled rows no longer crossing,
# and requested == h2d + served_from_pool with h2d equal to the device's
# h2d_bytes in every run.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=100
ROW=3072
N=400
BATCH=32
DATA=$((N * ROW))
BASE="--samples $N --row $ROW --batch $BATCH --epochs 4"

# pool_run NAME BIN ENV... -- ARGS...: the trainer under the shim; files in $TMP/NAME.*
pool_run() {
	local name=$1 bin=$2; shift 2
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_SLAB=1M "${envs[@]}" LD_PRELOAD="$SHIM" \
		VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		"$bin" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] || { echo "exit $rc"; tail -n 5 "$TMP/$name.out" "$TMP/$name.err"; }
	return $rc
}

# epoch_h2d NAME E: the device's host-to-device bytes during epoch E.
epoch_h2d() {
	sed -n "s/^epoch $2 .* device_h2d \([0-9]*\).*/\1/p" "$TMP/$1.out"
}

invariants() {
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$1.json" "$TMP/$1.fake.json" "${@:2}"
}

# full_budget NAME BIN ARGS...: a budget that covers the dataset; from epoch 2
# on the rows no longer cross (>= 99% fewer bytes than without the pool).
full_budget() {
	local name=$1 bin=$2; shift 2
	local N=${SAMPLES:-$N}
	local DATA=$((N * ROW))
	pool_run "$name" "$bin" VRAMPOOL_BUDGET=64M -- $BASE --samples $N "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	invariants "$name" --expect rows.hits=$((3 * N)) --expect rows.captured=$N \
		--expect rows.pooled=$N --expect bytes.captured=$DATA || return 1
	local labels=$((N * 8)) e got
	for e in 2 3 4; do
		got=$(epoch_h2d "$name" $e)
		# only the labels (not laid out) still cross: well under 1% of off
		[ "$got" = "$labels" ] || { echo "epoch $e device_h2d $got, expected $labels"; return 1; }
		[ $((got * 100)) -le $(((DATA + labels) * 1)) ] || return 1
	done
}

for stream in legacy ptds nonblocking "multi --streams 3" "threads --threads 3"; do
	for mem in pinned pageable; do
		# shellcheck disable=SC2086
		check "the pool serves every row from epoch 2 on and verifies: --stream $stream --$mem" \
			full_budget "full-${stream%% *}-$mem" "$TRAINER" --stream $stream --$mem
	done
done
check "the pool serves every row with cudaMemcpy (--sync)" full_budget full-sync "$TRAINER" --sync
check "the pool serves every row with cudaMemcpyDefault" full_budget full-default "$TRAINER" --copy-api memcpy-default
check "the pool serves every row in the _ptsz build" full_budget full-ptsz "$TRAINER_PTSZ" --stream legacy
check "the pool serves every row in the _ptsz build with _ptds cudaMemcpy" full_budget full-ptds "$TRAINER_PTSZ" --sync
SAMPLES=407 check "the pool serves every row with a partial last batch" \
	full_budget full-partial "$TRAINER" --pageable

# Duplicates in the dataset: fewer distinct rows than samples are captured.
dup_captures_distinct() {
	pool_run dup "$TRAINER" VRAMPOOL_BUDGET=64M -- $BASE --dup 25 || return 1
	grep -q 'verified OK' "$TMP/dup.out" || return 1
	local captured
	captured=$(jget "$TMP/dup.json" rows.captured)
	[ "$captured" -lt $N ] && [ "$captured" -ge $((N * 70 / 100)) ] || { echo "captured $captured"; return 1; }
	# every later sight of a pooled row is a hit; only repeats in the first
	# epoch seen before their capture was checked (the trainer's pinned
	# source on the legacy stream) or inside one batch are not
	local hits misses
	hits=$(jget "$TMP/dup.json" rows.hits)
	misses=$(jget "$TMP/dup.json" rows.misses)
	[ $((hits + misses)) = $((4 * N)) ] && [ "$hits" -ge $((4 * N - captured - N / 10)) ] ||
		{ echo "hits $hits misses $misses captured $captured"; return 1; }
	invariants dup --expect rows.pooled="$captured"
}
check "duplicate samples are pooled once and served as hits" dup_captures_distinct

# Threads share one pool: a row captured on one thread's stream is served on
# another's, which must wait for the capture (jitter makes a missing wait fail).
threads_share() {
	local i
	for i in 1 2 3; do
		FAKECUDA_JITTER_US=300 pool_run "share$i" "$TRAINER" VRAMPOOL_BUDGET=64M -- \
			--samples 300 --row $ROW --batch 8 --epochs 3 --dup 40 --stream threads --threads 4 --seed $i || return 1
		grep -q 'verified OK' "$TMP/share$i.out" || return 1
		invariants "share$i" --min rows.hits=600 || return 1
	done
}
check "threads share the pool: rows captured on one stream are served on another" threads_share

half_budget() {
	# 1M slabs hold 341 rows of 3072 bytes: a 2M budget holds 682 of 1364 rows
	local n=1364 data=$((1364 * ROW))
	pool_run half "$TRAINER" VRAMPOOL_BUDGET=2M -- --samples $n --row $ROW --batch 62 --epochs 4 || return 1
	grep -q 'verified OK' "$TMP/half.out" || return 1
	invariants half --expect pool.state=full --expect rows.pooled=682 || return 1
	local e got labels=$((n * 8))
	for e in 2 3 4; do
		got=$(( $(epoch_h2d half $e) - labels ))
		# within a few percent of half the data
		[ $((got * 100)) -ge $((data * 47)) ] && [ $((got * 100)) -le $((data * 53)) ] ||
			{ echo "epoch $e data h2d $got of $data"; return 1; }
	done
}
check "with a budget of half the dataset epoch 2 on sends about half" half_budget

# Any budget is honoured: a budget under one slab pools that much (issue 9).
offloaded_weights() {
	# 20 layers of 2 MiB re-uploaded every step; a 20M budget holds 10 of them
	local mib=$((1024 * 1024)) e got
	pool_run weights "$TRAINER" VRAMPOOL_LAYOUT=whole:1M VRAMPOOL_SLAB=64M VRAMPOOL_BUDGET=20M -- \
		--samples 20 --row $((2 * mib)) --batch 1 --epochs 3 || return 1
	grep -q 'verified OK' "$TMP/weights.out" || return 1
	invariants weights --expect pool.budget=$((20 * mib)) --expect pool.bytes=$((20 * mib)) \
		--expect rows.pooled=10 || return 1
	for e in 2 3; do
		got=$(( $(epoch_h2d weights $e) - 20 * 8 ))
		[ "$got" -eq $((10 * 2 * mib)) ] || { echo "step $e sent $got bytes of weights"; return 1; }
	done
}
check "a budget under the slab size pools that much: offloaded weights send half from step 2" offloaded_weights

half_of_48m() {
	# 48 MiB of 3072-byte samples, a 24M budget and the default 64M slab
	local n=16384 data=$((16384 * ROW)) e got
	pool_run half48 "$TRAINER" VRAMPOOL_SLAB=64M VRAMPOOL_BUDGET=24M -- \
		--samples $n --row $ROW --batch 256 --epochs 4 || return 1
	grep -q 'verified OK' "$TMP/half48.out" || return 1
	invariants half48 --expect pool.slabs=1 --expect pool.state=full || return 1
	for e in 3 4; do
		got=$(( $(epoch_h2d half48 $e) - n * 8 ))
		[ $((got * 100)) -ge $((data * 40)) ] && [ $((got * 100)) -le $((data * 60)) ] ||
			{ echo "epoch $e sent $got of $data"; return 1; }
	done
}
check "a 48 MiB dataset with a 24M budget sends about half from epoch 3 on" half_of_48m

# Rows of several sizes share one budget: images and masks of a
# segmentation loader (32768 and 8192 bytes per sample, 10 MiB in all).
two_sizes() {
	local n=256 data=$((256 * (32768 + 8192))) e got
	pool_run twosizes "$TRAINER" VRAMPOOL_LAYOUT=32768,8192 VRAMPOOL_SLAB=64M VRAMPOOL_BUDGET=64M -- \
		--samples $n --row 32768 --mask-row 8192 --batch 32 --epochs 4 || return 1
	grep -q 'verified OK' "$TMP/twosizes.out" || return 1
	invariants twosizes --expect pool.slabs=1 --expect rows.pooled=$((2 * n)) || return 1
	for e in 3 4; do
		got=$(( $(epoch_h2d twosizes $e) - n * 8 ))
		[ $((got * 100)) -le $((data * 5)) ] || { echo "epoch $e sent $got of $data"; return 1; }
	done
}
check "images and masks of two row sizes share the budget and both stop crossing" two_sizes

# Priorities: the images (@1) need more than the budget; the masks come
# second. By epoch 3 the images hold the whole budget and no mask is pooled.
priorities() {
	local n=256 mib=$((1024 * 1024)) e got want
	pool_run prio "$TRAINER" VRAMPOOL_LAYOUT=32768@1,8192 VRAMPOOL_SLAB=1M VRAMPOOL_BUDGET=4M -- \
		--samples $n --row 32768 --mask-row 8192 --batch 32 --epochs 4 || return 1
	grep -q 'verified OK' "$TMP/prio.out" || return 1
	invariants prio --min pool.displaced_bytes=1 || return 1
	# 4M holds 128 images: the other 128 images, every mask and the labels cross
	want=$((128 * 32768 + n * 8192 + n * 8))
	for e in 3 4; do
		got=$(epoch_h2d prio $e)
		[ "$got" -eq "$want" ] || { echo "epoch $e sent $got, expected $want"; return 1; }
	done
	[ "$(jget "$TMP/prio.json" pool.bytes)" -eq $((4 * mib)) ]
}
check "rows of a higher priority take the whole budget and lower ones are displaced" priorities

# Host-side random augmentation: rows never repeat. A full pool stands
# down (copies pass straight through) and says why; every byte verifies.
never_repeat() {
	pool_run aug "$TRAINER" VRAMPOOL_BUDGET=1M -- --samples 2000 --row $ROW --batch 40 --epochs 3 --augment -1 || return 1
	grep -q 'verified OK' "$TMP/aug.out" || return 1
	invariants aug --expect pool.state=full --expect bytes.served_from_pool=0 || return 1
	[ "$(jget "$TMP/aug.json" copies.stood_down)" -gt 50 ] || { echo "did not stand down"; return 1; }
	grep -q 'no row repeated .*host-side random augmentation' "$TMP/aug.err"
}
check "rows that never repeat make a full pool stand down and the summary says so" never_repeat

# Augmentation in epochs 1-2 only: from epoch 3 the same rows come back.
# The pool is full of augmented rows that never return; the sampled copies
# see rows repeat without hitting, the pool is emptied, refills with rows
# that do come back and serves them.
repeat_again() {
	pool_run aug1 "$TRAINER" VRAMPOOL_BUDGET=1M VRAMPOOL_VERBOSE=1 -- \
		--samples 2000 --row $ROW --batch 40 --epochs 7 --augment 2 || return 1
	grep -q 'verified OK' "$TMP/aug1.out" || return 1
	invariants aug1 --min rows.hits=1 --expect pool.stood_down=false --min pool.evictions=1 || return 1
	grep -q 'emptied' "$TMP/aug1.err"
}
check "after a phase of unique rows, rows that repeat bring pooling back" repeat_again

auto_probe() {
	pool_run probe "$TRAINER" VRAMPOOL_MARGIN=64M VRAMPOOL_VERBOSE=1 -- $BASE || return 1
	grep -q 'verified OK' "$TMP/probe.out" || return 1
	invariants probe --expect probe.decided=true --expect pool.state=active \
		--expect probe.reserve=$((16 * BATCH * ROW)) --expect probe.margin=$((64 * 1024 * 1024)) || return 1
	grep -q '^vrampool: probe: device 0 has' "$TMP/probe.err" || return 1
	# the first two batches pass by before the probe, then are captured in epoch 2
	[ "$(epoch_h2d probe 3)" = $((N * 8)) ]
}
check "the one-shot probe decides after VRAMPOOL_PROBE_AFTER copies and logs it" auto_probe

dormant_for_good() {
	pool_run dormant "$TRAINER" VRAMPOOL_MARGIN=1T -- $BASE || return 1
	grep -q 'verified OK' "$TMP/dormant.out" || return 1
	invariants dormant --expect probe.decided=true --expect pool.state=dormant \
		--expect bytes.served_from_pool=0 --expect pool.slabs=0
}
check "a probe that leaves less than one slab keeps the pool dormant" dormant_for_good

memory_pressure() {
	local api=$1
	# 64M device; the pool holds the 12M dataset, the trainer's own buffers
	# a few more, so its 52M mid-run allocation fits only if the pool gives
	# memory back.
	pool_run "oom-$api" "$TRAINER" FAKECUDA_MEM=64M VRAMPOOL_BUDGET=40M VRAMPOOL_VERBOSE=1 -- \
		--samples 4000 --row $ROW --batch 50 --epochs 4 --alloc-mid 52M@3 --alloc-api "$api" || return 1
	grep -q 'verified OK' "$TMP/oom-$api.out" || return 1
	invariants "oom-$api" --expect pool.state=latched --min pool.evictions=1 --min pool.oom_retries=1 || return 1
	grep -q 'evicted slab' "$TMP/oom-$api.err"
}
for api in malloc async managed pitch; do
	check "memory pressure ($api): the pool gives slabs back and the allocation succeeds" memory_pressure $api
done

memory_pressure_off_fails() {
	# the same allocation without eviction room (pool disabled): the device
	# says no; the program gets the original error (exit 3), not a new one
	pool_run oomoff "$TRAINER" FAKECUDA_MEM=64M -- --samples 400 --row $ROW --epochs 2 --alloc-mid 80M@2
	[ $? -eq 3 ] && grep -q 'cudaErrorMemoryAllocation' "$TMP/oomoff.out" "$TMP/oomoff.err"
}
check "an allocation that cannot fit even with an empty pool gets the original error" memory_pressure_off_fails

# Faults in the pool's own device work: the program still gets its bytes.
# fault NAME SPEC [VAR=VALUE...] [TRAINER ARGS...]
fault() {
	local name=$1 spec=$2 envs=(); shift 2
	while [ $# -gt 0 ] && [[ $1 == *=* ]]; do envs+=("$1"); shift; done
	pool_run "$name" "$TRAINER" VRAMPOOL_BUDGET=64M FAKECUDA_FAIL="$spec" "${envs[@]}" -- $BASE "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	invariants "$name"
}
check "a failing gather kernel launch on the legacy stream falls back to the plain copy" \
	fault f-kernel cuLaunchKernel@4
check "a failing gather kernel launch on a non-blocking stream falls back to the plain copy" \
	fault f-kernel-nb cuLaunchKernel@4 --stream nonblocking
check "without the kernel, a failing batched gather on the legacy stream falls back to the plain copy" \
	fault f-batch cuMemcpyBatchAsync_v2@3 FAKECUDA_KERNEL=none
check "without the kernel, a failing batched gather on a non-blocking stream falls back" \
	fault f-batch-nb cuMemcpyBatchAsync_v2@3 FAKECUDA_KERNEL=none --stream nonblocking
check "without the kernel, a failing capture copy drops the rows and verifies" \
	fault f-dtod cuMemcpyDtoDAsync_v2@5 FAKECUDA_KERNEL=none
# The gather kernel checks itself before first use: a kernel that gets a
# byte wrong, or a module that does not load, leaves hits to batched copies.
kernel_fallback() {
	local mode=$1
	pool_run "kern-$mode" "$TRAINER" VRAMPOOL_BUDGET=64M FAKECUDA_KERNEL="$mode" VRAMPOOL_VERBOSE=1 -- $BASE || return 1
	grep -q 'verified OK' "$TMP/kern-$mode.out" || return 1
	invariants "kern-$mode" --expect pool.gather="batched copy" --expect pool.gather_launches=0 \
		--expect rows.hits=$((3 * N)) || return 1
	grep -q 'batched copies' "$TMP/kern-$mode.err"
}
check "a gather kernel that fails its self-test leaves hits to batched copies, every byte verified" \
	kernel_fallback broken
check "a gather kernel module that does not load leaves hits to batched copies, every byte verified" \
	kernel_fallback none
kernel_used() {
	pool_run kern-ok "$TRAINER" VRAMPOOL_BUDGET=64M -- $BASE || return 1
	invariants kern-ok --expect pool.gather=kernel --min pool.gather_launches=1
}
check "the gather kernel passes its self-test and serves the hits" kernel_used
check "a failing capture event drops the rows and verifies" fault f-event cuEventRecord@5
check "a failing slab allocation leaves the pool full and verifies" fault f-alloc cuMemAlloc_v2
check "failing stream waits fall back and verify" fault f-wait cuStreamWaitEvent@2
check "everything of the pool's own failing at random still verifies" \
	fault f-random cuLaunchKernel@7,cuMemcpyDtoDAsync_v2@9,cuEventRecord@11,cuStreamWaitEvent@13,cuLaunchHostFunc@5
fallbacks_counted() {
	[ "$(jget "$TMP/f-kernel.json" copies.fallbacks)" -ge 1 ] &&
		[ "$(jget "$TMP/f-kernel-nb.json" copies.fallbacks)" -ge 1 ] &&
		[ "$(jget "$TMP/f-batch.json" copies.fallbacks)" -ge 1 ] &&
		[ "$(jget "$TMP/f-batch-nb.json" copies.fallbacks)" -ge 1 ] &&
		[ "$(jget "$TMP/f-dtod.json" copies.fallbacks)" -ge 1 ]
}
check "fallbacks are counted" fallbacks_counted

graph_capture() {
	VRAMPOOL_LAYOUT=$ROW VRAMPOOL_BUDGET=64M LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/graph.json" \
		FAKECUDA_REPORT="$TMP/graph.fake.json" \
		"$B/apps/graph" >"$TMP/graph.out" 2>"$TMP/graph.err" || { cat "$TMP/graph.out" "$TMP/graph.err"; return 1; }
	# counted at each of its 4 launches, when its bytes cross, as the device counts them
	invariants graph --expect copies.graph_capture=4 || return 1
	# the same counts off and without a layout: every copy the device sees, once
	local m
	for m in off nolayout; do
		env $([ $m = off ] && echo VRAMPOOL=off VRAMPOOL_LAYOUT=$ROW) LD_PRELOAD="$SHIM" \
			VRAMPOOL_STATS="$TMP/graph-$m.json" FAKECUDA_REPORT="$TMP/graph-$m.fake.json" \
			"$B/apps/graph" >"$TMP/graph-$m.out" 2>&1 || { cat "$TMP/graph-$m.out"; return 1; }
		invariants graph-$m --calls || return 1
	done
}
check "a copy captured into a graph is left alone, replays fresh bytes, and is counted at each launch, pool on or off" graph_capture

off_and_on_agree() {
	pool_run ab-off "$TRAINER" VRAMPOOL=off -- $BASE --seed 9 || return 1
	pool_run ab-on "$TRAINER" VRAMPOOL_BUDGET=64M -- $BASE --seed 9 || return 1
	invariants ab-off --expect pool.state=off --calls || return 1
	invariants ab-on || return 1
	[ "$(jget "$TMP/ab-off.json" bytes.requested)" = "$(jget "$TMP/ab-on.json" bytes.requested)" ]
}
check "VRAMPOOL=off and on request the same bytes and both verify" off_and_on_agree

second_device() {
	pool_run dev1 "$TRAINER" FAKECUDA_DEVICES=2 VRAMPOOL_BUDGET=64M -- $BASE --device 1 || return 1
	grep -q 'verified OK' "$TMP/dev1.out" || return 1
	invariants dev1 --expect rows.hits=$((3 * N)) --expect rows.captured=$N
}
check "a pool on the second device serves its rows there" second_device

hostile_rows() {
	# every sample the same bytes, batches of one: one row pooled, every
	# later copy a hit, and still every byte verified
	pool_run same "$TRAINER" VRAMPOOL_BUDGET=64M -- --samples 64 --row $ROW --batch 1 --epochs 3 --dup 100 || return 1
	grep -q 'verified OK' "$TMP/same.out" || return 1
	invariants same --expect rows.captured=1 --min rows.hits=180
}
check "a dataset of one repeated sample is pooled once and verifies" hostile_rows

# Careless and hostile calls: the same errors with and without the shim,
# no crash, and after an eviction-and-retry no error left behind.
bad_calls_same() {
	FAKECUDA_MEM=256M "$B/apps/badcalls" >"$TMP/bad-plain.txt" 2>&1 || return 1
	FAKECUDA_MEM=256M LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=4096 VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M \
		VRAMPOOL_QUIET=1 VRAMPOOL_STATS="$TMP/bad.json" FAKECUDA_REPORT="$TMP/bad.fake.json" \
		"$B/apps/badcalls" >"$TMP/bad-shim.txt" 2>&1 || { cat "$TMP/bad-shim.txt"; return 1; }
	diff "$TMP/bad-plain.txt" "$TMP/bad-shim.txt" || return 1
	invariants bad --expect pool.evictions=1 --expect pool.oom_retries=1 --min rows.hits=1
}
check "bad arguments get the runtime's own errors, and a retried allocation leaves no error" bad_calls_same

# whole:MIN, the form for weights re-uploaded every step: each copy is one
# row, here larger than a slab (a slab of its own size), served every time
# after the first.
whole_rows() {
	LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=whole:1M VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M VRAMPOOL_QUIET=1 \
		VRAMPOOL_STATS="$TMP/whole.json" FAKECUDA_REPORT="$TMP/whole.fake.json" \
		"$B/apps/callbench" --bytes 4194304 --calls 20 --symbol-only >"$TMP/whole.out" 2>&1 || { cat "$TMP/whole.out"; return 1; }
	# 7 rounds of 20 copies of the same 4 MiB
	invariants whole --expect rows.seen=140 --expect rows.captured=1 --expect rows.hits=139 \
		--expect pool.slabs=1 --expect pool.bytes=4194304
}
check "whole:MIN pools a copy larger than a slab as one row and serves its repeats" whole_rows

stats_path_unwritable() {
	LD_PRELOAD="$SHIM" VRAMPOOL_STATS=/nonexistent/dir/s.json "$TRAINER" --samples 64 --epochs 1 \
		>"$TMP/nw.out" 2>"$TMP/nw.err" || return 1
	grep -q 'verified OK' "$TMP/nw.out" || return 1
	# one line, at load (the directory), not repeated when the final write fails
	grep -q "^vrampool: VRAMPOOL_STATS: cannot write in '/nonexistent/dir'" "$TMP/nw.err" &&
		[ "$(grep -c '/nonexistent/dir' "$TMP/nw.err")" = 1 ] || { cat "$TMP/nw.err"; return 1; }
}
check "an unwritable VRAMPOOL_STATS costs one line, never the run" stats_path_unwritable

telemetry() {
	# each API call costs 3 ms (simulated), so the run lasts a few seconds
	pool_run tele "$TRAINER" VRAMPOOL_BUDGET=64M VRAMPOOL_VERBOSE=1 VRAMPOOL_TELEMETRY_S=1 FAKECUDA_CALL_US=3000 -- \
		--samples 256 --row $ROW --batch 32 --epochs 3 || return 1
	grep -q 'verified OK' "$TMP/tele.out" || return 1
	grep -Eq '^vrampool: served [0-9]+/[0-9]+ rows from VRAM \(.* PCIe saved\), [0-9]+ captured, [0-9]+ pooled, pool .*/.*' \
		"$TMP/tele.err" || { cat "$TMP/tele.err"; return 1; }
}
check "under VRAMPOOL_VERBOSE a telemetry line comes every VRAMPOOL_TELEMETRY_S of activity" telemetry

# device_reset NAME [VAR=VALUE...]: the reset app; memory runs out after its last reset
device_reset() {
	local name=$1; shift
	env "$@" LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=4096 VRAMPOOL_BUDGET=16M VRAMPOOL_SLAB=1M VRAMPOOL_QUIET=1 \
		FAKECUDA_MEM=64M VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		"$B/apps/reset" >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; return 1; }
	# both halves captured once and then served (less a first copy passed
	# through without its context id); the slabs of both pools are gone from
	# the gauges (the second retired when memory ran out)
	local passed
	passed=$(jget "$TMP/$name.json" copies.passthrough_reasons.no_context)
	invariants "$name" --expect rows.captured=128 --expect rows.hits=$((384 - 64 * passed)) \
		--expect pool.slabs=0 --expect rows.pooled=0
}
check "after cudaDeviceReset the pool starts over instead of serving freed slabs, and frees none of them" \
	device_reset reset
noid_reset() {
	device_reset reset-noid FAKECUDA_FAIL='cuCtxGetId#1' || return 1
	[ "$(jget "$TMP/reset-noid.json" copies.passthrough_reasons.no_context)" = 1 ]
}
check "a context id query that fails passes the copy, so no reset goes unseen" noid_reset

pinned_changed_late() {
	LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=4096 VRAMPOOL_BUDGET=16M VRAMPOOL_SLAB=1M VRAMPOOL_VERBOSE=1 \
		VRAMPOOL_STATS="$TMP/pinlate.json" FAKECUDA_REPORT="$TMP/pinlate.fake.json" \
		"$B/apps/pinlate" >"$TMP/pinlate.out" 2>&1 || { cat "$TMP/pinlate.out"; return 1; }
	grep -q 'dropped 32 captured rows' "$TMP/pinlate.out" || return 1
	grep -q 'pooled rows of a pinned source were sent host-to-device' "$TMP/pinlate.out" || return 1
	invariants pinlate --min rows.hits=64
}
check "a pinned source changed before the copy ran: captures dropped, pooled rows not served behind queued work, no wait across streams" pinned_changed_late
