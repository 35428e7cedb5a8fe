#!/usr/bin/env bash
# The real-GPU check: run on a machine with an NVIDIA GPU and the CUDA
# toolkit (it cannot run in CI). Builds the shim and the trainer against the
# real runtime, runs the trainer without and with the shim (every byte
# verified, stats, wall time of each), then, when PyTorch is importable, a
# small DataLoader loop without and with the shim, comparing a checksum of
# every batch on the device and the epoch times, and when CuPy is, the CuPy
# upload loop without the shim, with VRAMPOOL=off and with the pool
# (tests/gpu/cupy_loop.py). Prints a table last.
# Finishes within about 5 minutes. Usage: tests/gpu/check.sh [OUTDIR]
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${1:-${OUT:-/tmp/vrampool-gpu}}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
rows=()
fail=0

nvidia-smi -L || { echo "check: no NVIDIA GPU here"; exit 2; }
[ -f "$CUDA_HOME/include/cuda.h" ] || { echo "check: no CUDA headers under CUDA_HOME=$CUDA_HOME"; exit 2; }
# xxhash.h (header only) from libxxhash-dev, or a copy in XXHASH_DIR
# (e.g. tests/gpu/include, carried to a machine without the package).
XXHASH_DIR=${XXHASH_DIR:-}
if [ -z "$XXHASH_DIR" ] && [ ! -f /usr/include/xxhash.h ] && [ -f tests/gpu/include/xxhash.h ]; then
	XXHASH_DIR=$PWD/tests/gpu/include
fi
make -s CUDA_HOME="$CUDA_HOME" XXHASH_DIR="$XXHASH_DIR" \
	build/libvrampool.so build/apps/trainer build/apps/trainer_ptsz >"$OUT/build.log" 2>&1 ||
	{ tail -n 30 "$OUT/build.log"; exit 2; }
SHIM=$PWD/build/libvrampool.so

# trainer_case NAME ENV... -- ARGS: one trainer run; records verdict and time.
trainer_case() {
	local name=$1; shift
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	local t0 t1 rc
	t0=$(date +%s.%N)
	env "${envs[@]}" ./build/apps/trainer "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	rc=$?
	t1=$(date +%s.%N)
	local verdict=FAIL
	[ $rc -eq 0 ] && grep -q 'verified OK' "$OUT/$name.out" && verdict=verified
	[ $verdict = verified ] || fail=1
	local served="-"
	[ -f "$OUT/$name.json" ] && served=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d['bytes']; print('%.1f%%' % (100.0*b['served_from_pool']/max(1,b['requested'])))" "$OUT/$name.json")
	rows+=("$(printf '%-28s %-9s %8.2f s  served %s' "$name" "$verdict" "$(echo "$t1 - $t0" | bc)" "$served")")
}

ARGS="--samples 4096 --row 150528 --batch 64 --epochs 4 --pinned --stream nonblocking"
trainer_case trainer-plain -- $ARGS
trainer_case trainer-off LD_PRELOAD="$SHIM" VRAMPOOL=off VRAMPOOL_STATS="$OUT/trainer-off.json" -- $ARGS
trainer_case trainer-pool LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224 VRAMPOOL_VERBOSE=1 \
	VRAMPOOL_STATS="$OUT/trainer-pool.json" -- $ARGS
trainer_case trainer-pool-pageable LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224 \
	VRAMPOOL_STATS="$OUT/trainer-pool-pageable.json" -- ${ARGS/--pinned/--pageable}
trainer_case trainer-pool-threads LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224 \
	VRAMPOOL_STATS="$OUT/trainer-pool-threads.json" -- ${ARGS/nonblocking/threads --threads 4}
trainer_case trainer-pool-legacy LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224 \
	VRAMPOOL_STATS="$OUT/trainer-pool-legacy.json" -- ${ARGS/nonblocking/legacy}
trainer_case trainer-pool-oom LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224 VRAMPOOL_VERBOSE=1 \
	VRAMPOOL_STATS="$OUT/trainer-pool-oom.json" -- $ARGS --alloc-mid 1G@3

# The gather kernel: the embedded PTX loaded and self-tested, then compared with cuMemcpyDtoD.
{ make -s CUDA_HOME="$CUDA_HOME" XXHASH_DIR="$XXHASH_DIR" build/gpu/gather_check >>"$OUT/build.log" 2>&1 && ./build/gpu/gather_check >"$OUT/gather.out" 2>&1; } || fail=1; rows+=("$(grep -E '^gather kernel: (ok|DIFFERS|FAILED)' "$OUT/gather.out" 2>/dev/null | tail -n 1 || true)"); cat "$OUT/gather.out" 2>/dev/null

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	t0=$(date +%s.%N)
	python3 tests/gpu/torch_loop.py 4096 4 >"$OUT/torch-off.json" 2>"$OUT/torch-off.err"
	t1=$(date +%s.%N)
	LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x64x64 VRAMPOOL_STATS="$OUT/torch-pool.stats.json" \
		python3 tests/gpu/torch_loop.py 4096 4 >"$OUT/torch-pool.json" 2>"$OUT/torch-pool.err"
	t2=$(date +%s.%N)
	python3 - "$OUT" <<'PY' || fail=1
import json, sys
out = sys.argv[1]
a = json.load(open(out + "/torch-off.json"))
b = json.load(open(out + "/torch-pool.json"))
same = a["checksums"] == b["checksums"]
print("torch checksums of %d batches: %s" % (len(a["checksums"]), "identical" if same else "DIFFERENT"))
print("torch epoch s without: " + " ".join("%.2f" % t for t in a["epoch_s"]))
print("torch epoch s with:    " + " ".join("%.2f" % t for t in b["epoch_s"]))
try:
    s = json.load(open(out + "/torch-pool.stats.json"))
    print("torch pool: served %d of %d bytes, state %s" % (s["bytes"]["served_from_pool"], s["bytes"]["requested"], s["pool"]["state"]))
except Exception as e:
    print("torch pool: no stats (%s)" % e)
sys.exit(0 if same else 1)
PY
	rows+=("$(printf '%-28s %8.2f s' torch-without "$(echo "$t1 - $t0" | bc)")")
	rows+=("$(printf '%-28s %8.2f s' torch-with-pool "$(echo "$t2 - $t1" | bc)")")
else
	rows+=("torch                        not importable here: skipped")
fi

# CuPy (its embedded runtime reaches the driver through dlsym + cuGetProcAddress_v2): no shim, VRAMPOOL=off, pool; bytes compared.
PYC=$(scripts/deps.sh --pyenv)/bin/python; [ -x "$PYC" ] || PYC=python3; if "$PYC" -c 'import cupy' 2>/dev/null; then "$PYC" tests/gpu/cupy_loop.py "$OUT" "$SHIM" >"$OUT/cupy.out" 2>&1 || fail=1; cat "$OUT/cupy.out"; rows+=("$(grep '^cupy: ' "$OUT/cupy.out" | tail -n 1)"); else rows+=("cupy                         not importable here: skipped"); fi

echo
echo "== vrampool real-GPU check ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
for f in "$OUT"/trainer-*.out; do grep -H '^epoch' "$f" | sed "s|$OUT/||"; done
printf '%s\n' "${rows[@]}"
[ $fail -eq 0 ] && echo "check: all verified" || echo "check: FAILURES (see $OUT)"
exit $fail
