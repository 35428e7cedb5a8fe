#!/usr/bin/env bash
# Real CUDA clients through the shim on the emulated device (issue 18):
# NVIDIA's cuda-bindings, numba-cuda and PyCUDA, pinned in scripts/deps.sh
# (their own virtual environment, `scripts/deps.sh --pyenv clients`), each
# running tests/python/client_loop.py with its own upload API: 512 rows of
# 3 KiB, 6 reshuffled epochs, batches of 64, every batch read back and
# compared. Per client: without the shim, VRAMPOOL=off, a fixed layout,
# VRAMPOOL_LAYOUT=auto, VRAMPOOL=dry, and memory pressure (the client
# allocates mid-run, with its own API, more than the device has free);
# every run's batches read back identical to the run without the shim, and
# the shim's counters agree with the device's report (check_stats.py:
# requested = sent + served, sent = the device's bytes; copies counted once
# under off). Then `vrampool run --ab` on cuda-bindings and `vrampool
# report` on its two dumps.
#
# A client that is not installed (no network when scripts/deps.sh ran, or
# PyCUDA could not be built) prints SKIP lines saying why, never PASS.
source "$(dirname "$0")/lib.sh"

PYENV=$("$ROOT/scripts/deps.sh" --pyenv clients)
PY=$PYENV/bin/python
LOOP=$ROOT/tests/python/client_loop.py
ROW=3072
SAMPLES=512
EPOCHS=6
EPOCH_BYTES=$((SAMPLES * ROW))
ARGS=(--samples $SAMPLES --row $ROW --batch 64 --epochs $EPOCHS --seed 7)
# Runs that expect hits state the link: 1 GB/s, 3 us per 3 KiB row, several
# times the shim's host time per row even on a loaded machine, so the cost
# ledger pools whatever this machine's speed (ledger.sh tests the ledger).
POOL=(VRAMPOOL_LINK_GBPS=1 VRAMPOOL_SLAB=1M)

declare -A MODULE=([bindings]=cuda.bindings.driver [numba]=numba.cuda [pycuda]=pycuda.driver)
declare -A PACKAGE=([bindings]=cuda-bindings [numba]=numba-cuda [pycuda]=pycuda)
declare -A WHY VERSION

# Why each client cannot run here, or its version.
for c in bindings numba pycuda; do
	if [ ! -x "$PY" ]; then
		WHY[$c]="no client test env at $PYENV"
		[ -f "$PYENV.log" ] && WHY[$c]="${WHY[$c]}: $(grep -E 'ERROR|rror' "$PYENV.log" | tail -n 1)"
		WHY[$c]="${WHY[$c]}; scripts/deps.sh installs it"
	elif ! out=$("$PY" -c "import ${MODULE[$c]}" 2>&1); then
		WHY[$c]="${MODULE[$c]} does not import: $(tail -n 1 <<<"$out")"
		[ -f "$PYENV.pycuda.log" ] && [ $c = pycuda ] &&
			WHY[$c]="${WHY[$c]}; scripts/deps.sh could not install it: $(tail -n 1 "$PYENV.pycuda.log")"
	else
		VERSION[$c]=$("$PY" -c "import importlib.metadata as m; print(m.version('${PACKAGE[$c]}'))")
	fi
done

# ccheck CLIENT NAME FN...: check, or SKIP with the reason the client cannot run.
ccheck() {
	local c=$1 name=$2; shift 2
	if [ -n "${WHY[$c]:-}" ]; then
		echo "SKIP: ${PACKAGE[$c]}: $name (${WHY[$c]})"
		return 0
	fi
	check "${PACKAGE[$c]} ${VERSION[$c]}: $name" "$@"
}

# loop NAME ENV... -- ARGS...: the client loop with a device report; files in
# $TMP/NAME.*; fails unless it exits 0 having verified every batch.
loop() {
	local name=$1
	py_loop "$@"
	local rc=$?
	[ $rc -eq 0 ] && grep -qx 'verified OK' "$TMP/$name.out" ||
		{ echo "$name: exit $rc"; tail -n 8 "$TMP/$name.out" "$TMP/$name.err"; return 1; }
}

# shimmed C NAME ENV...: loop NAME of client C under the shim, with a stats dump.
shimmed() {
	local c=$1 name=$2; shift 2
	loop "$name" LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/$name.json" "$@" -- --client "$c" "${ARGS[@]}" \
		${EXTRA:+$EXTRA}
}

# h2d NAME E: the device's host-to-device bytes in epoch E of run NAME.
h2d() {
	awk -v e="$2" '$1 == "epoch" && $2 == e { for (i = 3; i < NF; i++) if ($i == "device_h2d") print $(i + 1) }' \
		"$TMP/$1.out"
}

# every_byte_crosses NAME: each epoch's device bytes equal its batch bytes.
every_byte_crosses() {
	local e
	for e in $(seq 1 $EPOCHS); do
		[ "$(h2d "$1" "$e")" = $EPOCH_BYTES ] || { echo "$1 epoch $e: device_h2d $(h2d "$1" "$e")"; return 1; }
	done
}

# pooled_from_epoch3 NAME: from epoch 3 on no batch byte crosses.
pooled_from_epoch3() {
	local e
	for e in $(seq 3 $EPOCHS); do
		[ "$(h2d "$1" "$e")" = 0 ] || { echo "$1 epoch $e: device_h2d $(h2d "$1" "$e"), expected 0"; return 1; }
	done
}

# same_readback A B: runs A and B read back the same bytes, batch by batch.
same_readback() {
	python3 - "$TMP/$1.loop.json" "$TMP/$2.loop.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["checksums"] for p in sys.argv[1:])
print("%d batches read back: %s" % (len(a), "identical" if a == b else "DIFFERENT"))
sys.exit(0 if a and a == b else 1)
PY
}

