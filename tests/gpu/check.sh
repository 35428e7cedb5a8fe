#!/usr/bin/env bash
# The real-GPU check: run on a machine with an NVIDIA GPU and the CUDA
# toolkit (it cannot run in CI). It builds only what needs no Debian -dev
# package (the shim, the trainer, the gather check, bench_shim; xxhash.h
# from libxxhash-dev, XXHASH_DIR, or a copy carried in the git-ignored
# tests/gpu/include/) and runs:
#   1. the gather kernel's check (embedded PTX, self-test, comparison);
#   2. the trainer's cases: no shim, VRAMPOOL=off, the pool on every stream
#      kind, pageable, host threads, a mid-run allocation (every byte
#      verified each time), and the cost ledger on, with the link and the
#      serving of a hit from the slabs it measured, and its decision;
#   3. issue 8's matrix on the device: every row size x K = N (the budget
#      holds the data) and K ~ 0 (--augment -1: rows never repeat, the budget
#      a quarter of the data) x pinned and pageable, epoch times with the
#      pool against VRAMPOOL=off (epochs 2-4), share of bytes served;
#   4. the host hit path (bench_shim) on the real driver, T=1 and T=2;
#   5. the trainer linked by nvcc with its default static runtime, which
#      reaches the driver only through dlopen + cuGetProcAddress: bytes
#      served must be > 0;
#   6. when torch imports and sees the GPU: the DataLoader loop without the
#      shim, with the pool, and with the pool under
#      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True with a mid-run
#      allocation that fits only if the pool gives its memory back (evict
#      + retry through cuMemCreate); checksums of every batch compared;
#   7. when jax imports and sees the GPU: the JAX upload loop (driver API
#      copies) without the shim, with VRAMPOOL=off and with the pool, every
#      batch read back and compared, checksums compared across runs;
#   8. when cupy imports: the CuPy loop (tests/gpu/cupy_loop.py);
#   9. each Python client that imports (cuda-bindings, numba-cuda, PyCUDA;
#      from scripts/deps.sh's clients env where there is one, else
#      $PYTHON): tests/python/client_loop.py without the shim, with
#      VRAMPOOL=off and with the pool, every batch read back and compared,
#      checksums compared across runs, the shim's byte counts checked (a
#      PyCUDA built on another machine cannot be carried: skipped, saying
#      why, where it does not import);
#  10. the wheel (issue 20), carried in build/wheel/ (make wheel, or
#      VRAMPOOL_WHEEL=path): installed with `pip install --no-deps` into
#      $OUT/wheel-site (--target: the machine's environment is left as it
#      was; PYTHONPATH points there), its installed `vrampool` command runs
#      the standard-library loop tests/python/ctypes_loop.py with --ab,
#      and the PyTorch loop of step 6 (when torch sees the GPU), whose
#      checksums must equal step 6's run without the shim; `python -m
#      vrampool report` reads the dumps. Skipped, saying why, without a wheel.
# It prints a short table last and exits 0 only when everything verified.
# Well under 5 minutes on an H200.
#
# --emulated runs the same steps on the emulated device (tests/fakecuda,
# LD_LIBRARY_PATH=build/fakecuda, PCIe simulated at 16 GB/s: epoch times are
# a simulation there), where they make sense: the static-runtime trainer is
# built and checked but not run (that runtime needs NVIDIA's private export
# tables), and torch/jax/cupy are skipped unless they import and see a
# device. It tests this script, not the GPU. --quick: three row sizes, 20
# rounds of the gather check, one repetition of bench_shim.
#
# Usage: tests/gpu/check.sh [--emulated] [--quick] [OUTDIR]
set -u
cd "$(dirname "$0")/../.." || exit 2
EMU=0
QUICK=0
OUT=
for a in "$@"; do
	case $a in
	--emulated) EMU=1 ;;
	--quick) QUICK=1 ;;
	-*) echo "usage: tests/gpu/check.sh [--emulated] [--quick] [OUTDIR]" >&2; exit 2 ;;
	*) OUT=$a ;;
	esac
done
if [ -z "$OUT" ]; then
	OUT=/tmp/vrampool-gpu
	[ $EMU -eq 1 ] && OUT=/tmp/vrampool-emulated
