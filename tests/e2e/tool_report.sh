#!/usr/bin/env bash
# End-to-end tests of `vrampool report`: dumps from real runs of the trainer
# on the emulated device with the shim preloaded (off and on), the sample
# dumps of tests/tool (every key of DESIGN.md, extra keys, missing optional
# keys, no layout), and malformed files (not JSON, truncated, foreign, wrong
# types, missing), once under valgrind.
source "$(dirname "$0")/lib.sh"
FIX=$ROOT/tests/tool
V=$VRAMPOOL_BIN
T=(--samples 160 --row 3072 --batch 16 --epochs 3 --quiet)

# ---- dumps from real runs ----------------------------------------------------
cd "$TMP" || exit 1
real_runs() {
	LD_PRELOAD=$SHIM VRAMPOOL=off VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=3072 \
		VRAMPOOL_STATS=$TMP/off.json "$TRAINER" "${T[@]}" || return 1
	LD_PRELOAD=$SHIM VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=3072 \
		VRAMPOOL_STATS=$TMP/on.json "$TRAINER" "${T[@]}" || return 1
	test -s off.json && test -s on.json
}
check "the trainer with the shim preloaded writes an off and an on dump" real_runs
# field FILE KEY: one number of a dump.
field() { jget "$1" "$2"; }
report_matches_dump() {
	local out calls req
	out=$("$V" report on.json) || return 1
	printf '%s\n' "$out"
	calls=$(field on.json copies.h2d_calls)
	req=$(field on.json rows.seen)
	grep -Eq "host-to-device +$calls calls" <<<"$out" &&
		grep -Eq "rows +$req seen" <<<"$out" &&
		grep -Eq "mode +on, layout 3072" <<<"$out"
}
check "report prints a real dump with its own numbers" report_matches_dump
check "report of a real on dump shows the hit rate and the bytes saved" \
	expect 0 'hit rate\).*' "$V" report on.json
check "report of a real on dump shows the probe's decision" expect 0 'probe +decided: ' "$V" report on.json
check "report of a real off dump says pass-through" expect 0 'mode +off \(pass-through' "$V" report off.json
check "report compares the real off and on dumps with a verdict" \
	expect 0 'verdict: with the pool, [0-9.]+x fewer bytes crossed' "$V" report off.json on.json
ratio_right() {
	local out want
	out=$("$V" report off.json on.json) || return 1
	printf '%s\n' "$out"
	want=$(python3 -c "import json; a=json.load(open('off.json'))['bytes']['h2d']; \
b=json.load(open('on.json'))['bytes']['h2d']; print('%.2f' % (b / a))")
	grep -Eq "bytes over PCIe .* $want\$" <<<"$out"
}
check "the on/off ratio of host-to-device bytes is the dumps' ratio" ratio_right
check "the comparison is the same whichever order the files come in" \
	bash -c "a=\$('$V' report off.json on.json) && b=\$('$V' report on.json off.json) && [ \"\$a\" = \"\$b\" ]"

# ---- sample dumps ------------------------------------------------------------
check "a sample dump becomes a table" \
	expect 0 'served from pool +3\.0 MiB \(66\.7% of requested' "$V" report "$FIX/dump_on.json"
check "extra keys in a dump are ignored" expect 0 'pool +active, 1 slab, 64\.0 MiB of 1\.0 GiB' \
	"$V" report "$FIX/dump_on.json"
check "a dump without a layout gets a layout suggestion from its copy sizes" \
	expect 0 'try `--layout 150528`' "$V" report "$FIX/dump_nolayout.json"
check "a dump with only the required keys is reported" \
	expect 0 'no host-to-device copy was seen' "$V" report "$FIX/dump_minimal.json"
check "two sample dumps give a 3.00x verdict" \
	expect 0 'verdict: with the pool, 3\.00x fewer bytes' "$V" report "$FIX/dump_off.json" "$FIX/dump_on.json"
check "dumps of runs that asked for different amounts are called not comparable" \
	expect 0 'verdict: not comparable' "$V" report "$FIX/dump_off.json" "$FIX/dump_nolayout.json"

# ---- malformed input -----------------------------------------------------------
check "a file that is not JSON is exit 2 with line and column" \
	expect 2 'notjson\.txt: not valid JSON \(line 1, column [0-9]+\)' "$V" report "$FIX/notjson.txt"
check "a truncated dump is exit 2 with line and column" \
	expect 2 'truncated\.json: not valid JSON \(line 2' "$V" report "$FIX/truncated.json"
check "JSON of another tool is exit 2: not a vrampool stats dump" \
	expect 2 'foreign\.json: valid JSON, but not a vrampool stats dump' "$V" report "$FIX/foreign.json"
check "a JSON array is exit 2: not a vrampool stats dump" \
	expect 2 'not a vrampool stats dump' "$V" report "$FIX/array.json"
check "a key of the wrong type is exit 2 naming the key" \
	expect 2 'key "bytes\.requested" is not a non-negative number' "$V" report "$FIX/wrongtype.json"
check "a missing dump is exit 2" expect 2 'nope\.json: .*No such file' "$V" report nope.json
check "an empty file is exit 2" bash -c ": >'$TMP/empty.json'; '$V' report '$TMP/empty.json'; [ \$? -eq 2 ]"
check "a directory is exit 2" bash -c "'$V' report '$TMP'; [ \$? -eq 2 ]"
check "no file is a usage error" expect 2 'expected one or two stats files' "$V" report
check "three files are a usage error" expect 2 'expected one or two stats files, got 3' \
	"$V" report a b c
if [ -n "$TOOL_SANITIZED" ]; then
	:       # valgrind cannot run an ASan binary; ASan checks this build instead
elif command -v valgrind >/dev/null; then
	vg() {
		local f rc
		for f in notjson.txt truncated.json foreign.json array.json wrongtype.json \
			 dump_on.json dump_nolayout.json dump_minimal.json; do
			valgrind -q --error-exitcode=99 --leak-check=full "$V" report "$FIX/$f" >/dev/null 2>&1
			rc=$?
			if [ "$rc" -gt 2 ]; then echo "$f: exit $rc under valgrind"; return 1; fi
		done
	}
	check "valgrind finds no memory error in report on good and malformed dumps" vg
fi
