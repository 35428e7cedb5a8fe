#!/usr/bin/env bash
# make bench: the matrix of issue 8 in one run, on this machine's CPUs and
# the emulated device (tests/fakecuda). Every figure is a ratio against a
# baseline measured in the same run, repeated, with min and median shown;
# each line says its target and whether the median meets it.
#
#   1. host hit path (build/bench/bench_shim, pool_copy over the emulated
#      device, one process per configuration): time_ns.shim per hit row
#      against the single-thread hash time of the row, bytes served per
#      second of time_ns.shim against single-thread XXH3 and memcpy of the
#      same batches, T=2 against T=1 paired, device operations per all-hit
#      copy on every stream kind. Host time, not simulated: the emulated
#      device's copies run on worker threads of the same 2 cores, so the
#      wall-clock time_ns.shim also counts the caller's waits for a core
#      while that worker runs; lines marked "CPU" give the calling thread's
#      CPU time in pool_copy instead (against baselines in CPU time), which
#      the load of other processes does not inflate.
#   2. the trainer (tests/apps/trainer.c) under the preloaded shim: the
#      whole-run time_ns.shim per row of 20000 x 3 KiB rows, batch 256,
#      4 epochs (host time, not simulated).
#   3. epoch time, pool on against VRAMPOOL=off, epochs 2..E, for every row
#      size x simulated link (4, 16, 32 GB/s) x K = N (the budget holds the
#      data) and K ~ 0 (--augment -1: rows never repeat; the budget a
#      quarter of the data, full in epoch 1). SIMULATION: the emulated
#      device's cost model (FAKECUDA_H2D_GBPS for host<->device, the same
#      link for the trainer's verifying readback; FAKECUDA_D2D_GBPS=400).
#      Each targeted cell also shows its ceiling: off / (off less the link
#      time of its uploads), what a pool that made every upload free and
#      cost nothing would reach with this workload.
#   4. context: pass-through cost per call, fingerprint and index figures
#      (bench_fingerprint, bench_index, bench_hitpath).
#
# Row sizes: 64 B, 3 KiB, 12 KiB, 147 KiB (u8:3x224x224), 1 MiB, whole
# 16 MiB and 64 MiB copies (layout whole:1M). T is VRAMPOOL_THREADS (the
# host part runs T=1 and T=2; the trainer runs the default).
#
# Usage: scripts/bench.sh [--quick]   (--quick: one repetition of each)
# Environment: BENCH_REPS (trainer pairs, 3), BENCH_HOST_REPS (5).
# Logs of every run go to build/bench-logs/, the table to
# build/bench-logs/results.txt. Exit status 1 when any run failed to verify.
set -u
cd "$(dirname "$0")/.." || exit 2
export LD_LIBRARY_PATH=$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SHIM=$PWD/build/libvrampool.so
LOG=build/bench-logs
REPS=${BENCH_REPS:-3}
HOST_REPS=${BENCH_HOST_REPS:-5}
if [ "${1:-}" = --quick ]; then
	REPS=1
	HOST_REPS=1
elif [ $# -gt 0 ]; then
	echo "usage: scripts/bench.sh [--quick]" >&2
	exit 2
fi
for f in "$SHIM" build/apps/trainer build/apps/callbench build/bench/bench_shim \
	build/bench/bench_fingerprint build/bench/bench_index build/bench/bench_hitpath; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "bench: $f is missing: run make all first" >&2; exit 2; }
done
rm -rf "$LOG"
mkdir -p "$LOG"
REC=$LOG/records.txt
: >"$REC"
failures=0
start=$(date +%s)

# The row sizes: name, row bytes, batch, samples in bench_shim, samples in
# the trainer's epoch runs (smaller: the matrix has 84 cells), layout.
SIZES=(
	"64B 64 256 131072 65536 64"
	"3KiB 3072 256 20000 10000 3072"
	"12KiB 12288 64 4096 2048 12288"
	"147KiB 150528 64 512 256 u8:3x224x224"
	"1MiB 1048576 8 64 32 1048576"
	"16MiB 16777216 1 6 3 whole:1M"
	"64MiB 67108864 1 3 2 whole:1M"
)