fi
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# The check proves the pool's work on the device, so its cases expect hits:
# the cost ledger is forced to pool unless the caller says otherwise
# (VRAMPOOL_LEDGER=on tests/gpu/check.sh runs the matrix with its verdicts).
export VRAMPOOL_LEDGER=${VRAMPOOL_LEDGER:-force}
export PATH=$CUDA_HOME/bin:$PATH
PY=${PYTHON:-python3}
rows=()
fail=0
start=$(date +%s)

# note TEXT: a row of the final table.
note() { rows+=("$1"); }
# bad TEXT: a failed row.
bad() { rows+=("$1"); fail=1; }
# step TEXT: a heading with the seconds since the start.
step() { echo "== [$(($(date +%s) - start))s] $1"; }

[ -f "$CUDA_HOME/include/cuda.h" ] || { echo "check: no CUDA headers under CUDA_HOME=$CUDA_HOME"; exit 2; }
if [ $EMU -eq 1 ]; then
	export LD_LIBRARY_PATH=$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export FAKECUDA_H2D_GBPS=${FAKECUDA_H2D_GBPS:-16} FAKECUDA_D2D_GBPS=${FAKECUDA_D2D_GBPS:-400}
	DEVICE="emulated device (tests/fakecuda; PCIe simulated at $FAKECUDA_H2D_GBPS GB/s: epoch times are a SIMULATION)"
else
	nvidia-smi -L || { echo "check: no NVIDIA GPU here (tests/gpu/check.sh --emulated runs on the emulated device)"; exit 2; }
	DEVICE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)
fi

# xxhash.h (header only) from libxxhash-dev, or a copy in XXHASH_DIR
# (default: tests/gpu/include, carried to a machine without the package).
XXHASH_DIR=${XXHASH_DIR:-}
if [ -z "$XXHASH_DIR" ] && [ ! -f /usr/include/xxhash.h ]; then
	XXHASH_DIR=$PWD/tests/gpu/include
fi
if [ ! -f "${XXHASH_DIR:-/usr/include}/xxhash.h" ]; then
	echo "check: no xxhash.h: copy /usr/include/xxhash.h (libxxhash-dev) into tests/gpu/include/" \
		"on a machine that has it and carry that folder (it is git-ignored), or set XXHASH_DIR" >&2
	exit 2
fi
step "build ($DEVICE)"
targets=(build/libvrampool.so build/apps/trainer build/apps/trainer_ptsz build/gpu/gather_check build/bench/bench_shim)
[ $EMU -eq 1 ] && targets+=(build/fakecuda/libcudart.so.13)
make -s -j"$(nproc)" CUDA_HOME="$CUDA_HOME" XXHASH_DIR="$XXHASH_DIR" "${targets[@]}" >"$OUT/build.log" 2>&1 ||
	{ tail -n 30 "$OUT/build.log"; exit 2; }
SHIM=$PWD/build/libvrampool.so

# served JSON: the share of requested bytes served from the pool, or "-".
served() {
	[ -f "$1" ] || { echo "-"; return; }
	"$PY" -c 'import json, sys
b = json.load(open(sys.argv[1]))["bytes"]
print("%.1f%%" % (100.0 * b["served_from_pool"] / max(1, b["requested"])))' "$1" 2>/dev/null || echo "-"
}

# run_trainer NAME BIN ENV... -- ARGS: one trainer run, output in $OUT/NAME.*.
# Returns 0 when it exited 0 and said "verified OK".
run_trainer() {
	local name=$1 bin=$2
	shift 2
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" timeout 120 "$bin" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &&
		grep -q 'verified OK' "$OUT/$name.out"
}

# trainer_case NAME ENV... -- ARGS: a trainer run recorded as a table row.
trainer_case() {
	local name=$1 t0 t1 verdict=verified
	shift
	t0=$(date +%s.%N)
	run_trainer "$name" ./build/apps/trainer "$@" || verdict=FAIL
	t1=$(date +%s.%N)
	[ $verdict = verified ] || fail=1
	rows+=("$(printf '%-30s %-9s %7.2f s  served %s' "$name" "$verdict" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(served "$OUT/$name.json")")")
}

step "1. the gather kernel"
GATHER_ROUNDS=300
[ $QUICK -eq 1 ] && GATHER_ROUNDS=20
if ./build/gpu/gather_check $GATHER_ROUNDS >"$OUT/gather.out" 2>&1; then
	note "$(grep -E '^gather kernel: (ok|DIFFERS|FAILED)' "$OUT/gather.out" | tail -n 1)"
