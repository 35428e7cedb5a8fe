#!/usr/bin/env bash
# End-to-end tests of `vrampool report`: dumps from real runs of the trainer
# on the emulated device with the shim preloaded (off and on), the sample
# dumps of tests/tool (the round-1 shape: every key of DESIGN.md, extra keys,
# missing optional keys, no layout; the round-2 shape v2_*.json: mode, rank,
# what-if curve, reasons; four DDP ranks), standard input, pictures (--plot,
# PNG and SVG, with a telemetry file), and malformed files (not JSON,
# truncated, foreign, wrong types, numbers it cannot represent, terminal
# control characters in strings), once under valgrind (or ASan).
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force
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
b=json.load(open('on.json'))['bytes']['h2d']; print('%.2f' % (a / b))")
	grep -Eq "bytes over PCIe .* $want\$" <<<"$out"
}
check "the off/on ratio of host-to-device bytes is the dumps' ratio" ratio_right
check "the comparison is the same whichever order the files come in" \
	bash -c "a=\$('$V' report off.json on.json) && b=\$('$V' report on.json off.json) && [ \"\$a\" = \"\$b\" ]"

# ---- sample dumps ------------------------------------------------------------
check "a sample dump becomes a table" \
	expect 0 'served from pool +3\.0 MiB \(66\.7% of requested' "$V" report "$FIX/dump_on.json"
check "extra keys in a dump are ignored" expect 0 'pool +active, 1 slab, 64\.0 MiB of 1\.0 GiB' \
	"$V" report "$FIX/dump_on.json"
check "a dump without a layout gets a layout suggestion from its copy sizes" \
	expect 0 'try `--layout auto`, or `--layout 150528`' "$V" report "$FIX/dump_nolayout.json"
check "the copy sizes are called what they are sorted by: the most bytes" \
	expect 0 'the copy sizes with the most bytes were' "$V" report "$FIX/dump_nolayout.json"
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
check "no file is a usage error" expect 2 'expected one or more stats files' "$V" report
check "a missing file among several is exit 2" expect 2 'b: .*No such file' "$V" report "$FIX/dump_on.json" b c
check "a number of 2^64 or more is exit 2, not a wrong figure" \
	expect 2 'big\.json: line 1, column [0-9]+: a number too large to represent' "$V" report "$FIX/big.json"
check "a real number past 2^64 is exit 2 naming the key" \
	expect 2 'key "bytes\.requested" is 1e\+20: too large to represent \(2\^64 or more\)' "$V" report "$FIX/bigreal.json"
check "a negative count is exit 2 naming the key" \
	expect 2 'key "bytes\.requested" is -5: negative' "$V" report "$FIX/negative.json"
check "a fraction where a count is expected is exit 2 naming the key" \
	expect 2 'key "bytes\.requested" is 2\.5: a fraction' "$V" report "$FIX/fraction.json"
no_raw_controls() {
	local out
	out=$("$V" report "$FIX/ctrl.json" 2>&1) || return 1
	printf '%s\n' "$out" | cat -v
	! grep -q $'\033' <<<"$out" && ! grep -q $'\007' <<<"$out" && ! grep -q $'\r' <<<"$out" &&
		grep -q 'layout 3072\\e\[31m' <<<"$out" && grep -q 'why\\r\\nfake line' <<<"$out"
}
check "strings from a dump reach the terminal escaped (no control characters)" no_raw_controls

# ---- the round-2 dump: mode, rank, the what-if curve, reasons --------------------
check "report - reads a dump from standard input" \
	expect 0 '^vrampool report: - \(pid 4102, on node1\)' bash -c "'$V' report - <'$FIX/v2_on.json'"
check "report - reads a dump from a pipe" \
	expect 0 'served from pool +17\.2 MiB' bash -c "cat '$FIX/v2_on.json' | '$V' report -"
check "standard input can be read only once" expect 2 'can be read only once' "$V" report - -
check "the what-if curve is printed as a table of budget, served and share" \
	expect 0 '5\.9 MiB +17\.6 MiB +75\.0%' "$V" report "$FIX/v2_on.json"
