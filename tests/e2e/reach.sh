#!/usr/bin/env bash
# End to end: the shim's reach (issue 10). Every route a program takes to
# copy host-to-device or to allocate is seen, counted once and pooled:
# the driver API called directly (cuMemcpyHtoD[Async]_v2), its copy
# function taken at run time (cuGetProcAddress_v2,
# cudaGetDriverEntryPointByVersion), cudaMemcpy2D with pitches equal to the
# width, a program that reaches the driver only through dlopen + dlsym +
# cuGetProcAddress (a statically linked runtime's route), a runtime that
# reaches the driver through entry points itself (FAKECUDA_RT_VIA_DRIVER),
# virtual memory (cuMemCreate + cuMemMap, PyTorch's expandable segments)
# and the driver's allocator, and a runtime unloaded and loaded again.
# On the emulated device with jitter: every byte verified, the shim's
# counters equal to the device's own.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=100
ROW=3072
N=400
BATCH=32
EPOCHS=4
LABELS=$((N * 8))
BASE="--samples $N --row $ROW --batch $BATCH --epochs $EPOCHS"
DRVLOADER=$B/apps/drvloader
RELOAD=$B/apps/reload

# app_run NAME BIN ENV... -- ARGS...: BIN under the shim with the layout of
# the rows; its stdout in $TMP/NAME.out, the dumps in $TMP/NAME{,.fake}.json.
app_run() {
	local name=$1 bin=$2; shift 2
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_SLAB=1M "${envs[@]}" LD_PRELOAD="$SHIM" \
		VRAMPOOL_STATS="$TMP/$name.json" FAKECUDA_REPORT="$TMP/$name.fake.json" \
		timeout 120 "$bin" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] || { echo "exit $rc"; tail -n 5 "$TMP/$name.out" "$TMP/$name.err"; }
	return $rc
}

invariants() {
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$1.json" "$TMP/$1.fake.json" "${@:2}"
}

# epoch_h2d NAME E: the device's host-to-device bytes during epoch E.
epoch_h2d() {
	sed -n "s/^epoch $2 .* device_h2d \([0-9]*\).*/\1/p" "$TMP/$1.out"
}

# total NAME FIELD: a field of the program's "total ..." line (bytes, copies).
total() {
	sed -n "s/^total .* $2 \([0-9]*\).*/\1/p" "$TMP/$1.out"
}

# counted_once NAME: the shim saw exactly the bytes the program uploaded.
counted_once() {
	local want got
	want=$(total "$1" bytes)
	got=$(jget "$TMP/$1.json" bytes.requested)
	[ -n "$want" ] && [ "$got" = "$want" ] ||
		{ echo "$1: shim requested $got, the program uploaded $want"; return 1; }
}

# pooled NAME BIN ARGS...: with a budget holding the dataset, from epoch 3
# on at most 5% of epoch 1's bytes cross; every byte verified; the
# invariants hold and every uploaded byte was counted once.
pooled() {
	local name=$1 bin=$2; shift 2
	app_run "$name" "$bin" VRAMPOOL_BUDGET=64M -- "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	invariants "$name" --min rows.hits=$N || return 1
	counted_once "$name" || return 1
	local first e got
	first=$(epoch_h2d "$name" 1)
	[ -n "$first" ] && [ "$first" -gt 0 ] || { echo "no epoch 1 line"; return 1; }
	for e in $(seq 3 "$EPOCHS"); do
		got=$(epoch_h2d "$name" "$e")
		[ -n "$got" ] && [ $((got * 100)) -le $((first * 5)) ] ||
			{ echo "$name: epoch $e device_h2d $got, epoch 1 $first (over 5%)"; return 1; }
	done
}

# passthrough NAME BIN ARGS...: under VRAMPOOL=off the shim counts exactly
# the device's own host-to-device calls and bytes, and the program's.
passthrough() {
	local name=$1 bin=$2; shift 2
	app_run "$name" "$bin" VRAMPOOL=off -- "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	invariants "$name" --calls --expect pool.state=off --expect bytes.served_from_pool=0 || return 1
	counted_once "$name" || return 1
	local copies
	copies=$(total "$name" copies)
	[ "$(jget "$TMP/$name.json" copies.h2d_calls)" = "$copies" ] ||
		{ echo "$name: shim h2d_calls $(jget "$TMP/$name.json" copies.h2d_calls), program copies $copies"; return 1; }
}

