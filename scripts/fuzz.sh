#!/usr/bin/env bash
# Runs every fuzz target (build/fuzz/T, made by `make fuzz`) for a bounded
# time and says, per target, how many inputs it ran and what it found.
#
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_RUNS      stop a target after this many inputs instead (optional)
#   FUZZ_TARGETS   the targets to run (default: every build/fuzz/T)
#   FUZZ_JOBS      targets run at once (default 1)
#
# Each target starts from its checked-in seeds (tests/fuzz/corpus/T) and
# findings (tests/fuzz/regress/T), copied into build/fuzz/work/T/corpus,
# which keeps what the fuzzer adds between runs; the checked-in corpus is
# never written. A finding (crash, leak, timeout, out of memory, or a
# broken promise: tests/fuzz/fuzz.h) stops its target and is left in
# build/fuzz/work/T/findings/; check it in under tests/fuzz/regress/T/
# (named for what it breaks) so that scripts/test.sh replays it for good.
# Exit status: 0 when no target found anything.
set -u
cd "$(dirname "$0")/.." || exit 2
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-$(for f in build/fuzz/*; do [ -f "$f" ] && [ -x "$f" ] && basename "$f"; done)}
JOBS=${FUZZ_JOBS:-1}
[ -n "$TARGETS" ] || { echo "fuzz: no targets in build/fuzz (make fuzz builds them)" >&2; exit 2; }

# fuzz_one T: runs target T; writes its one-line result to build/fuzz/work/T/result.
fuzz_one() {
	local t=$1 w=build/fuzz/work/$1 dict=tests/fuzz/dict/$1.dict args=()
	mkdir -p "$w/corpus" "$w/findings"
	rm -f "$w/findings"/*
	cp -n tests/fuzz/corpus/"$t"/* "$w/corpus/" 2>/dev/null
	cp -n tests/fuzz/regress/"$t"/* "$w/corpus/" 2>/dev/null
	[ -f "$dict" ] && args+=("-dict=$dict")
	[ -n "${FUZZ_RUNS:-}" ] && args+=("-runs=$FUZZ_RUNS")
	# -close_fd_mask=3: the readers' messages go nowhere; libFuzzer and the
	# sanitizers keep a descriptor of their own for reports.
	# The longest input worth trying: what the reader is given in practice.
	case $t in
	size) args+=(-max_len=64) ;;
	layout) args+=(-max_len=1024) ;;
	config | escape) args+=(-max_len=4096) ;;
	*) args+=(-max_len=65536) ;;
	esac
	"build/fuzz/$t" "${args[@]}" -max_total_time="$SECONDS_EACH" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=3 \
		-artifact_prefix="$w/findings/" "$w/corpus" >"$w/log" 2>&1
	local rc=$? execs rate found
	# The final statistics; after a finding, the last status line ("#N ... exec/s: R").
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$w/log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$w/log" | tail -n 1)
	[ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\)\t.*/\1/p' "$w/log" | tail -n 1)
	[ -n "$rate" ] || rate=$(sed -n 's/^#[0-9]*\t.* exec\/s: \([0-9]*\).*/\1/p' "$w/log" | tail -n 1)
	found=$(find "$w/findings" -type f | wc -l)
	printf '%-10s %12s inputs  %7s/s  corpus %5s  findings %s%s\n' "$t" "${execs:-?}" "${rate:-?}" \
		"$(find "$w/corpus" -type f | wc -l)" "$found" \
		"$([ "$found" -gt 0 ] || [ "$rc" -ne 0 ] && echo " (exit $rc; see $w/log and $w/findings/)")" >"$w/result"
}

# shellcheck disable=SC2086
echo "fuzz: ${SECONDS_EACH}s per target${FUZZ_RUNS:+, at most $FUZZ_RUNS inputs}:" $TARGETS
running=0
for t in $TARGETS; do
	fuzz_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
bad=0
for t in $TARGETS; do
	cat "build/fuzz/work/$t/result"
	grep -q 'findings 0$' "build/fuzz/work/$t/result" || bad=1
	for f in build/fuzz/work/"$t"/findings/*; do
		[ -f "$f" ] || continue
		echo "  finding: $f"
		# The run closed the target's stderr: run the finding alone to show what it breaks.
		"build/fuzz/$t" "$f" 2>&1 | grep -m 3 -E 'ERROR: [A-Z]|runtime error: |broken promise: ' | sed 's/^/    /'
	done
done
[ "$bad" -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: findings above; check each in under tests/fuzz/regress/<target>/"
exit "$bad"
