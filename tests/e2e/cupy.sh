#!/usr/bin/env bash
# CuPy on the emulated device (issue 10 item 8). CuPy (cupy-cuda13x, pinned
# in scripts/deps.sh, in its own virtual environment) embeds NVIDIA's CUDA
# runtime, which asks the driver for private export tables before its first
# call; the emulated device hands out none, so CuPy itself stops there. This
# script proves that boundary (the same with the shim as without: the shim
# is never the reason), then runs the CuPy upload loop
# (tests/python/cupy_loop.py) over its stand-in, which reaches the driver by
# CuPy's route (dlsym on libcuda.so.1, cuGetProcAddress_v2 with the runtime's
# versions): every byte verified, the pool serving the repeats, the stats
# invariants against the device's own counters, A/B with VRAMPOOL=off. Real
# CuPy runs the loop on a GPU: tests/gpu/cupy_loop.py.
#
# Without the Python test env (scripts/deps.sh could not install it: no
# network) one SKIP line says the test was skipped and why; a network problem
# never fails the suite.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

PYENV=$("$ROOT/scripts/deps.sh" --pyenv)
PY=$PYENV/bin/python
LOOP=$ROOT/tests/python/cupy_loop.py
ROW=3072
ARGS=(--samples 2048 --row $ROW --batch 64 --epochs 4 --ring 3 --seed 5)

if [ ! -x "$PY" ] || ! "$PY" -c 'import cupy, numpy' >/dev/null 2>&1; then
	why="no python test env at $PYENV"
	[ -f "$PYENV.log" ] && why="$why: $(grep -E 'ERROR|Error' "$PYENV.log" | tail -n 1)"
	echo "SKIP: CuPy on the emulated device ($why; scripts/deps.sh installs it)"
	exit 0
fi

# loop NAME ENV... -- ARGS...: the loop with a device report; files in $TMP/NAME.*
loop() { py_loop "$@"; }

# field NAME E KEY: KEY's value on epoch line E of run NAME.
field() {
	awk -v e="$2" -v k="$3" '$1 == "epoch" && $2 == e {
		for (i = 3; i < NF; i++) if ($i == k) print $(i + 1) }' "$TMP/$1.out"
}

# calls NAME API: how often run NAME called API on the device.
calls() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["calls"].get(sys.argv[2], 0))' \
		"$TMP/$1.fake.json" "$2"
}

imports_under_shim() {
	LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=$ROW "$PY" -c 'import cupy, cupyx; print("cupy", cupy.__version__)'
}

# CuPy's first runtime call fails with exit status 3 and the device names
# the table it was asked for; with the shim the failure, and the driver
# look-ups the runtime made on its way there, are the same.
stops_at_export_tables() {
	loop bare -- --backend cupy "${ARGS[@]}"
	local rc_bare=$?
	loop shim LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=$ROW -- --backend cupy "${ARGS[@]}"
	local rc_shim=$?
	cat "$TMP/bare.err"
	[ $rc_bare -eq 3 ] && [ $rc_shim -eq 3 ] || { echo "exit status $rc_bare / $rc_shim, expected 3"; cat "$TMP/shim.err"; return 1; }
	local f
	for f in bare shim; do
		grep -q 'fakecuda: cuGetExportTable {6bd5fb6c-5bf4-e74a-8987-d93912fd9df9}: NVIDIA.s private export tables are not emulated' \
			"$TMP/$f.err" || { echo "$f: no export-table line"; return 1; }
		grep -q '^cupy_loop: CUDA cannot start here (cupy backend): CUDARuntimeError' "$TMP/$f.err" ||
			{ echo "$f: no cannot-start line"; return 1; }
	done
	diff <(grep '^cupy_loop:' "$TMP/bare.err") <(grep '^cupy_loop:' "$TMP/shim.err") || return 1
	local api a b
	for api in cuInit cuGetProcAddress_v2 cuGetExportTable; do
		a=$(calls bare $api); b=$(calls shim $api)
		echo "$api: $a without the shim, $b with it"
		[ "$a" -gt 0 ] && [ "$a" = "$b" ] || return 1
	done
}