check "the run's own budget is marked on the curve" \
	expect 0 '2\.9 MiB +8\.8 MiB +37\.5% +<- this run.s budget' "$V" report "$FIX/v2_half.json"
check "a budget above the unique set is said to hold every repeat" \
	expect 0 'holds the whole unique set' "$V" report "$FIX/v2_on.json"
check "a dry run says what it is and shows the curve" \
	expect 0 'mode +dry \(fingerprinting only' bash -c "'$V' report '$FIX/v2_dry.json' && '$V' report '$FIX/v2_dry.json' | grep -q 'what-if'"
check "a dump rewritten while the job ran says so" \
	expect 0 'still running when this dump was written' "$V" report "$FIX/v2_running.json"
check "an A/B pair of dumps without pace shows the wall time and its off/on ratio" \
	expect 0 'wall time +10\.00 s +12\.50 s +0\.80' "$V" report "$FIX/v2_off.json" "$FIX/v2_on.json"
check "a pool that never hit single rows blames a layout of several samples" \
	expect 0 'likely reason: the layout is probably several samples' "$V" report "$FIX/v2_several.json"
check "a pool that stood down blames rows that never repeat" \
	expect 0 'likely reason: rows never repeat \(the pool stood down' "$V" report "$FIX/v2_norepeat.json"
check "a small budget says what budget would have served what" \
	expect 0 'the budget is below the unique working set: a budget of 1\.0 MiB .* serves 12\.8% of the matched bytes where a budget of 5\.9 MiB would serve 75\.0%' \
	"$V" report "$FIX/v2_smallbudget.json"
check "the A/B verdict names the likely reason when the pool served little" \
	expect 0 'likely reason the pool served little: the layout is probably several samples' \
	"$V" report "$FIX/v2_off.json" "$FIX/v2_several.json"

