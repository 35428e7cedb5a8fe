#!/usr/bin/env bash
# End to end: the re-entry guard, deterministically (issue 17). Under
# FAKECUDA_RT_VIA_DRIVER=1 the emulated runtime does each copy and
# allocation through driver entry points the shim hands it (its own
# hooks), so every runtime call reaches an interposed entry point again
# from inside the shim: tests/apps/reentry makes a fixed sequence (a
# pass-through copy, a capture, hits, a copy whose gather launch the device
# fails so that one hook delivers twice, a synchronous copy) and the dump
# must count each of its calls once, on the route the program took.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

REENTRY=$B/apps/reentry

# reentry_run NAME ENV...: the program under the shim; files in $TMP/NAME.*
reentry_run() {
	local name=$1; shift
	env FAKECUDA_RT_VIA_DRIVER=1 VRAMPOOL_LAYOUT=3072 VRAMPOOL_SLAB=1M VRAMPOOL_QUIET=1 "$@" \
		LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		timeout 60 "$REENTRY" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] && grep -q '^verified$' "$TMP/$name.out" ||
		{ echo "exit $rc"; tail -n 5 "$TMP/$name.out" "$TMP/$name.err"; return 1; }
}

# asked NAME FIELD: a field of the program's "reentry: ..." line (copies, bytes, allocs).
asked() {
	sed -n "s/^reentry: .*$2 \([0-9]*\).*/\1/p" "$TMP/$1.out"
}

# counted_once NAME: the program's copies, bytes and allocations, each counted once, none as
# a driver call; the runtime really went through the driver's entry points.
counted_once() {
	local name=$1 key want got
	for key in copies.h2d_calls:copies bytes.requested:bytes allocs.calls:allocs; do
		want=$(asked "$name" "${key#*:}")
		got=$(jget "$TMP/$name.json" "${key%:*}")
		[ -n "$want" ] && [ "$got" = "$want" ] || { echo "$name: ${key%:*} $got, the program made $want"; return 1; }
	done
	[ "$(jget "$TMP/$name.json" copies.driver_calls)" = 0 ] ||
		{ echo "$name: driver_calls $(jget "$TMP/$name.json" copies.driver_calls) for a program that calls the runtime only"; return 1; }
	[ "$(jget "$TMP/$name.fake.json" calls.cuMemcpyHtoDAsync_v2)" -ge 4 ] 2>/dev/null &&
		[ "$(jget "$TMP/$name.fake.json" calls.cuMemAlloc_v2)" -ge 2 ] 2>/dev/null ||
		{ echo "$name: the runtime did not go through the driver's entry points"; return 1; }
}

pooled() {
	reentry_run rt-pool VRAMPOOL_BUDGET=64M || return 1
	counted_once rt-pool || return 1
	[ "$(jget "$TMP/rt-pool.fake.json" injected.cuLaunchKernel)" = 1 ] ||
		{ echo "the gather launch fault did not fire"; return 1; }
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/rt-pool.json" "$TMP/rt-pool.fake.json" \
		--expect copies.matched_calls=4 --expect copies.passthrough_calls=1 --expect copies.fallbacks=1 \
		--expect rows.seen=96 --expect rows.hits=32 --expect rows.captured=32
}
check "a runtime that reaches the driver hooks again is counted and pooled once, two deliveries in one hook included" pooled

off() {
	reentry_run rt-off VRAMPOOL=off || return 1
	counted_once rt-off || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/rt-off.json" "$TMP/rt-off.fake.json" --calls \
		--expect pool.state=off --expect copies.matched_calls=0 --expect copies.passthrough_calls=5
}
check "VRAMPOOL=off: a runtime that reaches the driver hooks again is counted once, as the device counts it" off