else
	bad "$(grep -E '^gather kernel: ' "$OUT/gather.out" | tail -n 1)  (exit status $?)"
fi
[ $EMU -eq 1 ] && note "  (emulated device: the check runs, but proves nothing about the kernel)"

step "2. trainer cases"
ARGS=(--samples 2048 --row 150528 --batch 64 --epochs 4 --pinned --stream nonblocking)
[ $EMU -eq 1 ] && ARGS=(--samples 512 --row 150528 --batch 32 --epochs 4 --pinned --stream nonblocking)
POOL=(LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x224x224)
trainer_case trainer-plain -- "${ARGS[@]}"
trainer_case trainer-off LD_PRELOAD="$SHIM" VRAMPOOL=off VRAMPOOL_STATS="$OUT/trainer-off.json" -- "${ARGS[@]}"
trainer_case trainer-pool "${POOL[@]}" VRAMPOOL_VERBOSE=1 VRAMPOOL_STATS="$OUT/trainer-pool.json" -- "${ARGS[@]}"
trainer_case trainer-pool-pageable "${POOL[@]}" VRAMPOOL_STATS="$OUT/trainer-pool-pageable.json" -- \
	"${ARGS[@]/--pinned/--pageable}"
trainer_case trainer-pool-threads "${POOL[@]}" VRAMPOOL_STATS="$OUT/trainer-pool-threads.json" -- \
	"${ARGS[@]/nonblocking/threads}" --threads 4
trainer_case trainer-pool-legacy "${POOL[@]}" VRAMPOOL_STATS="$OUT/trainer-pool-legacy.json" -- \
	"${ARGS[@]/nonblocking/legacy}"
trainer_case trainer-pool-driver "${POOL[@]}" VRAMPOOL_STATS="$OUT/trainer-pool-driver.json" -- \
	"${ARGS[@]}" --copy-api driver
trainer_case trainer-pool-oom "${POOL[@]}" VRAMPOOL_VERBOSE=1 VRAMPOOL_STATS="$OUT/trainer-pool-oom.json" -- \
	"${ARGS[@]}" --alloc-mid 1G@3
# The ledger as users run it (on): what it measured of the link and of
# serving a hit from the slabs (the gather), and what it decided.
trainer_case trainer-ledger-on "${POOL[@]}" VRAMPOOL_LEDGER=on VRAMPOOL_STATS="$OUT/trainer-ledger-on.json" -- \
	"${ARGS[@]}" --epochs 8
note "  $("$PY" -c 'import json, sys
l = json.load(open(sys.argv[1]))["specs"][0]["ledger"]
sv = l.get("serve_gbps")
print("ledger on: %s; link %s GB/s (%s), serving %s; %s" % (l["decision"], l["link_gbps"], l["link_source"],
      "%s GB/s" % sv if sv else "not measured", l["reason"]))' "$OUT/trainer-ledger-on.json" 2>/dev/null || echo 'ledger on: no dump')"
t0=$(date +%s.%N)
if run_trainer trainer-pool-ptsz ./build/apps/trainer_ptsz "${POOL[@]}" \
	VRAMPOOL_STATS="$OUT/trainer-pool-ptsz.json" -- "${ARGS[@]/nonblocking/ptds}"; then v=verified; else v=FAIL; fail=1; fi
rows+=("$(printf '%-30s %-9s %7.2f s  served %s' trainer-pool-ptsz "$v" \
	"$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$(served "$OUT/trainer-pool-ptsz.json")")")

step "3. the matrix: row sizes x K x pinned/pageable, pool on against VRAMPOOL=off"
# name row batch samples layout (the device's sizes, or the emulation's)
if [ $EMU -eq 1 ]; then
	SIZES=("64B 64 256 16384 64" "3KiB 3072 256 4096 3072" "12KiB 12288 64 1024 12288"
		"147KiB 150528 32 128 u8:3x224x224" "1MiB 1048576 8 16 1048576"
		"16MiB 16777216 1 3 whole:1M" "64MiB 67108864 1 2 whole:1M")
else
	SIZES=("64B 64 256 262144 64" "3KiB 3072 256 32768 3072" "12KiB 12288 64 8192 12288"
		"147KiB 150528 64 768 u8:3x224x224" "1MiB 1048576 8 96 1048576"
		"16MiB 16777216 1 6 whole:1M" "64MiB 67108864 1 2 whole:1M")
