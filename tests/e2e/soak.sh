#!/usr/bin/env bash
# End to end: the soak (scripts/soak.sh, `make soak`; issue 17, item 5) in
# about half a minute. Its first scenarios of a fixed seed run under the
# shim and pass; a failure planted in them is counted, kept with its
# command line and fails the soak; a seed plans the same scenarios again,
# another seed others. The long soak itself is `make soak DURATION=30m`.
source "$(dirname "$0")/lib.sh"

SOAK=$ROOT/scripts/soak.sh
export SOAK_SWEEP=0 SOAK_DIR=$TMP/soak

# Scenarios 1..16 of seed 12: trainers (threads, streams, a signal, memory
# pressure), drvloader, reload, forker, dltest; faults in some.
short_soak() {
	SEED=12 SOAK_RUNS=16 DURATION=5m "$SOAK" >"$TMP/short.out" 2>&1
	local rc=$?
	cat "$TMP/short.out"
	[ $rc -eq 0 ] || { echo "exit $rc"; return 1; }
	grep -q '^soak: seed 12, [0-9]* s: 16 runs' "$TMP/short.out" || return 1
	grep -Eq '^soak: faults fired [1-9][0-9]* ' "$TMP/short.out" || return 1
	grep -Eq 'signals: [1-9][0-9]* runs died of theirs' "$TMP/short.out" || return 1
	grep -q '^soak: failures 0, wrong bytes 0, known ' "$TMP/short.out"
}
check "16 random scenarios of a fixed seed pass under the shim, with faults fired and a signal obeyed" short_soak

# The program's own allocations fail under the shim only: every run fails.
planted() {
	SEED=12 SOAK_RUNS=3 SOAK_SHIM_EXTRA="FAKECUDA_FAIL=cudaMalloc@1,cuMemAlloc_v2@1" "$SOAK" >"$TMP/planted.out" 2>&1
	local rc=$?
	cat "$TMP/planted.out"
	[ $rc -eq 1 ] || { echo "exit $rc, expected 1"; return 1; }
	grep -q '^soak: failures 3,' "$TMP/planted.out" || return 1
	grep -q 'reproduce: SEED=12 SOAK_ONLY=3 ' "$TMP/planted.out" || return 1
	# each kept: what went wrong, and the command line (under the shim)
	[ "$(grep -l 'exit status 3, without the shim 0' "$SOAK_DIR"/seed-12/[123]/*.problems | wc -l)" = 3 ] || return 1
	[ "$(grep -l 'LD_PRELOAD=' "$SOAK_DIR"/seed-12/[123]/*.cmd | wc -l)" -ge 3 ]
}
check "a run that fails under the shim is counted, its folder and command line kept, and the soak fails" planted

# plan SEED DIR: scenarios 1..40 of SEED planned into DIR (as soak.py plan
# SEED N DIR/N would, in one interpreter).
plan() {
	python3 - "$ROOT/scripts" "$1" "$2" <<-'EOF'
		import os, sys
		sys.path.insert(0, sys.argv[1])
		import soak
		for n in range(1, 41):
		    d = os.path.join(sys.argv[3], str(n))
		    os.makedirs(d)
		    soak.cmd_plan(sys.argv[2], str(n), d)
	EOF
}
same_seed() {
	plan 7 "$TMP/a" && plan 7 "$TMP/b" && plan 8 "$TMP/c" || return 1
	diff -r "$TMP/a" "$TMP/b" || { echo "seed 7 planned twice differs"; return 1; }
	! diff -rq "$TMP/a" "$TMP/c" >/dev/null || { echo "seeds 7 and 8 plan the same"; return 1; }
	# and the scenarios vary: programs, signals, pressure, faults
	cat "$TMP"/a/*/plan.sh | sort -u | grep -c '^APP=' | grep -qv '^1$' || return 1
	grep -l '^SIGNAL=[A-Z]' "$TMP"/a/*/plan.sh >/dev/null &&
		grep -l '^PRESSURE=1' "$TMP"/a/*/plan.sh >/dev/null &&
		grep -l '^FAULTS=1' "$TMP"/a/*/plan.sh >/dev/null
}
check "a seed plans the same scenarios again, another seed others, and they vary" same_seed

bad_usage() {
	DURATION=soon "$SOAK" >/dev/null 2>&1
	[ $? -eq 2 ] || return 1
	SEED=x "$SOAK" >/dev/null 2>&1
	[ $? -eq 2 ]
}
check "a malformed DURATION or SEED is refused (exit 2)" bad_usage