# section TEXT: a heading, with the seconds since the start.
section() { echo "== [$(($(date +%s) - start))s] $1"; }

# rec KEY VALUE: one measurement (repeated keys are repetitions).
rec() { echo "$1 $2" >>"$REC"; }

# fail WHAT LOGFILE: a run that did not finish verified.
fail() {
	failures=$((failures + 1))
	echo "bench: FAILED: $1 (see $2)" >&2
	tail -n 5 "$2" >&2
}

section "1. host hit path: bench_shim, pool_copy over the emulated device ($HOST_REPS repetitions)"
for s in "${SIZES[@]}"; do
	read -r name row batch samples _ layout <<<"$s"
	args=(--row "$row" --batch "$batch" --samples "$samples" --reps "$HOST_REPS" --threads "1,2")
	[ "${layout#whole}" != "$layout" ] && args+=(--whole)
	[ "$row" -ge $((64 << 20)) ] && args+=(--ring 2)
	out=$LOG/shim-$name.out
	echo "   $name: bench_shim ${args[*]}"
	if build/bench/bench_shim "${args[@]}" >"$out" 2>&1 && grep -q '^verified ok' "$out"; then
		awk -v p="shim_${name}_" '$1 !~ /^#/ && NF >= 2 && $1 != "verified" { print p $1, $2 }' "$out" >>"$REC"
	else
		fail "bench_shim $name" "$out"
	fi
done
for kind in legacy ptds nonblocking blocking; do
	out=$LOG/shim-ops-$kind.out
	if build/bench/bench_shim --row 3072 --batch 64 --samples 4096 --reps 1 --threads 1 \
		--stream "$kind" >"$out" 2>&1 && grep -q '^verified ok' "$out"; then
		rec "ops_$kind" "$(awk '$1 == "t1_ops_per_copy_median" { print $2 }' "$out")"
	else
		fail "bench_shim --stream $kind" "$out"
	fi
done

section "2. trainer, 20000 x 3 KiB rows, batch 256, 4 epochs: time_ns.shim per row seen ($REPS runs)"
for r in $(seq "$REPS"); do
	out=$LOG/run3k-$r
	if LD_PRELOAD=$SHIM VRAMPOOL_LAYOUT=3072 VRAMPOOL_QUIET=1 VRAMPOOL_STATS=$out.json \
		build/apps/trainer --samples 20000 --row 3072 --batch 256 --epochs 4 >"$out.out" 2>"$out.err" &&
		grep -q 'verified OK' "$out.out"; then
		rec run3k_ns_per_row "$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("%.1f" % (d["time_ns"]["shim"] / max(1, d["rows"]["seen"])))' "$out.json")"
	else
		fail "trainer run3k-$r" "$out.err"
	fi
done

# epochs FILE: the summed seconds of epochs 2..E of a trainer output.
epochs() { awk '$1 == "epoch" && $2 > 1 { s += $8 } END { printf "%.4f", s }' "$1"; }

# trainer_run OUT MODE LINK LAYOUT BUDGET ARGS...: one simulated trainer run.
trainer_run() {
	local out=$1 mode=$2 link=$3 layout=$4 budget=$5
	shift 5
	FAKECUDA_H2D_GBPS=$link FAKECUDA_D2D_GBPS=400 LD_PRELOAD=$SHIM VRAMPOOL=$mode \
		VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=$layout VRAMPOOL_BUDGET=$budget VRAMPOOL_STATS=$out.json \
		build/apps/trainer "$@" >"$out.out" 2>"$out.err" && grep -q 'verified OK' "$out.out"
}