# ---- the trainer's copy routes ----------------------------------------------
trainer_route() {
	local api=$1 stream=$2 tag="${1}-${2}"
	pooled "tr-$tag" "$TRAINER" $BASE --copy-api "$api" --stream "$stream" || return 1
	passthrough "tr-$tag-off" "$TRAINER" $BASE --copy-api "$api" --stream "$stream"
}
for api in driver driver-sync driver-getproc driver-entrypoint memcpy2d; do
	for stream in legacy ptds; do
		check "trainer --copy-api $api --stream $stream: pooled from epoch 3 on, counted once, off counts the device's calls" \
			trainer_route "$api" "$stream"
	done
done
check "trainer --copy-api driver on a non-blocking stream, pageable: pooled and counted once" \
	pooled tr-driver-nb-pageable "$TRAINER" $BASE --copy-api driver --stream nonblocking --pageable
check "trainer --copy-api driver-getproc, 3 threads: pooled and counted once" \
	pooled tr-getproc-threads "$TRAINER" $BASE --copy-api driver-getproc --stream threads --threads 3
check "trainer_ptsz --copy-api driver (the _ptsz driver entry): pooled and counted once" \
	pooled trp-driver "$TRAINER_PTSZ" $BASE --copy-api driver
check "trainer_ptsz --copy-api driver-sync (the _ptds driver entry): pooled and counted once" \
	pooled trp-driver-sync "$TRAINER_PTSZ" $BASE --copy-api driver-sync
check "trainer_ptsz --copy-api driver-getproc --stream ptds: pooled and counted once" \
	pooled trp-getproc "$TRAINER_PTSZ" $BASE --copy-api driver-getproc --stream ptds

# Masks: a second row size through the driver route, both pooled.
two_sizes() {
	app_run tr-masks "$TRAINER" VRAMPOOL_LAYOUT=$ROW,1024 VRAMPOOL_BUDGET=64M -- \
		$BASE --mask-row 1024 --copy-api driver || return 1
	grep -q 'verified OK' "$TMP/tr-masks.out" || return 1
	invariants tr-masks --min rows.hits=$((2 * N)) || return 1
	counted_once tr-masks || return 1
	[ "$(epoch_h2d tr-masks 3)" = "$LABELS" ] ||
		{ echo "epoch 3 device_h2d $(epoch_h2d tr-masks 3), expected only the labels ($LABELS)"; return 1; }
}
check "rows and masks through the driver route are both pooled" two_sizes

# ---- the statically linked runtime's route: drvloader ------------------------
drvloader_route() {
	local tag=$1; shift
	pooled "dl-$tag" "$DRVLOADER" $BASE "$@" || return 1
	passthrough "dl-$tag-off" "$DRVLOADER" $BASE "$@"
}
DL_RUNS=(
	"plain"
	"per-thread --per-thread"
	"legacy-getproc --legacy-getproc"
	"before-init --resolve-before-init"
	"threads --threads 4"
	"threads-pt --threads 4 --per-thread --resolve-before-init"
	"v12000 --version 12000"
	"v13000 --version 13000"
	"v99999 --version 99999"
	"legacy-v11000 --legacy-getproc --version 11000"
	"stream-default --stream default"
	"stream-default-pt --stream default --per-thread"
	"pageable --pageable"
)
for run in "${DL_RUNS[@]}"; do
	read -r tag opts <<<"$run"
	# shellcheck disable=SC2086
	check "drvloader (dlopen + dlsym(cuGetProcAddress_v2) only) ${opts:-default}: pooled, counted once, off counts the device's calls" \
		drvloader_route "$tag" $opts
done

# ---- a runtime that reaches the driver through entry points: counted once ----
via_driver() {
	local name=$1 bin=$2 entry=$3; shift 3
	app_run "$name" "$bin" FAKECUDA_RT_VIA_DRIVER=1 VRAMPOOL=off -- $BASE "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	# the runtime really went through the driver's entry point
	[ "$(jget "$TMP/$name.fake.json" "calls.$entry")" -ge 1 ] 2>/dev/null ||
		{ echo "$name: the device saw no $entry call"; return 1; }
	invariants "$name" --calls || return 1
	counted_once "$name" || return 1
	[ "$(jget "$TMP/$name.json" copies.h2d_calls)" = "$(total "$name" copies)" ] ||
		{ echo "$name: shim h2d_calls $(jget "$TMP/$name.json" copies.h2d_calls), program copies $(total "$name" copies)"; return 1; }
	app_run "$name-pool" "$bin" FAKECUDA_RT_VIA_DRIVER=1 VRAMPOOL_BUDGET=64M -- $BASE "$@" || return 1
	grep -q 'verified OK' "$TMP/$name-pool.out" || return 1
	invariants "$name-pool" --expect rows.seen=$((EPOCHS * N)) --expect rows.captured=$N \
		--expect rows.hits=$(((EPOCHS - 1) * N)) || return 1
	counted_once "$name-pool"
}
check "FAKECUDA_RT_VIA_DRIVER: cudaMemcpyAsync reaching cuMemcpyHtoDAsync_v2 is counted and pooled once" \
	via_driver rtd-async "$TRAINER" cuMemcpyHtoDAsync_v2