fi
[ $QUICK -eq 1 ] && SIZES=("${SIZES[1]}" "${SIZES[3]}" "${SIZES[5]}")
# epochs FILE: summed seconds of epochs 2..E.
epochs() { awk '$1 == "epoch" && $2 > 1 { s += $8 } END { printf "%.3f", s }' "$1" 2>/dev/null; }
matrix=()
for s in "${SIZES[@]}"; do
	read -r name row batch samples layout <<<"$s"
	data=$((row * samples))
	for k in N 0; do
		if [ $k = N ]; then budget=$((data + data / 4 + (1 << 20))); kargs=(); else
			budget=$((data / 4 > row ? data / 4 : row)); kargs=(--augment -1); fi
		for pin in pinned pageable; do
			cell=m-$name-K$k-$pin
			targs=(--samples "$samples" --row "$row" --batch "$batch" --epochs 4 --"$pin" --stream nonblocking "${kargs[@]}")
			[ "$row" -ge $((64 << 20)) ] && targs+=(--ring 2)
			ok=verified
			for m in off on; do
				run_trainer "$cell-$m" ./build/apps/trainer LD_PRELOAD="$SHIM" VRAMPOOL=$m \
					VRAMPOOL_LAYOUT="$layout" VRAMPOOL_BUDGET=$budget VRAMPOOL_QUIET=1 \
					VRAMPOOL_STATS="$OUT/$cell-$m.json" -- "${targs[@]}" || { ok=FAIL; fail=1; }
			done
			t_off=$(epochs "$OUT/$cell-off.out")
			t_on=$(epochs "$OUT/$cell-on.out")
			matrix+=("$(printf '%-7s %-3s %-9s %8s %8s %7s  %-8s %s' "$name" "$([ $k = N ] && echo N || echo '~0')" "$pin" \
				"$t_off" "$t_on" "$(awk -v a="$t_off" -v b="$t_on" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')" \
				"$(served "$OUT/$cell-on.json")" "$ok")")
		done
	done
done

step "4. host hit path: bench_shim on the driver (T=1 and T=2)"
BREPS=3
[ $QUICK -eq 1 ] && BREPS=1
for s in "3KiB 3072 256 20000" "147KiB 150528 64 512"; do
	read -r name row batch samples <<<"$s"
	if timeout 120 ./build/bench/bench_shim --row "$row" --batch "$batch" --samples "$samples" --reps $BREPS \
		--threads 1,2 >"$OUT/bench_shim-$name.out" 2>&1 && grep -q '^verified ok' "$OUT/bench_shim-$name.out"; then
		note "$(awk -v n="$name" '{ v[$1] = $2 } END { printf "bench_shim %-7s hit ns/row T=1 %.0f (hash %.0f), T=2 %.0f; served x XXH3 %.2f; T2/T1 %.2f; ops/copy %.2f", n, v["t1_hit_ns_per_row_median"], v["hash_ns_per_row_median"], v["t2_hit_ns_per_row_median"], v["t1_served_per_xxh3_median"], v["t2_per_t1_median"], v["t1_ops_per_copy_median"] }' "$OUT/bench_shim-$name.out")"
	else
		bad "bench_shim $name FAILED (see $OUT/bench_shim-$name.out)"
	fi
done

step "5. the trainer with nvcc's default static runtime"
mkdir -p build/gpu
if ! command -v nvcc >/dev/null; then
	if [ $EMU -eq 1 ]; then note "trainer_static: no nvcc here: skipped"; else bad "trainer_static: no nvcc in $CUDA_HOME/bin"; fi
elif gcc -std=c11 -O2 -D_GNU_SOURCE -pthread -isystem "$CUDA_HOME/include" -c -o build/gpu/trainer.o tests/apps/trainer.c \
	>>"$OUT/build.log" 2>&1 &&
	nvcc -o build/gpu/trainer_static build/gpu/trainer.o -L"$CUDA_HOME/lib64/stubs" -lcuda -lm >>"$OUT/build.log" 2>&1; then
	if nm -D build/gpu/trainer_static | grep -q ' U cuda'; then
		bad "trainer_static: imports runtime symbols: not a static runtime build"
	elif [ $EMU -eq 1 ]; then
		note "trainer_static: built, imports no cuda* symbol; not run (the static runtime needs the real driver's export tables)"
	elif run_trainer trainer-static build/gpu/trainer_static "${POOL[@]}" VRAMPOOL_STATS="$OUT/trainer-static.json" -- \
		"${ARGS[@]}"; then
		sv=$(served "$OUT/trainer-static.json")
		if [ "$sv" = "-" ] || [ "$sv" = "0.0%" ]; then
			bad "trainer_static: verified, but served $sv: the static runtime's copies were not seen"
		else
			note "trainer_static: verified, served $sv (seen through the driver entry points)"
		fi
	else
		bad "trainer_static: FAILED (see $OUT/trainer-static.err)"
	fi
else
	bad "trainer_static: build FAILED (see $OUT/build.log)"
fi

# py_case NAME ENV... -- ARGS: runs $PY ARGS with ENV; output in $OUT/NAME.json, .err.
py_case() {
	local name=$1
	shift
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" timeout 180 "$PY" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
}

# compare A B: same checksums in two loop outputs; prints a verdict line.
compare() {
	"$PY" - "$OUT/$1.json" "$OUT/$2.json" <<'PY'
import json, sys
try:
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
except Exception as e:
    print("no output (%s)" % e)
    sys.exit(1)
same = a["checksums"] == b["checksums"] and len(a["checksums"]) > 0
print("%d batches %s; epoch s %s -> %s" % (len(a["checksums"]), "identical" if same else "DIFFERENT",
      " ".join("%.2f" % t for t in a["epoch_s"]), " ".join("%.2f" % t for t in b["epoch_s"])))
sys.exit(0 if same and not b.get("mismatched_batches") else 1)
PY
}

# stats NAME: the pool's counters from NAME.stats.json, one line.
stats() {
	"$PY" - "$OUT/$1.stats.json" <<'PY' 2>/dev/null || echo "no stats"
import json, sys
s = json.load(open(sys.argv[1]))
b, p = s["bytes"], s["pool"]
print("served %d of %d bytes (%.1f%%), state %s, evictions %d, oom_retries %d, h2d+served==requested %s" % (
    b["served_from_pool"], b["requested"], 100.0 * b["served_from_pool"] / max(1, b["requested"]), p["state"],
    p["evictions"], p["oom_retries"], b["h2d"] + b["served_from_pool"] == b["requested"]))
PY
}

step "6. PyTorch"
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	TN=8192
	py_case torch-plain -- tests/gpu/torch_loop.py $TN 4 || bad "torch-plain: FAILED (see $OUT/torch-plain.err)"
	py_case torch-pool LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x64x64 VRAMPOOL_STATS="$OUT/torch-pool.stats.json" -- \
		tests/gpu/torch_loop.py $TN 4 || bad "torch-pool: FAILED (see $OUT/torch-pool.err)"
	py_case torch-expandable LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x64x64 VRAMPOOL_VERBOSE=1 \
		PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True VRAMPOOL_STATS="$OUT/torch-expandable.stats.json" -- \
		tests/gpu/torch_loop.py $TN 4 --alloc-mid 32@2 || bad "torch-expandable: FAILED (see $OUT/torch-expandable.err)"
	if v=$(compare torch-plain torch-pool); then note "torch pool:        $v"; else bad "torch pool:        $v"; fi
	note "  $(stats torch-pool)"
	if v=$(compare torch-plain torch-expandable); then note "torch expandable:  $v"; else bad "torch expandable:  $v"; fi
	note "  $("$PY" -c 'import json, sys; print("alloc-mid", json.load(open(sys.argv[1])).get("alloc_mid"))' \
		"$OUT/torch-expandable.json" 2>/dev/null || echo 'alloc-mid: no output')"
	v=$(stats torch-expandable)
	note "  $v"
	case $v in *"evictions 0"*|"no stats") bad "  torch expandable: the mid-run allocation did not take the pool's memory" ;; esac
else
	note "torch: not importable here, or no CUDA device for it: skipped"
fi

step "7. JAX"
if "$PY" -c 'import jax; jax.devices("gpu")' >/dev/null 2>&1; then
	JN=4096
	py_case jax-plain -- tests/gpu/jax_loop.py $JN 4 || bad "jax-plain: FAILED (see $OUT/jax-plain.err)"
	py_case jax-off LD_PRELOAD="$SHIM" VRAMPOOL=off VRAMPOOL_STATS="$OUT/jax-off.stats.json" -- \
		tests/gpu/jax_loop.py $JN 4 || bad "jax-off: FAILED (see $OUT/jax-off.err)"
	py_case jax-pool LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=u8:3x64x64 VRAMPOOL_STATS="$OUT/jax-pool.stats.json" -- \
		tests/gpu/jax_loop.py $JN 4 || bad "jax-pool: FAILED (see $OUT/jax-pool.err)"
	for r in off pool; do
		if v=$(compare jax-plain jax-$r); then note "jax $r: $v"; else bad "jax $r: $v"; fi
		v=$(stats jax-$r)
		note "  $v"
		case $v in *"requested True"*) ;; *) bad "  jax $r: the shim's byte counts do not add up" ;; esac
	done
	case $(stats jax-pool) in *"(0.0%)"*) note "  jax pool: NOTHING SERVED: its copies were not pooled (see $OUT/jax-pool.stats.json)" ;; esac
