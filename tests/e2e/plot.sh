#!/usr/bin/env bash
# End-to-end tests of `vrampool report --plot` (issue 19): dumps of real
# runs of the trainer on the emulated device (off, on, dry) and the four
# DDP rank dumps of tests/tool. The SVG is parsed with python3's
# xml.etree: well-formed, its tick labels and legend are <text> (no glyph
# outlines), the ticks are round (1-2-5 steps) and distinct, coinciding
# curves are drawn once and named as one entry, and a string from a dump
# with markup in it comes back as written. An off run is told why it has
# nothing to draw. The PNG is still a PNG.
source "$(dirname "$0")/lib.sh"
FIX=$ROOT/tests/tool
V=$VRAMPOOL_BIN
T=(--samples 160 --row 3072 --batch 16 --epochs 3 --quiet)
cd "$TMP" || exit 1

# svg_check FILE CHECK: python3 parses the SVG FILE and runs CHECK, a
# Python expression over `texts` (the <text> strings, in order), `root`
# and `lines` (the <polyline> elements); exit 0 when it is true.
svg_check() {
	python3 - "$1" "$2" <<'PY'
import math, re, sys, xml.etree.ElementTree as E
ns = '{http://www.w3.org/2000/svg}'
root = E.parse(sys.argv[1]).getroot()
texts = [t.text or '' for t in root.iter(ns + 'text')]
lines = list(root.iter(ns + 'polyline'))

def round_ticks(labels, unit):
    """Labels of one axis: one unit, 1-2-5 steps from 0, each distinct."""
    vals = []
    for l in labels:
        m = re.fullmatch(r'(\d+(?:\.\d+)?)' + unit, l)
        if not m:
            return False
        vals.append(float(m.group(1)))
    if len(vals) < 2 or vals[0] != 0 or len(set(labels)) != len(labels):
        return False
    step = vals[1]
    norm = step / 10 ** math.floor(math.log10(step) + 1e-9)
    return (any(abs(norm - k) < 1e-9 for k in (1, 2, 5)) and
            all(abs(v - i * step) < 1e-9 * (i + 1) for i, v in enumerate(vals)))

def axis(unit):
    return [t for t in texts if re.fullmatch(r'[\d.]+' + unit, t)]

ok = eval('(' + sys.argv[2] + ')')
print(texts)
sys.exit(0 if ok else 1)
PY
}

real_runs() {
	local m
	for m in off on dry; do
		LD_PRELOAD=$SHIM VRAMPOOL=$m VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=3072 \
			VRAMPOOL_STATS=$TMP/$m.json VRAMPOOL_TELEMETRY=$TMP/$m.jsonl \
			"$TRAINER" "${T[@]}" || return 1
	done
	test -s off.json && test -s on.json && test -s dry.json
}
check "the trainer writes an off, an on and a dry dump" real_runs

check "an off run has nothing to draw because the pool was off, in one line, not an older vrampool" \
	bash -c '
		out=$("$1" report --plot "$2/o.svg" "$2/off.json" 2>&1 >/dev/null); rc=$?
		printf "%s\n" "$out"
		[ "$rc" -eq 2 ] && [ "$(printf "%s\n" "$out" | wc -l)" -eq 1 ] &&
			grep -q "the run was made with the pool off, which keeps none: run it with the pool on or dry to get one" <<<"$out" &&
			! grep -q older <<<"$out" && [ ! -e "$2/o.svg" ]' _ "$V" "$TMP"

plot_real() {
	"$V" report --plot "$TMP/p.svg" --telemetry "$TMP/on.jsonl" "$TMP/on.json" "$TMP/dry.json" >/dev/null &&
		svg_check "$TMP/p.svg" "root.tag == ns + 'svg' and
			round_ticks(axis(' (B|KiB|MiB|GiB)'), ' (?:B|KiB|MiB|GiB)') and
			axis('%') == 2 * axis('%')[:6] and round_ticks(axis('%')[:6], '%') and
			round_ticks(axis(' s'), ' s') and 'served, % of matched bytes' in texts and
			len([t for t in texts if t.startswith('pid ') and not t.endswith(('share', 'fill'))]) == 2 and
			any(t.endswith(': hit share') for t in texts) and
			not list(root.iter(ns + 'path')) and not list(root.iter(ns + 'symbol'))"
}
check "the SVG is well-formed XML with its ticks, axis labels and legend as text, the ticks round" plot_real

ticks_one_unit() {
	# All byte ticks in one unit, as the one axis they are.
	"$V" report --plot "$TMP/u.svg" "$TMP/on.json" >/dev/null &&
		svg_check "$TMP/u.svg" "len(set(t.split()[1] for t in axis(' (B|KiB|MiB|GiB)'))) == 1 and
			round_ticks(axis(' (B|KiB|MiB|GiB)'), ' ' + axis(' (B|KiB|MiB|GiB)')[0].split()[1])"
}
check "the byte axis is ticked in one unit at a 1-2-5 step" ticks_one_unit

ranks() {
	"$V" report --plot "$TMP/r.svg" "$FIX"/rank0.json "$FIX"/rank1.json "$FIX"/rank2.json \
		"$FIX"/rank3.json >/dev/null &&
		svg_check "$TMP/r.svg" "'ranks 0-3 (identical) (budget 1.5 GiB: past the unique set)' in texts and
			len([l for l in lines if l.get('stroke-width') == '2.00']) == 2"
}
check "four ranks with one curve are drawn once, with one entry: ranks 0-3 (identical)" ranks

ranks_differ() {
	python3 - "$FIX" "$TMP" <<'PY' || return 1
import json, sys
for r in range(4):
    d = json.load(open(f'{sys.argv[1]}/rank{r}.json'))
    if r == 2:
        d['whatif']['curve'] = [[b, s * 9 // 10] for b, s in d['whatif']['curve']]
    json.dump(d, open(f'{sys.argv[2]}/rk{r}.json', 'w'))
PY
	"$V" report --plot "$TMP/rd.svg" "$TMP"/rk0.json "$TMP"/rk1.json "$TMP"/rk2.json "$TMP"/rk3.json \
		>/dev/null &&
		svg_check "$TMP/rd.svg" "'ranks 0-1, 3 (identical) (budget 1.5 GiB: past the unique set)' in texts and
			'rank 2 (budget 1.5 GiB: past the unique set)' in texts and
			len({(l.get('stroke'), l.get('stroke-dasharray')) for l in lines
			     if l.get('stroke-width') == '2.00'}) == 2"
}
check "a rank whose curve differs gets its own colour, dash pattern and legend entry" ranks_differ

markup() {
	python3 - "$FIX" "$TMP" <<'PY' || return 1
import json, sys
d = json.load(open(f'{sys.argv[1]}/rank0.json'))
d['rank'] = '<a href="x">&amp;</a> \'q\''
json.dump(d, open(f'{sys.argv[2]}/mk.json', 'w'))
PY
	"$V" report --plot "$TMP/mk.svg" "$TMP/mk.json" >/dev/null &&
		svg_check "$TMP/mk.svg" "texts.count('rank <a href=\"x\">&amp;</a> \\'q\\' (budget 1.5 GiB: past the unique set)') == 1 and
			not list(root.iter(ns + 'a'))"
}
check "markup in a dump's rank is text in the SVG, not elements" markup

png() {
	"$V" report --plot "$TMP/p.png" --telemetry "$TMP/on.jsonl" "$TMP/on.json" "$TMP/dry.json" >/dev/null &&
		[ "$(head -c 8 "$TMP/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}
check "the PNG is still drawn with cairo" png
