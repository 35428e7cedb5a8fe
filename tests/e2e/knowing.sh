#!/usr/bin/env bash
# End to end: knowing before you commit (issue 12). The layout found from
# content (VRAMPOOL_LAYOUT=auto), dry runs (VRAMPOOL=dry) and the what-if
# curve, checked against the emulated device's ground truth.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=50

# run NAME VAR=VALUE... -- TRAINER ARGS: the trainer under the shim; files in $TMP/NAME.*
run() {
	local name=$1 envs=(); shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/$name.json" \
		FAKECUDA_REPORT="$TMP/$name.fake.json" "$TRAINER" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] && grep -q 'verified OK' "$TMP/$name.out" ||
		{ echo "exit $rc"; tail -n 5 "$TMP/$name.out" "$TMP/$name.err"; return 1; }
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$name.json" "$TMP/$name.fake.json"
}

epoch_h2d() {
	sed -n "s/^epoch $2 .* device_h2d \([0-9]*\).*/\1/p" "$TMP/$1.out"
}

# auto_layout NAME ROW SAMPLES BATCH: pools from epoch 3 on with the spec found.
auto_layout() {
	local name=$1 row=$2 n=$3 batch=$4 e got labels data
	run "$name" VRAMPOOL_LAYOUT=auto VRAMPOOL_BUDGET=256M -- \
		--samples "$n" --row "$row" --batch "$batch" --epochs 4 || return 1
	labels=$((n * 8))
	data=$((n * row))
	python3 - "$TMP/$name.json" "$row" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
specs = [s.split("@")[0] for s in (d.get("layout") or "").split(",")]
if sys.argv[2] not in specs or d.get("layout_source") != "auto":
    print("layout %r source %r" % (d.get("layout"), d.get("layout_source")))
    sys.exit(1)
PY
	for e in 3 4; do
		got=$(( $(epoch_h2d "$name" $e) - labels ))
		[ $((got * 100)) -le $((data * 5)) ] || { echo "epoch $e sent $got of $data sample bytes"; return 1; }
	done
	grep -q 'vrampool: .*3072\|vrampool: .*'"$row" "$TMP/$name.err" || { echo "the summary says nothing of the layout found"; return 1; }
}
check "VRAMPOOL_LAYOUT=auto finds 3072-byte samples in batches of 64 and pools from epoch 3" \
	auto_layout auto3k 3072 2000 64
check "VRAMPOOL_LAYOUT=auto finds 150528-byte samples (u8:3x224x224) and pools from epoch 3" \
	auto_layout auto150k 150528 300 32

# With nothing repeating (host-side random augmentation), auto says so
# (after 64 copies and 256 MiB without a repeat: autolayout.h).
auto_nothing() {
	run autonone VRAMPOOL_LAYOUT=auto -- --samples 160 --row 150528 --batch 16 --epochs 12 --augment -1 || return 1
	grep -qi 'repeat' "$TMP/autonone.err" || { cat "$TMP/autonone.err"; return 1; }
	[ "$(jget "$TMP/autonone.json" bytes.served_from_pool)" = 0 ]
}
check "VRAMPOOL_LAYOUT=auto over rows that never repeat says so and pools nothing" auto_nothing

# Without a layout the suggestion comes from the same evidence, not the GCD of batch sizes.
suggestion() {
	run suggest -- --samples 2000 --row 3072 --batch 64 --epochs 3 || return 1
	grep -q 'VRAMPOOL_LAYOUT=3072' "$TMP/suggest.err" || { cat "$TMP/suggest.err"; return 1; }
}
check "a run without a layout suggests the sample size found in the content" suggestion

