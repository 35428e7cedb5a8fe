#!/usr/bin/env bash
# Two contexts on one device (issue 18): the primary context and one made
# with cuCtxCreate, the same rows uploaded in both (build/apps/twoctx). The
# emulated device refuses, and counts (ctx_refusals), any copy, memset or
# gather launch that touches another context's memory, as a driver does;
# so a row served across contexts cannot pass unseen: the device refuses
# it, and a refusal the shim did not fall back from shows as wrong bytes.
source "$(dirname "$0")/lib.sh"
APP=$B/apps/twoctx
ROW=3072
ARGS=(--samples 512 --row $ROW --batch 64 --epochs 6 --seed 3)
# A stated link: the cost ledger pools whatever this machine's speed.
POOL=(VRAMPOOL_LAYOUT=$ROW VRAMPOOL_LINK_GBPS=1 VRAMPOOL_SLAB=1M)

# run NAME ENV... -- ARGS...: twoctx with a device report; files $TMP/NAME.*
run() {
	local name=$1; shift
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env FAKECUDA_REPORT="$TMP/$name.fake.json" "${envs[@]}" "$APP" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] && grep -qx 'verified OK' "$TMP/$name.out" ||
		{ echo "$name: exit $rc"; tail -n 8 "$TMP/$name.out" "$TMP/$name.err"; return 1; }
}

h2d() { sed -n "s/^epoch $2 .* device_h2d \([0-9]*\)$/\1/p" "$TMP/$1.out"; }
fake() { jget "$TMP/$1.fake.json" "$2"; }

without_shim() {
	local m
	for m in alternate phases; do
		run "bare-$m" -- --mode $m "${ARGS[@]}" || return 1
		[ "$(fake "bare-$m" ctx_refusals)" = 0 ] || { echo "$m: the program itself crossed contexts"; return 1; }
	done
}
check "twoctx without the shim: both contexts verify every batch and stay in their own memory" without_shim

# Primary context for epochs 1-3, the created one for 4-6: the pool fills in
# the first; in the second nothing it holds may serve.
phases() {
	run phases LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/phases.json" "${POOL[@]}" -- --mode phases "${ARGS[@]}" ||
		return 1
	cat "$TMP/phases.out"
	[ "$(h2d phases 3)" = 0 ] || { echo "the pool did not serve epoch 3 in the primary context"; return 1; }
	[ "$(h2d phases 4)" = $((512 * ROW)) ] ||
		{ echo "epoch 4, the first in the created context: $(h2d phases 4) bytes crossed"; return 1; }
	[ "$(fake phases kernel_faults)" = 0 ] || { echo "a gather launch touched another context"; return 1; }
	# only epochs 2 and 3 (primary, repeats) can have been served
	[ "$(jget "$TMP/phases.json" bytes.served_from_pool)" -le $((2 * 512 * ROW)) ] || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/phases.json" "$TMP/phases.fake.json"
}
check "the shim never serves a row across contexts: all pooled in the primary context, every byte crosses at the switch, every batch verified" \
	phases

alternate() {
	run alt LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/alt.json" "${POOL[@]}" -- --mode alternate "${ARGS[@]}" || return 1
	echo "device refusals: $(fake alt ctx_refusals), served: $(jget "$TMP/alt.json" bytes.served_from_pool)"
	[ "$(fake alt ctx_refusals)" = 0 ] && [ "$(fake alt kernel_faults)" = 0 ] &&
		python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/alt.json" "$TMP/alt.fake.json"
}
check "contexts alternating batch by batch: every batch verified, no cross-context access, the stats match the device" \
	alternate

# The pool serves the device's primary context only: a copy made while the
# program's own context is current passes through (no_context) with no
# device call of the pool's, so the device refuses nothing (issue 18; before,
# the captures there touched slabs of the primary context and fell back).
no_cross_calls() {
	echo "device refusals: $(fake phases ctx_refusals), shim faults: $(jget "$TMP/phases.json" pool.faults)"
	[ "$(fake phases ctx_refusals)" = 0 ] && [ "$(jget "$TMP/phases.json" pool.faults)" = 0 ] &&
		[ "$(jget "$TMP/phases.json" copies.passthrough_reasons.no_context)" -gt 0 ]
}
check "the shim makes no device call across contexts: the created context's copies pass through (no_context)" \
	no_cross_calls