section "3. epoch time on against off, epochs 2-4 (SIMULATION: emulated link; $REPS pairs per cell)"
for s in "${SIZES[@]}"; do
	read -r name row batch _ samples layout <<<"$s"
	data=$((row * samples))
	targs=(--samples "$samples" --row "$row" --batch "$batch" --epochs 4 --stream nonblocking)
	[ "$row" -ge $((64 << 20)) ] && targs+=(--ring 2)
	for k in N 0; do
		if [ $k = N ]; then
			budget=$((data + data / 4 + (1 << 20)))
			kargs=()
		else
			budget=$((data / 4 > row ? data / 4 : row))
			kargs=(--augment -1)
		fi
		for link in 4 16 32; do
			echo "   $name K=$k $link GB/s"
			for r in $(seq "$REPS"); do
				base=$LOG/epoch-$name-K$k-$link-$r
				order="off on"
				[ $((r % 2)) -eq 0 ] && order="on off"
				for m in $order; do
					trainer_run "$base-$m" "$m" "$link" "$layout" "$budget" \
						"${targs[@]}" "${kargs[@]}" ||
						fail "trainer $name K=$k $link GB/s $m" "$base-$m.err"
				done
				t_off=$(epochs "$base-off.out")
				t_on=$(epochs "$base-on.out")
				rec "epoch_${name}_K${k}_${link}" "$(awk -v a="$t_off" -v b="$t_on" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')"
				# What on/off would be if the pool made every upload free and
				# cost nothing: epochs 2-4 of off less their link time.
				rec "epoch_ceiling_${name}_K${k}_${link}" "$(awk -v a="$t_off" \
					-v l="$(((data + 8 * samples) * 3))" -v g="$link" \
					'BEGIN { u = l / (g * 1e9); printf "%.4f", (a > u ? a / (a - u) : 0) }')"
				rec "epoch_off_s_${name}_K${k}_${link}" "$t_off"
				rec "epoch_on_s_${name}_K${k}_${link}" "$t_on"
			done
		done
	done
done

section "4. context: pass-through cost, fingerprint, index"
if LD_PRELOAD=$SHIM VRAMPOOL_QUIET=1 build/apps/callbench --bytes 64 --calls 20000 --capture >"$LOG/callbench.out" 2>&1; then
	rec call_direct_ns "$(awk '{ print $9 }' "$LOG/callbench.out")"
	rec call_shim_ns "$(awk '{ print $7 }' "$LOG/callbench.out")"
else
	fail callbench "$LOG/callbench.out"
fi
build/bench/bench_fingerprint 2 >"$LOG/fingerprint.out" 2>&1 || fail bench_fingerprint "$LOG/fingerprint.out"
build/bench/bench_index >"$LOG/index.out" 2>&1 || fail bench_index "$LOG/index.out"
build/bench/bench_hitpath >"$LOG/hitpath.out" 2>&1 || fail bench_hitpath "$LOG/hitpath.out"
cat "$LOG/fingerprint.out" "$LOG/index.out" "$LOG/hitpath.out" |
	awk '$1 !~ /^#/ && NF >= 2 { print "ctx_" $1, $2 }' >>"$REC"

elapsed=$(($(date +%s) - start))
python3 - "$REC" "$elapsed" "$(nproc)" "$REPS" "$HOST_REPS" <<'PY' | tee "$LOG/results.txt"
import sys, time

rec, elapsed, cores, reps, host_reps = sys.argv[1:6]
vals = {}
for line in open(rec):
    k, _, v = line.strip().partition(" ")
    try:
        vals.setdefault(k, []).append(float(v))
    except ValueError:
        pass


def agg(key):
    """(min, median) of a key's repetitions, or of its _min/_median pair."""
    if key + "_min" in vals and key + "_median" in vals:
        return vals[key + "_min"][0], vals[key + "_median"][0]
    v = sorted(vals.get(key, []))
    if not v:
        return None
    n = len(v)
    return v[0], v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def verdict(med, target):
    if not target:
        return ""
    op, t = target
    ok = med <= t if op == "<=" else med >= t
    return "met" if ok else "MISSED"


lines = []


def line(label, key, unit="", target=None, fmt="%.2f"):
    a = agg(key)
    if a is None:
        lines.append("%-66s %19s" % (label, "no data"))
        return
    tg = ("%s %g%s" % (target[0], target[1], unit)) if target else ""
    lines.append("%-66s %8s %10s  %-12s %s" % (label, fmt % a[0], fmt % a[1], tg, verdict(a[1], target)))


def head(text):
    lines.append("")
    lines.append(text)


print()
print("vrampool bench (%s, %s cores, %ss; min and median of %s trainer pairs / %s host repetitions)"
      % (time.strftime("%Y-%m-%d"), cores, elapsed, reps, host_reps))