check "FAKECUDA_RT_VIA_DRIVER: cudaMemcpy reaching cuMemcpyHtoD_v2 is counted and pooled once" \
	via_driver rtd-sync "$TRAINER" cuMemcpyHtoD_v2 --sync
check "FAKECUDA_RT_VIA_DRIVER: cudaMemcpy2DAsync reaching cuMemcpy2DAsync_v2 is counted and pooled once" \
	via_driver rtd-2d "$TRAINER" cuMemcpy2DAsync_v2 --copy-api memcpy2d
check "FAKECUDA_RT_VIA_DRIVER: the _ptsz build's copies reaching the _ptsz driver entry are counted and pooled once" \
	via_driver rtd-ptsz "$TRAINER_PTSZ" cuMemcpyHtoDAsync_v2_ptsz --stream ptds

# The same with a budget of a third of the rows: batches mix hits and
# misses, so the pool sends several runs of misses per copy through the
# runtime, which reaches the driver again.
via_driver_partial() {
	app_run rtd-partial "$TRAINER" FAKECUDA_RT_VIA_DRIVER=1 VRAMPOOL_BUDGET=1M VRAMPOOL_SLAB=1M -- $BASE || return 1
	grep -q 'verified OK' "$TMP/rtd-partial.out" || return 1
	invariants rtd-partial --min rows.hits=1 || return 1
	counted_once rtd-partial
}
check "FAKECUDA_RT_VIA_DRIVER: copies of mixed hits and misses are counted once" via_driver_partial

