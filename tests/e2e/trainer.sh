#!/usr/bin/env bash
# The trainer on the emulated device, no shim: in every stream mode, pinned
# and pageable, with a partial last batch, duplicates and random per-operation
# delays, every byte must verify and the device's own counters must agree
# exactly with what the trainer says it asked for. Then the trainer's own
# checks are proven: it catches a corrupted readback, and --alloc-mid succeeds
# when the memory fits and fails with exit status 3 when it does not.
source "$(dirname "$0")/lib.sh"

export FAKECUDA_JITTER_US=${FAKECUDA_JITTER_US:-200}
# 150 samples in batches of 16: nine full batches and a partial one of 6.
SMALL=(--samples 150 --row 1024 --batch 16 --epochs 3 --ring 3 --dup 25 --seed 7)

# report_h2d FILE: prints "h2d_bytes h2d_calls" of a FAKECUDA_REPORT file
# (one python3 start instead of two jget calls).
report_h2d() {
	python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["h2d_bytes"], r["h2d_calls"])
PY
}

# trainer_counts BIN ARGS...: runs the trainer with a device report and
# checks exit status 0, "verified OK", and that the device saw exactly the
# trainer's host-to-device bytes and copies.
trainer_counts() {
	local bin=$1; shift
	local out=$TMP/out.$BASHPID rep=$TMP/report.$BASHPID rc=0
	FAKECUDA_REPORT=$rep "$bin" "$@" >"$out" 2>&1 || rc=$?
	cat "$out"
	[ "$rc" -eq 0 ] || { echo "exit status $rc"; return 1; }
	grep -qx 'verified OK' "$out" || { echo "no 'verified OK'"; return 1; }
	local total bytes copies epochs
	total=$(grep '^total ' "$out") || { echo "no total line"; return 1; }
	bytes=$(awk '{ for (i = 1; i < NF; i++) if ($i == "bytes") print $(i + 1) }' <<<"$total")
	copies=$(awk '{ for (i = 1; i < NF; i++) if ($i == "copies") print $(i + 1) }' <<<"$total")
	epochs=$(grep -c '^epoch ' "$out")
	[ "$epochs" -ge 3 ] || { echo "only $epochs epoch lines"; return 1; }
	[ -s "$rep" ] || { echo "no FAKECUDA_REPORT written"; return 1; }
	local dev_bytes dev_calls
	read -r dev_bytes dev_calls < <(report_h2d "$rep") && [ -n "$dev_calls" ] ||
		{ echo "cannot read h2d_bytes, h2d_calls from the report"; cat "$rep"; return 1; }
	echo "trainer bytes $bytes copies $copies; device h2d_bytes $dev_bytes h2d_calls $dev_calls"
	[ "$bytes" = "$dev_bytes" ] || { echo "h2d bytes differ"; return 1; }
	[ "$copies" = "$dev_calls" ] || { echo "h2d calls differ"; return 1; }
	# Each epoch line's device_h2d must equal its own bytes too.
	awk '/^epoch / { for (i = 1; i < NF; i++) { if ($i == "bytes") b = $(i + 1);
		if ($i == "device_h2d") d = $(i + 1) }
		if (b != d) { print "epoch", $2, "bytes", b, "device_h2d", d; bad = 1 } }
		END { exit bad }' "$out"
}

for mem in pinned pageable; do
	for mode in legacy ptds nonblocking multi threads; do
		check "trainer verifies every byte, $mode stream, $mem memory, device counts agree" \
			trainer_counts "$TRAINER" "${SMALL[@]}" --$mem --stream "$mode" --streams 3 --threads 3
	done
	check "trainer verifies every byte with cudaMemcpy (--sync), $mem memory, device counts agree" \
		trainer_counts "$TRAINER" "${SMALL[@]}" --$mem --sync
	check "trainer verifies every byte with cudaMemcpy from 3 threads, $mem memory, device counts agree" \
		trainer_counts "$TRAINER" "${SMALL[@]}" --$mem --sync --stream threads --threads 3
	for mode in legacy ptds threads; do
		check "per-thread-default-stream build verifies every byte, $mode stream, $mem memory, device counts agree" \
			trainer_counts "$TRAINER_PTSZ" "${SMALL[@]}" --$mem --stream "$mode" --threads 3
	done
	check "per-thread-default-stream build verifies every byte with cudaMemcpy_ptds, $mem memory, device counts agree" \
		trainer_counts "$TRAINER_PTSZ" "${SMALL[@]}" --$mem --sync --stream threads --threads 2
