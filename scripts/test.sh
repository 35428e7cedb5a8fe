#!/usr/bin/env bash
# Runs every test this machine can run and ends with one line
# "N passed, N failed, N skipped". Three kinds of test:
#   build/unit/test_*        CUnit suites of the shim's modules (sanitized)
#   build/fakecuda/check/*   CUnit suites proving the emulated device is strict
#   tests/e2e/*.sh           end-to-end scripts; each prints PASS:/FAIL: lines
#                            (and SKIP: lines for a check this machine cannot run, with why)
# A suite that dies before CUnit's summary counts as one failure.
set -u
cd "$(dirname "$0")/.." || exit 2
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FAKE=$PWD/build/fakecuda
LOGDIR=build/test-logs
mkdir -p "$LOGDIR"
passed=0
failed=0
skipped=0   # SKIP: lines of the e2e scripts (a missing optional package), never passes
failures=()

# run_cunit NAME CMD...: runs a CUnit binary and adds its "tests" row.
run_cunit() {
	local name=$1; shift
	local log="$LOGDIR/${name//\//_}.log"
	echo "== $name"
	"$@" >"$log" 2>&1
	local rc=$?
	local row
	row=$(awk '$1 == "tests" && NF >= 6 { print $4, $5 }' "$log" | tail -n 1)
	if [ -z "$row" ]; then
		failed=$((failed + 1)); failures+=("$name (exit $rc, no summary)")
		tail -n 30 "$log"
		return
	fi
	set -- $row
	passed=$((passed + $1)); failed=$((failed + $2))
	if [ "$2" -ne 0 ] || [ "$rc" -ne 0 ]; then
		[ "$2" -ne 0 ] || failed=$((failed + 1))
		failures+=("$name")
		grep -E 'FAIL|Test:|ERROR|Sanitizer|runtime error' "$log" | head -n 40
	fi
	grep -E '^\s+(suites|tests|asserts)' "$log"
}

for t in build/unit/test_*; do
	[ -x "$t" ] || continue
	LD_LIBRARY_PATH=$FAKE ASAN_OPTIONS=detect_leaks=1 run_cunit "unit/$(basename "$t")" "$t"
done

for t in build/fakecuda/check/*; do
	[ -x "$t" ] || continue
	LD_LIBRARY_PATH=$FAKE run_cunit "fakecuda/$(basename "$t")" "$t"
done

for s in tests/e2e/*.sh; do
	[ -f "$s" ] || continue
	[ "$(basename "$s")" = lib.sh ] && continue
	name="e2e/$(basename "$s" .sh)"
	log="$LOGDIR/$(basename "$s" .sh).log"
	echo "== $name"
	bash "$s" >"$log" 2>&1
	rc=$?
	p=$(grep -c '^PASS: ' "$log")
	f=$(grep -c '^FAIL: ' "$log")
	k=$(grep -c '^SKIP: ' "$log")
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
	grep -E '^(PASS|FAIL|SKIP): ' "$log"
	if [ "$f" -ne 0 ]; then
		failures+=("$name")
		grep -A12 '^FAIL: ' "$log" | head -n 60
	elif [ "$rc" -ne 0 ] || [ $((p + k)) -eq 0 ]; then
		failed=$((failed + 1)); failures+=("$name (exit $rc)")
		tail -n 30 "$log"
	fi
done

echo
if [ ${#failures[@]} -ne 0 ]; then
	echo "failing: ${failures[*]}"
	echo "(full logs in $LOGDIR/)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
