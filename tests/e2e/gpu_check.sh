#!/usr/bin/env bash
# The real-GPU check script (tests/gpu/check.sh) proven on the emulated
# device: --emulated --quick runs every step that makes sense there and
# ends all verified, with the matrix and the table (and a row per Python
# client: verified, or skipped saying why); the script and
# scripts/bench.sh are shellcheck-clean where shellcheck is installed.
source "$(dirname "$0")/lib.sh"

emulated_check() {
	local out=$TMP/check.out
	bash "$ROOT/tests/gpu/check.sh" --emulated --quick "$TMP/gpu" >"$out" 2>&1 || { tail -n 40 "$out"; return 1; }
	grep -q '^check: all verified$' "$out" &&
		[ "$(grep -cE '^(3KiB|147KiB|16MiB) +(N|~0) +(pinned|pageable) .* verified$' "$out")" -eq 12 ] &&
		grep -q '^gather kernel: ok' "$out" &&
		grep -qE '^trainer-pool-ptsz +verified' "$out" &&
		grep -qE '^trainer-ledger-on +verified' "$out" &&
		grep -qE '^  ledger on: (pooling|stood_aside); link [0-9.]+ GB/s \(measured\), serving ' "$out" &&
		grep -q '^bench_shim 3KiB ' "$out" &&
		grep -qE '^trainer_static: (built, imports no cuda\* symbol|no nvcc here)' "$out" &&
		[ "$(grep -cE '^clients (bindings|numba|pycuda): (.* verified and identical .*|skipped: .* does not import .*)$' "$out")" -eq 3 ] ||
		{ tail -n 40 "$out"; return 1; }
}
check "the GPU check runs on the emulated device and ends all verified, matrix and table printed" emulated_check

if command -v shellcheck >/dev/null; then
	check "the GPU check and the bench script are shellcheck-clean" \
		shellcheck "$ROOT/tests/gpu/check.sh" "$ROOT/scripts/bench.sh"
fi