else
	note "jax: not importable here, or no GPU device for it: skipped"
fi

step "8. CuPy"
# CuPy (its embedded runtime reaches the driver through dlsym + cuGetProcAddress_v2): no shim, VRAMPOOL=off, pool; bytes compared.
PYC=$PY
if grep -q -- '--pyenv' scripts/deps.sh && [ -x "$(scripts/deps.sh --pyenv 2>/dev/null)/bin/python" ]; then
	PYC=$(scripts/deps.sh --pyenv)/bin/python
fi
if [ -f tests/gpu/cupy_loop.py ] && [ $EMU -eq 0 ] && "$PYC" -c 'import cupy' 2>/dev/null; then
	"$PYC" tests/gpu/cupy_loop.py "$OUT" "$SHIM" >"$OUT/cupy.out" 2>&1 || fail=1
	cat "$OUT/cupy.out"
	note "$(grep '^cupy: ' "$OUT/cupy.out" | tail -n 1)"
else
	note "cupy: not importable here, no tests/gpu/cupy_loop.py, or emulated (e2e/cupy.sh covers it): skipped"
fi

step "9. Python clients: cuda-bindings, numba-cuda, PyCUDA"
PYK=$PY
if [ -x "$(scripts/deps.sh --pyenv clients 2>/dev/null)/bin/python" ]; then
	PYK=$(scripts/deps.sh --pyenv clients)/bin/python