# ---- time first: the verdict judges time, off/on everywhere -----------------------
# mk OUT BASE PYTHON: writes $TMP/OUT, the fixture BASE changed by PYTHON (on the dict d).
mk() {
	python3 -c "import json, sys; d = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], 'w'))" \
		"$FIX/$2" "$TMP/$1" "$3"
}
# pace NS: python that sets the steady time per copy of d to NS nanoseconds.
pace() { echo "d['pace']['steady'].update({'ns': $1 * 128, 'ns_per_copy': $1})"; }
pace_slower() {
	local out
	out=$("$V" report "$FIX/pace_off.json" "$FIX/pace_on.json") || return 1
	printf '%s\n' "$out"
	grep -Eq 'time per copy \(steady\) +10\.0 us +14\.0 us +0\.71$' <<<"$out" &&
		grep -Eq 'wall time +10\.00 s +9\.00 s +1\.11$' <<<"$out" &&
		grep -q '^verdict: time: slower with the pool: off/on 0\.71' <<<"$out" && ! grep -qi 'faster' <<<"$out"
}
check "the verdict judges the steady time per copy: slower per copy is called slower, whatever the wall time" pace_slower
one_convention() {
	local out
	out=$("$V" report "$FIX/pace_off.json" "$FIX/pace_on.json") || return 1
	grep -Eq '^ +off +on +off/on$' <<<"$out" && ! grep -q 'on/off' <<<"$out" &&
		grep -Eq 'bytes over PCIe .* 3\.73$' <<<"$out"
}
check "every ratio of an A/B is off/on (> 1: fewer bytes or less time with the pool)" one_convention
faster() {
	mk fast_on.json pace_on.json "$(pace 5000)" || return 1
	expect 0 '^verdict: time: faster with the pool: off/on 2\.00' "$V" report "$FIX/pace_off.json" "$TMP/fast_on.json"
}
check "a pooled run twice as fast per copy is called faster" faster
one_pair() {
	mk near_on.json pace_on.json "$(pace 9000)" || return 1
	expect 0 'off/on 1\.11 .*one pair cannot carry a time verdict on a noisy machine unless the difference is over 25%' \
		"$V" report "$FIX/pace_off.json" "$TMP/near_on.json"
}
check "one pair within 25% carries no time verdict" one_pair
pairs() {
	local out ns
	for ns in 9000 11000 9500; do mk "on_$ns.json" pace_on.json "$(pace $ns)" || return 1; done
	out=$("$V" report "$FIX/pace_off.json" "$FIX/pace_off.json" "$FIX/pace_off.json" \
		"$TMP/on_9000.json" "$TMP/on_11000.json" "$TMP/on_9500.json") || return 1
	printf '%s\n' "$out"
	grep -Eq 'pairs \(time off/on\) +1\.11 0\.91 1\.05: median 1\.05, spread 0\.91-1\.11' <<<"$out" &&
		grep -q '^verdict: time: no measurable difference in time: off/on 1\.05 (median of 3 pairs' <<<"$out" || return 1
	for ns in 5000 5200 4900; do mk "on_$ns.json" pace_on.json "$(pace $ns)" || return 1; done
	expect 0 '^verdict: time: faster with the pool: off/on 2\.00 \(median of 3 pairs, spread 1\.92-2\.04' \
		"$V" report "$FIX/pace_off.json" "$TMP/on_5000.json" "$FIX/pace_off.json" "$TMP/on_5200.json" \
		"$FIX/pace_off.json" "$TMP/on_4900.json"
}
check "N offs and N ons are N pairs: median, spread, and no measurable difference when the spread straddles 1" pairs
json_ab() {
	"$V" report --json "$FIX/pace_off.json" "$FIX/pace_on.json" >"$TMP/ab.json" || return 1
	python3 - "$TMP/ab.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
v = r["verdict"]
print(r["kind"], v["bytes"], v["time"], v["time_figure"], r["ratio"])
assert r["report"] == "vrampool" and r["kind"] == "ab" and r["convention"].startswith("off/on")
assert v["bytes"] == "fewer" and v["time"] == "slower" and v["time_figure"] == "time per copy (steady)"
assert abs(r["ratio"]["bytes_h2d"] - 3.7327) < 0.01 and abs(r["ratio"]["time"] - 0.714) < 0.01
assert r["on"]["time_per_copy_s"] == 14e-6 and r["on"]["device"]["name"] == "NVIDIA H200"
assert v["time_text"].startswith("time: slower with the pool")
PY
}
check "report --json gives the verdict and the table as values" json_ab
check "report --json of one dump is one object with its figures" \
	bash -c "'$V' report --json '$FIX/v2_smallbudget.json' | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r[\"kind\"]); assert r[\"kind\"]==\"one\" and r[\"dump\"][\"budget\"]==1048576 and \"below the unique\" in r[\"dump\"][\"likely_reason\"]'"
check "the one-dump report shows the steady pace, the command and the device" \
	bash -c "out=\$('$V' report '$FIX/pace_on.json'); echo \"\$out\"; grep -Eq 'pace +time per copy \(steady\) 14\.0 us over the last 128 of 256' <<<\"\$out\" && grep -Eq 'command +python train\.py' <<<\"\$out\" && grep -Eq 'device +NVIDIA H200 \(device 0\)' <<<\"\$out\""