# A dry run: no device memory of its own, no device-to-device copy, every
# byte crosses as without the shim, and the curve matches the truth.
dry_run() {
	local n=1000 row=3072 e=4
	run dry VRAMPOOL=dry VRAMPOOL_LAYOUT=$row -- --samples $n --row $row --batch 50 --epochs $e || return 1
	run drynone VRAMPOOL=off -- --samples $n --row $row --batch 50 --epochs $e || return 1
	python3 - "$TMP/dry.json" "$TMP/dry.fake.json" "$TMP/drynone.fake.json" $n $row $e <<'PY'
import json, sys
d, f, off = (json.load(open(p)) for p in sys.argv[1:4])
n, row, e = map(int, sys.argv[4:7])
err = []
if f["d2d_bytes"] != 0 or f.get("kernel_launches", 0) != 0:
    err.append("device-to-device work in a dry run: %d bytes" % f["d2d_bytes"])
if f["alloc_calls"] != off["alloc_calls"] or f["peak_alloc"] != off["peak_alloc"]:
    err.append("allocations %d/%d vs %d/%d without the shim" % (f["alloc_calls"], f["peak_alloc"], off["alloc_calls"], off["peak_alloc"]))
if f["h2d_bytes"] != off["h2d_bytes"]:
    err.append("h2d %d vs %d without the shim" % (f["h2d_bytes"], off["h2d_bytes"]))
w = d["whatif"]
U, curve = w["unique_bytes"], w["curve"]
matched = n * row * e
if U != n * row:
    err.append("unique_bytes %d, expected %d" % (U, n * row))
if len(curve) < 16 or curve[0][0] != 0 or curve[-1][0] != U:
    err.append("curve has %d points from %s to %s" % (len(curve), curve[0][0], curve[-1][0]))
full = dict(curve).get(U)
want = matched * (e - 1) // e
if full is None or abs(full - want) > want // 100:
    err.append("served at U %s, expected %d" % (full, want))
half = min(curve, key=lambda p: abs(p[0] - U // 2))
if not (0.4 * want <= half[1] <= 0.6 * want):
    err.append("served at %d (about U/2) %d, expected about %d" % (half[0], half[1], want // 2))
if d["bytes"]["served_from_pool"] != 0 or d["pool"]["bytes"] != 0:
    err.append("a dry run served or held memory")
if d["mode"] != "dry" or d["pool"]["state"] != "off" or not d["reason"]:
    err.append("mode %r, state %r, reason %r" % (d["mode"], d["pool"]["state"], d["reason"]))
print("\n".join(err))
sys.exit(1 if err else 0)
PY
}
check "a dry run makes no device work of its own and its curve matches the truth" dry_run

# A normal run whose budget holds half the dataset: the curve's point at the
# actual budget agrees with what the pool served; its point at the whole
# dataset predicts what a run with that budget then serves.
curve_predicts() {
	local n=2048 row=3072 e=4
	run half VRAMPOOL_LAYOUT=$row VRAMPOOL_BUDGET=3M VRAMPOOL_SLAB=1M -- \
		--samples $n --row $row --batch 64 --epochs $e || return 1
	local U
	U=$(jget "$TMP/half.json" whatif.unique_bytes)
	run whole VRAMPOOL_LAYOUT=$row VRAMPOOL_BUDGET=$((U + 4 * 1024 * 1024)) VRAMPOOL_SLAB=64M -- \
		--samples $n --row $row --batch 64 --epochs $e || return 1
	python3 - "$TMP/half.json" "$TMP/whole.json" <<'PY'
import json, sys
half, whole = (json.load(open(p)) for p in sys.argv[1:3])
err = []
curve = half["whatif"]["curve"]
b = half["pool"]["budget"]
at = dict(curve).get(b)
served = half["bytes"]["served_from_pool"]
if at is None:
    err.append("no curve point at the actual budget %d: %s" % (b, curve))
elif abs(at - served) > 0.05 * max(served, 1):
    err.append("curve at the budget %d says %d, the pool served %d" % (b, at, served))
U = half["whatif"]["unique_bytes"]
pred = dict(curve)[U]
got = whole["bytes"]["served_from_pool"]
if abs(pred - got) > 0.05 * max(got, 1):
    err.append("curve at U predicts %d, a run with that budget served %d" % (pred, got))
print("\n".join(err))
sys.exit(1 if err else 0)
PY
}
check "the curve agrees with what the pool served and predicts a larger budget" curve_predicts

# The summary has the what-if line.
whatif_line() {
	grep -q 'a budget of .* would have served' "$TMP/half.err" || { cat "$TMP/half.err"; return 1; }
}
check "the exit summary says what a budget would have served" whatif_line