fi
# client_case CLIENT NAME ENV...: one run of the client's loop; files $OUT/client-CLIENT-NAME.*
client_case() {
	local c=$1 name=client-$1-$2
	shift 2
	env "$@" VRAMPOOL_STATS="$OUT/$name.stats.json" timeout 180 "$PYK" tests/python/client_loop.py --client "$c" \
		--samples 512 --row 3072 --batch 64 --epochs 6 --json "$OUT/$name.json" >"$OUT/$name.out" 2>"$OUT/$name.err"
}
declare -A client_module=([bindings]=cuda.bindings.driver [numba]=numba.cuda [pycuda]=pycuda.driver)
for c in bindings numba pycuda; do
	if ! why=$("$PYK" -c "import ${client_module[$c]}" 2>&1); then
		hint=""
		[ $c = pycuda ] && hint="; PyCUDA is built from source against the toolkit, so one built on another machine cannot be carried: scripts/deps.sh builds it where PyPI is reachable"
		note "clients $c: skipped: ${client_module[$c]} does not import with $PYK ($(tail -n 1 <<<"$why"))$hint"
		continue
	fi
	ok=1
	client_case $c plain || ok=0
	client_case $c off LD_PRELOAD="$SHIM" VRAMPOOL=off || ok=0
	client_case $c pool LD_PRELOAD="$SHIM" VRAMPOOL_LAYOUT=3072 || ok=0
	v=$("$PY" - "$OUT"/client-$c-{plain,off,pool}.json "$OUT"/client-$c-{off,pool}.stats.json <<'PY' 2>&1
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:4]]
stats = [json.load(open(p)) for p in sys.argv[4:6]]
same = all(r["verified"] and r["checksums"] == runs[0]["checksums"] for r in runs) and runs[0]["checksums"]
sums = all(s["bytes"]["h2d"] + s["bytes"]["served_from_pool"] == s["bytes"]["requested"] for s in stats)
b = stats[1]["bytes"]
print("%s: %d batches %s across plain/off/pool, h2d+served==requested %s, served %.1f%%" % (
    runs[0]["version"], len(runs[0]["checksums"]), "verified and identical" if same else "DIFFERENT",
    sums, 100.0 * b["served_from_pool"] / max(1, b["requested"])))