prediction() {
	local out
	out=$("$V" report "$FIX/v2_dry.json" "$FIX/v2_on.json") || return 1
	printf '%s\n' "$out"
	grep -q 'prediction (dry run) against outcome (pool on)' <<<"$out" &&
		grep -Eq 'served from pool +17\.6 MiB +17\.2 MiB' <<<"$out" && ! grep -q 'total' <<<"$out"
}
check "a dry dump beside a real one is prediction against outcome, never summed" prediction
dry_not_summed() {
	local out
	out=$("$V" report "$FIX/rank0.json" "$FIX/v2_dry.json" "$FIX/rank1.json") || return 1
	printf '%s\n' "$out"
	grep -Eq 'bytes requested +(23\.5 MiB +){3}47\.0 MiB$' <<<"$out" && grep -q 'leaves out the 1 dry run' <<<"$out"
}
check "a dry dump among runs is left out of the total" dry_not_summed
budgets() {
	local out dev="d['device'] = {'name': 'NVIDIA H200', 'ordinal': 0}"
	out=$("$V" report "$FIX"/rank0.json "$FIX"/rank1.json) || return 1
	printf '%s\n' "$out"
	grep -Eq 'budget +1\.5 GiB +1\.5 GiB +-$' <<<"$out" || return 1
	mk dev_a.json rank0.json "$dev" && mk dev_b.json rank1.json "$dev" || return 1
	expect 0 'budget +1\.5 GiB +1\.5 GiB +3\.0 GiB$' "$V" report "$TMP/dev_a.json" "$TMP/dev_b.json" || return 1
	mk dev_c.json rank1.json "d['device'] = {'name': 'NVIDIA H200', 'ordinal': 1}" || return 1
	expect 0 'budget +1\.5 GiB +1\.5 GiB +-$' "$V" report "$TMP/dev_a.json" "$TMP/dev_c.json"
}
check "the total sums budgets of one device only, never of different or unknown devices" budgets
stood_down_small() {
	mk small_down.json v2_smallbudget.json "d['pool']['stood_down'] = True; d['pool']['stand_downs'] = 1" || return 1
	out=$("$V" report "$TMP/small_down.json") || return 1
	printf '%s\n' "$out"
	grep -q 'likely reason: the budget is below the unique working set' <<<"$out" && ! grep -q 'augmentation' <<<"$out"
}
check "a small budget that stood down is blamed on the budget, with numbers, not on augmentation" stood_down_small
auto_none() {
	local out
	mk auto_none.json dump_nolayout.json "d.update(layout='auto', layout_source='auto', reason='VRAMPOOL_LAYOUT=auto: looking for the row size')" || return 1
	out=$("$V" report "$TMP/auto_none.json") || return 1
	printf '%s\n' "$out"
	! grep -q 'found automatically' <<<"$out" && grep -q 'layout auto: no row size found' <<<"$out"
}
check "auto that found nothing says so, never 'found automatically'" auto_none

# ---- several dumps that are not an off/on pair -----------------------------------
two_on() {
	local out
	out=$("$V" report "$FIX/v2_on.json" "$FIX/v2_on_budget.json") || return 1
	printf '%s\n' "$out"
	! grep -q 'pool off, then on' <<<"$out" && ! grep -q '^verdict' <<<"$out" &&
		! grep -q 'no saving' <<<"$out" && grep -Eq 'served from pool +17\.2 MiB +8\.8 MiB +26\.0 MiB' <<<"$out"
}
check "two pool runs are two columns and a total, with no A/B verdict" two_on
check "the same pool dump twice is not called off, then on" \
	bash -c "out=\$('$V' report '$FIX/v2_on.json' '$FIX/v2_on.json'); echo \"\$out\"; ! grep -q 'off, then on' <<<\"\$out\" && ! grep -q 'served nothing' <<<\"\$out\""
ranks() {
	local out
	out=$("$V" report "$FIX"/rank0.json "$FIX"/rank1.json "$FIX"/rank2.json "$FIX"/rank3.json) || return 1
	printf '%s\n' "$out"
	grep -Eq '^ +rank 0 +rank 1 +rank 2 +rank 3 +total$' <<<"$out" &&
		grep -Eq 'bytes requested +(23\.5 MiB +){4}94\.0 MiB' <<<"$out" && ! grep -q '^verdict' <<<"$out"
}
check "four rank dumps are one column per rank and a total" ranks
check "an old off/on pair (enabled false, true) is still an A/B pair" \
	expect 0 'verdict: with the pool, 3\.00x' "$V" report "$FIX/dump_on.json" "$FIX/dump_off.json"