print("%-66s %8s %10s  %-12s %s" % ("figure", "min", "median", "target", "median meets it?"))

head("host hit path, hit epochs (bench_shim: pool_copy over the emulated device; host time, not simulated)")
lines.append("  wall: time_ns.shim, which also counts the caller's waits for a core while the emulated")
lines.append("  device's worker runs (2 shared cores); CPU: the calling thread's CPU time in pool_copy")
for name, label in (("64B", "64 B"), ("3KiB", "3 KiB"), ("12KiB", "12 KiB")):
    small = name != "12KiB"
    line("  %s rows: single-thread hash of the row, wall (baseline)" % label, "shim_%s_hash_ns_per_row" % name, " ns", fmt="%.0f")
    for t in (1, 2):
        line("  %s rows, T=%d: ns per hit row, wall" % (label, t), "shim_%s_t%d_hit_ns_per_row" % (name, t), " ns", fmt="%.0f")
        line("  %s rows, T=%d:   of which time_ns.fingerprint" % (label, t), "shim_%s_t%d_hit_fp_ns_per_row" % (name, t), " ns", fmt="%.0f")
        line("  %s rows, T=%d:   less the hash of the row, wall" % (label, t),
             "shim_%s_t%d_hit_minus_hash_ns" % (name, t), " ns", ("<=", 60) if small else None, fmt="%.0f")
    line("  %s rows, T=1: CPU per hit row less CPU hash of the row" % label,
         "shim_%s_t1_hit_cpu_minus_hash_ns" % name, " ns", ("<=", 60) if small else None, fmt="%.0f")

head("whole run, trainer under the shim (host time, wall)")
line("  20000 x 3 KiB, batch 256, 4 epochs: time_ns.shim per row seen", "run3k_ns_per_row", " ns", ("<=", 250), fmt="%.0f")

head("bytes served per second of time_ns.shim, hit epochs, one run (bench_shim)")
for name, label in (("147KiB", "147 KiB"), ("1MiB", "1 MiB"), ("16MiB", "whole 16 MiB"), ("64MiB", "whole 64 MiB")):
    for t in (1, 2):
        line("  %s, T=%d: GB/s, wall" % (label, t), "shim_%s_t%d_served_gbps" % (name, t), " GB/s")
        line("  %s, T=%d: x single-thread XXH3 of the same batches, wall" % (label, t),
             "shim_%s_t%d_served_per_xxh3" % (name, t), "x", (">=", 0.8))
        line("  %s, T=%d: x memcpy of the same batches, wall" % (label, t),
             "shim_%s_t%d_served_per_memcpy" % (name, t), "x", (">=", 1.5))
    line("  %s, T=1: x single-thread XXH3, CPU time" % label, "shim_%s_t1_served_cpu_per_xxh3" % name, "x", (">=", 0.8))
    line("  %s, T=1: x memcpy, CPU time" % label, "shim_%s_t1_served_cpu_per_memcpy" % name, "x", (">=", 1.5))

head("T=2 against T=1, paired in each repetition (served per second of shim time)")
for name, label in (("64B", "64 B"), ("3KiB", "3 KiB"), ("12KiB", "12 KiB"), ("147KiB", "147 KiB (9.2 MiB batches)"),
                    ("1MiB", "1 MiB (8 MiB batches)"), ("16MiB", "whole 16 MiB"), ("64MiB", "whole 64 MiB")):
    line("  %s" % label, "shim_%s_t2_per_t1" % name, "x", (">=", 1.6 if name == "147KiB" else 1.0))
fp = {k: agg("ctx_fp_150528_t%d_gbps" % k) for k in (1, 2)}
if fp[1] and fp[2]:
    lines.append("  %-64s %8s %10.2f  %-12s %s" % ("fingerprint_rows alone, 147 KiB rows (bench_fingerprint, best)", "",
                 fp[2][1] / fp[1][1], ">= 1.6x", verdict(fp[2][1] / fp[1][1], (">=", 1.6))))

head("device operations per all-hit copy (pool.device_ops / copies, 64 rows of 3 KiB)")
for kind in ("legacy", "ptds", "nonblocking", "blocking"):
    line("  %s stream" % kind, "ops_" + kind, "", ("<=", 1))