sys.exit(0 if same and sums else 1)
PY
) || ok=0
	if [ $ok -eq 1 ]; then note "clients $c: $v"; else bad "clients $c: FAILED: $v (see $OUT/client-$c-*)"; fi
done

step "10. the wheel: its installed command"
WHL=${VRAMPOOL_WHEEL:-}
if [ -z "$WHL" ]; then
	for f in build/wheel/vrampool-*-manylinux_*.whl; do [ -f "$f" ] && WHL=$f; done
fi
WSITE=$OUT/wheel-site
# wheel_run NAME ARGS...: the installed command with ARGS; output in $OUT/NAME.out, .err.
wheel_run() {
	local name=$1
	shift
	env PYTHONPATH="$WSITE" timeout 300 "$WSITE/bin/vrampool" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
}
if [ -z "$WHL" ] || [ ! -f "$WHL" ]; then
	note "wheel: no build/wheel/vrampool-*-manylinux_*.whl (make wheel, then carry build/wheel) and no VRAMPOOL_WHEEL: skipped"
elif rm -rf "$WSITE" && ! "$PY" -m pip install --no-deps --no-index --target "$WSITE" "$WHL" >"$OUT/wheel-install.log" 2>&1; then
	if grep -q 'is not a supported wheel on this platform' "$OUT/wheel-install.log"; then
		note "wheel: $(basename "$WHL") is not for this machine ($(ldd --version | head -n 1)): skipped (README, Install: the sdist)"
	else
		bad "wheel: pip install --no-deps $(basename "$WHL") FAILED: $(tail -n 1 "$OUT/wheel-install.log")"
	fi
else
	rm -f "$OUT"/wheel-ctypes.* "$OUT"/torch-wheel.*
	if wheel_run wheel-ctypes run --layout auto --ab --stats "$OUT/wheel-ctypes.json" -- \
		"$PY" tests/python/ctypes_loop.py && [ "$(grep -c '^verified OK' "$OUT/wheel-ctypes.out")" -eq 2 ]; then
		note "wheel $(basename "$WHL"): ctypes loop --ab verified; $(grep '^verdict: ' "$OUT/wheel-ctypes.err" | cut -c1-100)"
	else
		bad "wheel: the ctypes loop through the installed command FAILED (see $OUT/wheel-ctypes.*)"
	fi
	if [ -n "${TN:-}" ] && [ -f "$OUT/torch-plain.json" ]; then
		if wheel_run torch-wheel run --layout u8:3x64x64 --stats "$OUT/torch-wheel.stats.json" -- \
			"$PY" tests/gpu/torch_loop.py "$TN" 4; then
			cp "$OUT/torch-wheel.out" "$OUT/torch-wheel.json"
			if v=$(compare torch-plain torch-wheel); then note "torch via wheel:   $v"; else bad "torch via wheel:   $v"; fi
			note "  $(stats torch-wheel)"
		else
			bad "torch via wheel: FAILED (see $OUT/torch-wheel.err)"
		fi
	else
		note "wheel: no torch run without the shim (step 6 skipped): the PyTorch loop through the wheel skipped"
	fi
	if PYTHONPATH="$WSITE" "$PY" -m vrampool report "$OUT"/wheel-ctypes.{off,on}.json >"$OUT/wheel-report.out" 2>&1; then
		note "  python -m vrampool report: $(grep '^verdict: ' "$OUT/wheel-report.out" | cut -c1-90)"
	else
		bad "  python -m vrampool report FAILED (see $OUT/wheel-report.out)"
	fi
fi

echo
echo "== vrampool real-GPU check: $DEVICE ($(($(date +%s) - start)) s)"
echo "matrix: epochs 2-4 seconds with VRAMPOOL=off and with the pool, off/on (> 1: the pool is faster), bytes served"
printf '%-7s %-3s %-9s %8s %8s %7s  %-8s %s\n' rows K source off on off/on served verdict
printf '%s\n' "${matrix[@]}"
echo
printf '%s\n' "${rows[@]}"
if [ $fail -eq 0 ]; then echo "check: all verified"; else echo "check: FAILURES (see $OUT)"; fi
exit $fail