# ---- pictures ----------------------------------------------------------------------
png_svg() {
	"$V" report --plot "$TMP/a.png" "$FIX/v2_half.json" >/dev/null || return 1
	"$V" report --plot "$TMP/a.svg" --telemetry "$FIX/telemetry_a.jsonl" "$FIX/v2_half.json" >/dev/null || return 1
	head -c 8 "$TMP/a.png" | od -An -tx1 | tr -d ' \n'; echo
	[ "$(head -c 8 "$TMP/a.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
		python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); print(r.tag); sys.exit(r.tag != '{http://www.w3.org/2000/svg}svg')" "$TMP/a.svg"
}
check "--plot writes a PNG and an SVG (signature, root element)" png_svg
plot_changes() {
	"$V" report --plot "$TMP/b.png" "$FIX/v2_smallbudget.json" >/dev/null || return 1
	"$V" report --plot "$TMP/b.svg" --telemetry "$FIX/telemetry_b.jsonl" "$FIX/v2_half.json" >/dev/null || return 1
	"$V" report --plot "$TMP/a2.png" "$FIX/v2_half.json" >/dev/null || return 1
	cmp -s "$TMP/a.png" "$TMP/a2.png" || { echo "the same data drew two pictures"; return 1; }
	! cmp -s "$TMP/a.png" "$TMP/b.png" && ! cmp -s "$TMP/a.svg" "$TMP/b.svg"
}
check "the picture changes with the data, and only with it" plot_changes
check "--plot of a dump without a curve and no telemetry is exit 2" \
	expect 2 'nothing to draw' "$V" report --plot "$TMP/c.png" "$FIX/dump_on.json"
check "--plot FILE must be .png or .svg" expect 2 'must end in \.png or \.svg' \
	"$V" report --plot "$TMP/c.gif" "$FIX/v2_on.json"
check "--plot into a directory that does not exist is exit 2" \
	expect 2 'nope/c\.png' "$V" report --plot "$TMP/nope/c.png" "$FIX/v2_on.json"
check "a telemetry file cut short by a kill still draws" \
	expect 0 '^plot: ' "$V" report --plot "$TMP/d.png" --telemetry "$FIX/telemetry_cut.jsonl" "$FIX/v2_on.json"
check "a bad telemetry line is exit 2 with its line number" \
	expect 2 'telemetry_bad\.jsonl: line 4: key "rows_seen"' \
	"$V" report --plot "$TMP/d.png" --telemetry "$FIX/telemetry_bad.jsonl" "$FIX/v2_on.json"
REPORT_INPUTS=(notjson.txt truncated.json foreign.json array.json wrongtype.json dump_on.json
	dump_nolayout.json dump_minimal.json big.json bigreal.json negative.json fraction.json ctrl.json
	v2_on.json v2_half.json v2_several.json v2_norepeat.json v2_smallbudget.json v2_dry.json pace_on.json)
memcheck() {
	local f rc
	for f in "${REPORT_INPUTS[@]}"; do
		"$@" "$V" report "$FIX/$f" >/dev/null 2>&1
		rc=$?
		if [ "$rc" -gt 2 ]; then echo "$f: exit $rc"; return 1; fi
	done
	"$@" "$V" report "$FIX"/rank*.json "$FIX/v2_off.json" >/dev/null 2>&1 || return 1
	"$@" "$V" report --json "$FIX/pace_off.json" "$FIX/pace_on.json" "$FIX/v2_off.json" "$FIX/v2_on.json" \
		>/dev/null 2>&1 || return 1
	"$@" "$V" report --json "$FIX/v2_dry.json" "$FIX/v2_on.json" >/dev/null 2>&1 || return 1
	"$@" "$V" report --json "$FIX"/rank*.json >/dev/null 2>&1 || return 1
	"$@" "$V" report "$FIX/v2_dry.json" "$FIX/v2_on.json" >/dev/null 2>&1 || return 1
	"$@" "$V" report --plot "$TMP/m.svg" --telemetry "$FIX/telemetry_b.jsonl" "$FIX/v2_on.json" "$FIX/v2_half.json" \
		>/dev/null 2>&1
}
if [ -n "$TOOL_SANITIZED" ]; then
	# valgrind cannot run an ASan binary: the sanitizers check this build instead.
	check "the sanitizers find no memory error in report on good and malformed dumps" memcheck
elif command -v valgrind >/dev/null; then
	check "valgrind finds no memory error in report on good and malformed dumps" \
		memcheck valgrind -q --error-exitcode=99 --leak-check=full
fi