# ---- allocations through the driver and virtual memory -----------------------
# 64M device; the pool holds the 12M dataset, the trainer's own buffers a
# few more, so the 52M mid-run allocation fits only if the pool gives
# memory back (as pool.sh's memory_pressure, through the driver's routes).
memory_pressure() {
	local tag=$1 envs=(); shift
	while [ $# -gt 0 ] && [[ $1 == *=* ]]; do envs+=("$1"); shift; done
	app_run "oom-$tag" "$TRAINER" FAKECUDA_MEM=64M VRAMPOOL_BUDGET=40M VRAMPOOL_VERBOSE=1 "${envs[@]}" -- \
		--samples 4000 --row $ROW --batch 50 --epochs 4 --alloc-mid 52M@3 "$@" || return 1
	grep -q 'verified OK' "$TMP/oom-$tag.out" || return 1
	grep -q 'alloc-mid epoch 3 bytes 54525952 ok' "$TMP/oom-$tag.out" || return 1
	invariants "oom-$tag" --expect pool.state=latched --min pool.evictions=1 --min pool.oom_retries=1 || return 1
	counted_once "oom-$tag"
}
check "a mid-run cuMemCreate + cuMemMap growth (expandable segments) that needs the pool's memory succeeds" \
	memory_pressure vmm --alloc-api vmm
check "a mid-run cuMemAlloc_v2 that needs the pool's memory succeeds" \
	memory_pressure driver --alloc-api driver
check "a mid-run VMM growth needing the pool's memory succeeds while the copies take the driver route" \
	memory_pressure vmm-drv --alloc-api vmm --copy-api driver-getproc
check "FAKECUDA_RT_VIA_DRIVER: a mid-run cudaMalloc reaching cuMemAlloc_v2 that needs the pool's memory succeeds, counted once" \
	memory_pressure rtd-malloc FAKECUDA_RT_VIA_DRIVER=1 --alloc-api malloc

vmm_off_fails() {
	# the same growth without a pool to give memory back: the device says
	# no, and the program gets the driver's own error (exit 3)
	app_run vmm-nopool "$TRAINER" FAKECUDA_MEM=64M VRAMPOOL=off -- \
		--samples 400 --row $ROW --epochs 2 --alloc-mid 80M@2 --alloc-api vmm
	[ $? -eq 3 ] && grep -q 'cuMemCreate.*CUDA_ERROR_OUT_OF_MEMORY' "$TMP/vmm-nopool.err"
}
check "a VMM growth that cannot fit even without a pool gets the driver's own out-of-memory" vmm_off_fails

check "copies into VMM-mapped batch buffers are pooled (runtime copies)" \
	pooled vmm-buffers "$TRAINER" $BASE --buffers vmm
check "copies into VMM-mapped batch buffers are pooled (driver copies, non-blocking stream)" \
	pooled vmm-buffers-drv "$TRAINER" $BASE --buffers vmm --copy-api driver --stream nonblocking
check "copies into VMM-mapped batch buffers are pooled (memcpy2d, ptds)" \
	pooled vmm-buffers-2d "$TRAINER" $BASE --buffers vmm --copy-api memcpy2d --stream ptds

# ---- a runtime unloaded and loaded again -------------------------------------
reload_run() {
	local name=$1; shift
	app_run "$name" "$RELOAD" VRAMPOOL_BUDGET=64M -- --rounds 4 --row $ROW "$@" || return 1
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	invariants "$name" --min rows.hits=1 || return 1
	app_run "$name-off" "$RELOAD" VRAMPOOL=off -- --rounds 4 --row $ROW "$@" || return 1
	grep -q 'verified OK' "$TMP/$name-off.out" || return 1
	invariants "$name-off" --calls
}
check "a library linked with the runtime, dlopen()ed RTLD_LOCAL and dlclose()d round after round, runs to its end under the shim" \
	reload_run reload-lib
check "the runtime itself dlopen()ed RTLD_LOCAL, used through dlsym and dlclose()d round after round, runs to its end under the shim" \
	reload_run reload-direct --direct
# the same program with no shim at all: the baseline the shim is held to
reload_bare() {
	timeout 120 "$RELOAD" --rounds 4 --row $ROW "$@" >"$TMP/reload-bare.out" 2>"$TMP/reload-bare.err" ||
		{ echo "exit $?"; tail -n 5 "$TMP/reload-bare.err"; return 1; }
	grep -q 'verified OK' "$TMP/reload-bare.out"
}
check "the runtime dlopen()ed, used through dlsym and dlclose()d round after round runs to its end with no shim" \
	reload_bare --direct

# ---- the test programs' own options -------------------------------------------
augment_never_repeats() {
	app_run aug-all "$TRAINER" VRAMPOOL_BUDGET=64M -- $BASE --augment -1 --copy-api driver || return 1
	grep -q 'verified OK' "$TMP/aug-all.out" || return 1
	# every row of every epoch is new: nothing to serve
	invariants aug-all --expect rows.seen=$((EPOCHS * N)) --expect rows.hits=0 || return 1
	app_run aug-2 "$TRAINER" VRAMPOOL_BUDGET=64M -- $BASE --augment 2 || return 1
	grep -q 'verified OK' "$TMP/aug-2.out" || return 1
	# epochs 1-2 perturbed, epoch 3 the plain rows for the first time, epoch 4 served
	invariants aug-2 --expect rows.hits=$N || return 1
	[ "$(epoch_h2d aug-2 4)" = "$LABELS" ] || { echo "epoch 4 device_h2d $(epoch_h2d aug-2 4)"; return 1; }
}
check "trainer --augment: perturbed rows never repeat and verify against what was uploaded" augment_never_repeats

verification_bites() {
	local i=0 args bin
	for args in "$TRAINER --augment -1 --mask-row 512" "$TRAINER --buffers vmm --copy-api driver-getproc" \
		"$DRVLOADER --threads 2"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		set -- $args
		bin=$1; shift
		app_run "corrupt-$i" "$bin" -- "$@" --samples 64 --row $ROW --batch 16 --epochs 2 --corrupt-check
		[ $? -eq 1 ] && grep -q 'MISMATCH' "$TMP/corrupt-$i.err" && grep -q 'verification FAILED' "$TMP/corrupt-$i.out" ||
			{ echo "$args: a flipped byte was not caught"; return 1; }
	done
}
check "the programs' verification catches one flipped byte (augmented, VMM buffers, drvloader threads)" verification_bites

bad_options() {
	"$TRAINER" --sync --copy-api driver >/dev/null 2>&1; [ $? -eq 2 ] || return 1
	"$TRAINER" --copy-api driver-sync --stream nonblocking >/dev/null 2>&1; [ $? -eq 2 ] || return 1
	"$TRAINER" --buffers nope >/dev/null 2>&1; [ $? -eq 2 ] || return 1
	"$DRVLOADER" --stream nope >/dev/null 2>&1; [ $? -eq 2 ] || return 1
	"$RELOAD" --rounds 0 >/dev/null 2>&1; [ $? -eq 2 ]
}
check "bad options of the trainer, drvloader and reload exit 2" bad_options