invariants() {
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$1.json" "$TMP/$1.fake.json" "${@:2}"
}

bare() {
	loop "$1.bare" -- --client "$1" "${ARGS[@]}" || return 1
	head -n 1 "$TMP/$1.bare.out"
	every_byte_crosses "$1.bare"
}

off() {
	shimmed "$1" "$1.off" VRAMPOOL=off || return 1
	every_byte_crosses "$1.off" && same_readback "$1.bare" "$1.off" &&
		invariants "$1.off" --calls --expect bytes.requested=$((EPOCHS * EPOCH_BYTES)) \
			--expect bytes.served_from_pool=0
}

fixed() {
	shimmed "$1" "$1.fixed" VRAMPOOL_LAYOUT=$ROW "${POOL[@]}" || return 1
	grep '^vrampool: .*served' "$TMP/$1.fixed.err" | head -n 1
	pooled_from_epoch3 "$1.fixed" && same_readback "$1.bare" "$1.fixed" &&
		invariants "$1.fixed" --expect bytes.requested=$((EPOCHS * EPOCH_BYTES)) \
			--min bytes.served_from_pool=$(((EPOCHS - 2) * EPOCH_BYTES)) --expect rows.captured=$SAMPLES
}

auto() {
	shimmed "$1" "$1.auto" VRAMPOOL_LAYOUT=auto "${POOL[@]}" || return 1
	grep '^vrampool: layout found' "$TMP/$1.auto.err"
	[ "$(jget "$TMP/$1.auto.json" layout)" = $ROW ] && [ "$(jget "$TMP/$1.auto.json" layout_source)" = auto ] ||
		{ echo "layout $(jget "$TMP/$1.auto.json" layout)"; return 1; }
	pooled_from_epoch3 "$1.auto" && same_readback "$1.bare" "$1.auto" &&
		invariants "$1.auto" --min bytes.served_from_pool=$(((EPOCHS - 2) * EPOCH_BYTES))
}

# A dry run: every byte crosses as without the shim, no device work of its
# own, and the what-if curve says the whole data set serves epochs 2 to 6.
dry() {
	shimmed "$1" "$1.dry" VRAMPOOL=dry VRAMPOOL_LAYOUT=$ROW || return 1
	every_byte_crosses "$1.dry" && same_readback "$1.bare" "$1.dry" &&
		invariants "$1.dry" --calls --expect bytes.served_from_pool=0 --expect mode=dry || return 1
	python3 - "$TMP/$1.dry.json" "$TMP/$1.dry.fake.json" $EPOCH_BYTES $EPOCHS <<'PY'
import json, sys
d, f = (json.load(open(p)) for p in sys.argv[1:3])
u, e = int(sys.argv[3]), int(sys.argv[4])
last = d["whatif"]["curve"][-1]
print("what-if: %s" % last)
ok = d["whatif"]["unique_bytes"] == u and last == [u, u * (e - 1)] and f["d2d_bytes"] == 0
sys.exit(0 if ok else 1)
PY
}

# Memory pressure: a 32 MiB device; at epoch 4 the client allocates half a
# MiB more than the device says is free (64 KiB pieces, its own API); the
# shim gives a slab back, the allocation succeeds, every batch verifies.
pressure() {
	EXTRA=--alloc-mid=4 shimmed "$1" "$1.oom" FAKECUDA_MEM=32M VRAMPOOL_LAYOUT=$ROW VRAMPOOL_BUDGET=16M \
		"${POOL[@]}" || return 1
	grep '^alloc-mid' "$TMP/$1.oom.out" || return 1
	same_readback "$1.bare" "$1.oom" &&
		invariants "$1.oom" --expect pool.state=latched --min pool.evictions=1 --min pool.oom_retries=1
}

for c in bindings numba pycuda; do
	ccheck $c "the loop without the shim verifies every batch, the device counting every byte" bare $c
	ccheck $c "VRAMPOOL=off: every byte crosses, copies counted once, the same bytes read back" off $c
	ccheck $c "a fixed layout pools: nothing crosses from epoch 3, the same bytes read back, the stats match the device" fixed $c
	ccheck $c "VRAMPOOL_LAYOUT=auto finds 3072 and pools from epoch 3, the same bytes read back" auto $c
	ccheck $c "VRAMPOOL=dry: every byte crosses, no device work of its own, the what-if curve is exact" dry $c
	ccheck $c "memory pressure: the client's own allocation mid-run gets a slab back, every batch verified" pressure $c
done

# vrampool run --ab on one client, then vrampool report on the two dumps.
ab() {
	VRAMPOOL_LINK_GBPS=1 "$VRAMPOOL_BIN" run --ab --layout $ROW --stats "$TMP/ab.json" -- \
		"$PY" "$LOOP" --client bindings "${ARGS[@]}" >"$TMP/ab.out" 2>&1 || { tail -n 20 "$TMP/ab.out"; return 1; }
	grep -E 'verdict' "$TMP/ab.out"
	grep -Eq 'verdict: with the pool, [0-9.]+x fewer bytes' "$TMP/ab.out" || return 1
	[ "$(grep -c '^verified OK' "$TMP/ab.out")" = 2 ] || { echo "not both runs verified"; return 1; }
	expect 0 'verdict: with the pool, [0-9.]+x fewer bytes crossed' "$VRAMPOOL_BIN" report "$TMP/ab.off.json" "$TMP/ab.on.json"
}
ccheck bindings "vrampool run --ab, then vrampool report on its two dumps, with a verdict" ab
