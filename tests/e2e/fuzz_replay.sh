#!/usr/bin/env bash
# End to end: every fuzz target (tests/fuzz/fuzz_T.c), built as a plain
# sanitized program (build/fuzz/replay/T, made by every `make`), replays
# its seed corpus (tests/fuzz/corpus/T) and every finding checked in
# (tests/fuzz/regress/T): a reader that crashes, leaks, hits undefined
# behaviour or breaks a promise of its header on any of them fails here.
# `make fuzz` looks for new findings; each one found is checked in under
# tests/fuzz/regress/T and replayed here from then on.
source "$(dirname "$0")/lib.sh"

FUZZ=$ROOT/tests/fuzz

# Findings that still break today, by a known bug: file -> the issue's
# item. Each replays on its own as a known bug; a fix turns it to PASS.
declare -A KNOWN=(
)

# replay T FILE...: runs target T's replay program on the files.
replay() {
	local t=$1; shift
	[ -x "$B/fuzz/replay/$t" ] || { echo "no $B/fuzz/replay/$t (make builds it)"; return 1; }
	"$B/fuzz/replay/$t" "$@" 2>&1 | grep -v '^replay: ' | tail -n 20
	return "${PIPESTATUS[0]}"
}

# inputs T: the corpus and regression files of target T less the known ones.
inputs() {
	local f
	for f in "$FUZZ/corpus/$1"/* "$FUZZ/regress/$1"/*; do
		[ -f "$f" ] || continue
		[ -n "${KNOWN[$1/$(basename "$f")]:-}" ] && continue
		printf '%s\n' "$f"
	done
}

for src in "$FUZZ"/fuzz_*.c; do
	t=$(basename "$src" .c)
	t=${t#fuzz_}
	mapfile -t files < <(inputs "$t")
	if [ "${#files[@]}" -eq 0 ]; then
		check "the $t fuzz target has a seed corpus" false
		continue
	fi
	check "fuzz target $t: its seed corpus and checked-in findings replay clean (${#files[@]} inputs)" \
		replay "$t" "${files[@]}"
done

for k in "${!KNOWN[@]}"; do
	known_bug "fuzz target ${k%%/*}: the finding ${k#*/} replays clean" "${KNOWN[$k]}" \
		replay "${k%%/*}" "$FUZZ/regress/$k"
done