done
check "trainer verifies every byte with cudaMemcpyDefault copies, device counts agree" \
	trainer_counts "$TRAINER" "${SMALL[@]}" --copy-api memcpy-default --stream multi
check "trainer verifies a one-slot staging ring (every batch waits for the previous copy)" \
	trainer_counts "$TRAINER" "${SMALL[@]}" --ring 1 --stream nonblocking
check "trainer verifies with all samples duplicates of one and batches of one" \
	trainer_counts "$TRAINER" --samples 20 --row 256 --batch 1 --epochs 3 --dup 100

# expect_status WANT PATTERN CMD...: CMD exits WANT and its output matches PATTERN.
expect_status() {
	local want=$1 pattern=$2; shift 2
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	printf '%s\n' "$out"
	[ "$rc" -eq "$want" ] || { echo "exit status $rc, expected $want"; return 1; }
	grep -qE "$pattern" <<<"$out" || { echo "output does not match /$pattern/"; return 1; }
}

check "trainer detects a corrupted readback: exit 1 naming epoch, batch, byte, expected and got" \
	expect_status 1 'MISMATCH epoch 1 batch [0-9]+ data byte [0-9]+ .*expected 0x[0-9a-f]{2} got 0x[0-9a-f]{2}' \
	"$TRAINER" "${SMALL[@]}" --corrupt-check
check "trainer detects a corrupted readback from a worker thread" \
	expect_status 1 'MISMATCH epoch 1 batch' \
	"$TRAINER" "${SMALL[@]}" --corrupt-check --stream threads --threads 3
check "trainer rejects a bad option with exit 2 and a usage line" \
	expect_status 2 '^usage: trainer' "$TRAINER" --stream sideways
# alloc_mid_fits API: 32 MiB at the start of epoch 2 on a 64 MiB device.
alloc_mid_fits() {
	FAKECUDA_MEM=64M expect_status 0 '^alloc-mid epoch 2 bytes 33554432 ok' \
		"$TRAINER" "${SMALL[@]}" --alloc-mid 32M --alloc-api "$1"
}

# alloc_mid_too_big API: 32 MiB at the start of epoch 3 on a 16 MiB device.
alloc_mid_too_big() {
	FAKECUDA_MEM=16M expect_status 3 'failed: cudaErrorMemoryAllocation' \
		"$TRAINER" "${SMALL[@]}" --alloc-mid 32M@3 --alloc-api "$1"
}

for api in malloc async managed pitch; do
	check "--alloc-mid with --alloc-api $api succeeds when it fits" alloc_mid_fits "$api"
done
for api in malloc async; do
	check "--alloc-mid with --alloc-api $api fails with exit 3 and cudaErrorMemoryAllocation when FAKECUDA_MEM is too small" \
		alloc_mid_too_big "$api"
done

# device_time: --device-time appends the emulated device's device-to-device
# time to each epoch line: 0 for the trainer alone (it makes none), more
# than 0 in the epoch where a pool (forced: no ledger verdict) captures its
# rows into slabs, device-to-device.
device_time() {
	local alone=$TMP/dt-alone.out pooled=$TMP/dt-pooled.out
	"$TRAINER" "${SMALL[@]}" --stream nonblocking --device-time >"$alone" 2>&1 &&
		grep -qx 'verified OK' "$alone" || { cat "$alone"; return 1; }
	[ "$(awk '$1 == "epoch" && $(NF - 1) == "device_d2d_ns" && $NF == 0' "$alone" | wc -l)" = 3 ] ||
		{ echo "trainer alone: not three epochs with device_d2d_ns 0"; cat "$alone"; return 1; }
	LD_PRELOAD=$SHIM VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=1024 VRAMPOOL_LEDGER=force \
		"$TRAINER" "${SMALL[@]}" --stream nonblocking --device-time >"$pooled" 2>&1 &&
		grep -qx 'verified OK' "$pooled" || { cat "$pooled"; return 1; }
	awk '$1 == "epoch" && $2 == 1 && $(NF - 1) == "device_d2d_ns" && $NF > 0 { ok = 1 } END { exit !ok }' \
		"$pooled" || { echo "pooled: epoch 1 has no device-to-device time"; cat "$pooled"; return 1; }
}
check "--device-time: the emulated device's device-to-device time per epoch, 0 alone, > 0 where a pool captures" \
	device_time
