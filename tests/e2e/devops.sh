#!/usr/bin/env bash
# End to end: the device work behind one program copy (issue 16, items 3, 4
# and 6). A partial pool on the emulated device with random per-operation
# delays: every copy with hits and scattered misses makes at most two
# device operations that move bytes (tests/apps/opscount reads the
# device's counters around each copy), every byte verifies, and the dump
# agrees with the device's counters (requested == h2d + served, h2d ==
# the device's h2d_bytes) with the gather's table inline or mapped. The
# pinned-source check is queued only behind work queued ahead of the copy.
# The committed PTX assembles for sm_80 and sm_90.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=100
OPSCOUNT=$B/apps/opscount

# ops NAME VAR=VALUE... -- ARGS...: opscount under the shim (3 KiB rows, a
# 1M budget: 341 of 400 rows pooled unless told otherwise); files in $TMP/NAME.*
ops() {
	local name=$1 envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env VRAMPOOL_LAYOUT=3072 VRAMPOOL_BUDGET=1M VRAMPOOL_SLAB=1M "${envs[@]}" LD_PRELOAD="$SHIM" \
		VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		"$OPSCOUNT" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || { cat "$TMP/$name.out" "$TMP/$name.err"; return 1; }
	grep -qx verified "$TMP/$name.out" || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$name.json" "$TMP/$name.fake.json"
}

# field NAME KEY: a number of opscount's line ("max_ops", "split", "whole").
field() {
	awk -v k="$2" '$1 == "opscount:" { for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }' "$TMP/$1.out"
}

# calls NAME FN: how often the shim (or the program) called FN on the device.
calls() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["calls"].get(sys.argv[2], 0))' \
		"$TMP/$1.fake.json" "$2"
}

# at_most_two NAME VAR=VALUE... -- ARGS...: every copy after epoch 1 made at
# most two byte-moving operations, and some were split around their hits.
at_most_two() {
	local name=$1
	ops "$@" || return 1
	cat "$TMP/$name.out"
	[ "$(field "$name" max_ops)" -le 2 ] && [ "$(field "$name" split)" -gt 0 ] &&
		[ "$(jget "$TMP/$name.json" rows.hits)" -gt 0 ]
}

check "a copy with scattered misses makes at most two byte-moving device operations (non-blocking, pinned)" \
	at_most_two nb-pinned -- --stream nonblocking
check "a copy with scattered misses makes at most two byte-moving device operations (non-blocking, pageable)" \
	at_most_two nb-pageable -- --stream nonblocking --pageable
check "a copy with scattered misses makes at most two byte-moving device operations (legacy stream, bridged batch)" \
	at_most_two legacy -- --stream legacy
check "without the kernel, hits and captures are one batch: still at most two operations a copy" \
	at_most_two nokernel FAKECUDA_KERNEL=none -- --stream nonblocking
check "without the kernel on the legacy stream, still at most two operations a copy" \
	at_most_two nokernel-legacy FAKECUDA_KERNEL=none -- --stream legacy

# The legacy stream, which the batched call refuses, without the bridge
# that reaches it (its private stream cannot be made): a copy with
# scattered misses goes whole, one operation, serving nothing.
legacy_whole() {
	ops legacy-whole FAKECUDA_FAIL=cuStreamCreate@2 -- --stream legacy || return 1
	cat "$TMP/legacy-whole.out"
	[ "$(field legacy-whole max_ops)" -eq 1 ] && [ "$(field legacy-whole whole)" -eq 24 ] &&
		[ "$(jget "$TMP/legacy-whole.json" bytes.served_from_pool)" -eq 0 ] &&
		[ "$(calls legacy-whole cuMemcpyBatchAsync_v2)" -eq 0 ]
}
check "on the legacy stream, where the batched call is refused, a copy with scattered misses goes whole" legacy_whole

# A gather of more entries than the kernel's parameter holds (8192 rows of
# 64 bytes, half pooled: about 2000 runs of hits) is one launch, its table
# in mapped memory; the device's counters agree with the dump.
mapped_table() {
	ops mapped VRAMPOOL_LAYOUT=64 VRAMPOOL_BUDGET=512K -- --row 64 --rows 16384 --batch 8192 --epochs 2 || return 1
	cat "$TMP/mapped.out"
	[ "$(field mapped max_ops)" -le 2 ] && [ "$(field mapped split)" -eq 2 ] &&
		[ "$(calls mapped cuMemHostAlloc)" -ge 2 ]
}
check "a gather with more rows than the kernel's parameter holds is one launch, its table mapped" mapped_table

# The pinned-source check: copies that capture rows from a pinned source
# queue it (a host function) only when work is queued ahead of the copy.
pincheck_idle() {
	ops idle -- --epochs 1 || return 1
	[ "$(jget "$TMP/idle.json" rows.captured)" -gt 0 ] && [ "$(calls idle cuLaunchHostFunc)" -eq 0 ]
}
pincheck_busy() {
	local mode
	for mode in nonblocking legacy; do
		ops "busy-$mode" -- --epochs 1 --busy --stream $mode || return 1
		[ "$(jget "$TMP/busy-$mode.json" rows.captured)" -gt 0 ] &&
			[ "$(calls "busy-$mode" cuLaunchHostFunc)" -ge 10 ] || { echo "$mode: no check queued"; return 1; }
	done
	# a pageable source is read during the call: never checked
	ops busy-pageable -- --epochs 1 --busy --pageable || return 1
	[ "$(calls busy-pageable cuLaunchHostFunc)" -eq 0 ]
}
check "the pinned-source check is not queued when the stream is idle" pincheck_idle
check "the pinned-source check is queued when work is queued ahead of the copy" pincheck_busy

# ptxas assembles the committed PTX for the GPUs the pool runs on.
PTXAS=${PTXAS:-${CUDA_HOME:-/usr/local/cuda}/bin/ptxas}
ptx_assembles() {
	local arch
	for arch in sm_80 sm_90; do
		"$PTXAS" -arch=$arch -o "$TMP/gather-$arch.cubin" "$ROOT/shim/device/gather.ptx" ||
			{ echo "ptxas -arch=$arch refused shim/device/gather.ptx"; return 1; }
	done
}
if [ -x "$PTXAS" ]; then
	check "ptxas assembles shim/device/gather.ptx for sm_80 and sm_90" ptx_assembles
else
	echo "SKIP: ptxas assembles shim/device/gather.ptx for sm_80 and sm_90 (no ptxas at $PTXAS)"
fi