head("epoch time, epochs 2-4, VRAMPOOL=off / on (SIMULATION: emulated link; > 1: on is faster)")
for n, label, link, tg in (("3KiB", "3 KiB", 4, 1.3), ("147KiB", "147 KiB", 32, 0.95), ("147KiB", "147 KiB", 4, 1.7)):
    line("  %s rows, K = N, %d GB/s" % (label, link), "epoch_%s_KN_%d" % (n, link), "x", (">=", tg))
    line("    ceiling: off / (off less its upload link time)", "epoch_ceiling_%s_KN_%d" % (n, link), "x")
names = ("64B", "3KiB", "12KiB", "147KiB", "1MiB", "16MiB", "64MiB")
met = total = 0
for n in names:
    for link in (4, 16, 32):
        a = agg("epoch_%s_K0_%d" % (n, link))
        if a:
            total += 1
            met += a[1] >= 0.98
lines.append("  K ~ 0 (rows never repeat, pool full): cells with median >= 0.98: %d of %d%s"
             % (met, total, "   met" if total and met == total else "   MISSED"))
lines.append("")
lines.append("  matrix: median (min) of off/on; K=N budget holds the data, K~0 --augment -1, budget 1/4 of the data")
lines.append("  %-8s %-4s %17s %17s %17s" % ("rows", "K", "4 GB/s", "16 GB/s", "32 GB/s"))
for n in names:
    for k in ("N", "0"):
        cells = []
        for link in (4, 16, 32):
            a = agg("epoch_%s_K%s_%d" % (n, k, link))
            cells.append("%.2f (%.2f)" % (a[1], a[0]) if a else "-")
        lines.append("  %-8s %-4s %17s %17s %17s" % (n, "N" if k == "N" else "~0", *cells))
lines.append("  epoch 2-4 seconds off -> on, medians, 4 GB/s: " + ", ".join(
    "%s %.3f -> %.3f" % (n, agg("epoch_off_s_%s_KN_4" % n)[1], agg("epoch_on_s_%s_KN_4" % n)[1])
    for n in names if agg("epoch_off_s_%s_KN_4" % n) and agg("epoch_on_s_%s_KN_4" % n)))

head("context (no targets here; bench_fingerprint, bench_index, bench_hitpath)")
line("  cudaMemcpyAsync ns/call into the emulated runtime (captured)", "call_direct_ns", " ns", fmt="%.1f")
line("  the same through the shim, pass-through counting", "call_shim_ns", " ns", fmt="%.1f")
line("  memcpy GB/s (bench_fingerprint)", "ctx_memcpy_gbps", " GB/s")
for r in ("150528", "3072", "whole"):
    line("  fingerprint GB/s, rows of %s, 1 thread" % r, "ctx_fp_%s_t1_gbps" % r, " GB/s")
    line("  fingerprint GB/s, rows of %s, 2 threads" % r, "ctx_fp_%s_t2_gbps" % r, " GB/s")
line("  index bytes per pooled row at 10^6 rows", "ctx_index_bytes_per_row", " B", ("<=", 48), fmt="%.1f")
line("  index_lookup_many ns per present key at 10^6 rows", "ctx_index_lookup_many_hit_ns", " ns", fmt="%.1f")
line("  hash + batch lookup, 64 B rows, 10^6 entries, batch 256: hash ns", "ctx_hit_64_n1e6_b256_hash_ns", " ns", fmt="%.1f")
line("  ... lookup ns", "ctx_hit_64_n1e6_b256_lookup_ns", " ns", fmt="%.1f")
line("  hash + batch lookup, 3 KiB rows, 10^6 entries, batch 256: hash ns", "ctx_hit_3072_n1e6_b256_hash_ns", " ns", fmt="%.1f")
line("  ... lookup ns", "ctx_hit_3072_n1e6_b256_lookup_ns", " ns", fmt="%.1f")
print("\n".join(lines))
PY
if [ $failures -ne 0 ]; then
	echo "bench: $failures run(s) FAILED to finish verified; see $LOG"
	exit 1
fi
echo "bench: every run verified; logs in $LOG"