# The loop verified every byte and each epoch's device bytes equal its own.
every_byte_crosses() {
	grep -qx 'verified OK' "$TMP/$1.out" || { cat "$TMP/$1.out" "$TMP/$1.err"; return 1; }
	local e
	for e in 1 2 3 4; do
		[ "$(field "$1" $e device_h2d)" = "$(field "$1" $e bytes)" ] ||
			{ echo "$1 epoch $e: device_h2d $(field "$1" $e device_h2d), bytes $(field "$1" $e bytes)"; return 1; }
	done
}

standin_bare() {
	loop sbare FAKECUDA_JITTER_US=100 -- --backend standin "${ARGS[@]}" || { cat "$TMP/sbare.err"; return 1; }
	cat "$TMP/sbare.out"
	every_byte_crosses sbare
}

# Under the shim with a budget that holds the data set: from epoch 3 on at
# most 5% of epoch 1's batch bytes cross; requested == h2d + served, h2d ==
# the device's; every byte verified.
standin_pool() {
	loop son FAKECUDA_JITTER_US=100 LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=$ROW VRAMPOOL_BUDGET=64M \
		VRAMPOOL_SLAB=1M VRAMPOOL_STATS="$TMP/son.json" -- --backend standin "${ARGS[@]}" ||
		{ cat "$TMP/son.out" "$TMP/son.err"; return 1; }
	cat "$TMP/son.out"
	grep -qx 'verified OK' "$TMP/son.out" || return 1
	local first e got total
	first=$(field son 1 bytes)
	for e in 3 4; do
		got=$(field son $e device_h2d)
		echo "epoch $e: $got of epoch 1's $first bytes crossed"
		[ $((got * 100)) -le $((first * 5)) ] || return 1
	done
	total=$(awk '$1 == "total" { for (i = 2; i < NF; i++) if ($i == "bytes") print $(i + 1) }' "$TMP/son.out")
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/son.json" "$TMP/son.fake.json" \
		--expect bytes.requested="$total" --min bytes.served_from_pool=$((2 * first))
}

# VRAMPOOL=off: the same bytes requested, every one crossing, the same
# bytes read back batch by batch as with the pool.
standin_off() {
	loop soff FAKECUDA_JITTER_US=100 LD_PRELOAD="$SHIM" VRAMPOOL=off VRAMPOOL_LAYOUT=$ROW \
		VRAMPOOL_STATS="$TMP/soff.json" -- --backend standin "${ARGS[@]}" ||
		{ cat "$TMP/soff.out" "$TMP/soff.err"; return 1; }
	cat "$TMP/soff.out"
	every_byte_crosses soff || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/soff.json" "$TMP/soff.fake.json" --calls \
		--expect bytes.requested="$(jget "$TMP/son.json" bytes.requested)" --expect bytes.served_from_pool=0 ||
		return 1
	python3 - "$TMP/son.loop.json" "$TMP/soff.loop.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:])
n = len(on["checksums"])
print("%d batches read back, pool on and off: %s" % (n, "identical" if on["checksums"] == off["checksums"] else "DIFFERENT"))
sys.exit(0 if n and on["checksums"] == off["checksums"] else 1)
PY
}

# The real-GPU check's script (tests/gpu/cupy_loop.py), over the stand-in:
# GPU time is scarce, so it must reach its verdict here first.
gpu_script() {
	CUPY_LOOP_BACKEND=standin "$PY" "$ROOT/tests/gpu/cupy_loop.py" "$TMP/gpu" "$SHIM" "${ARGS[@]}" \
		>"$TMP/gpu.out" 2>&1 || { cat "$TMP/gpu.out"; return 1; }
	cat "$TMP/gpu.out"
	grep -q '^cupy: verified, A/B identical; served [1-9]' "$TMP/gpu.out"
}

check "CuPy $("$PY" -c 'import cupy; print(cupy.__version__)' 2>/dev/null) imports under the shim" imports_under_shim
check "CuPy's embedded runtime stops at the driver's private export tables, with the shim as without" \
	stops_at_export_tables
check "the CuPy loop over its driver-route stand-in verifies every byte, the device counting each one" standin_bare
check "under the shim the CuPy loop's repeats come from the pool: from epoch 3 on at most 5% of epoch 1's bytes cross, every byte verified, stats match the device" \
	standin_pool
check "VRAMPOOL=off: the same bytes requested, every one crosses, the same bytes read back as with the pool" standin_off
check "the real-GPU CuPy check (tests/gpu/cupy_loop.py) reaches its verdict over the stand-in" gpu_script
