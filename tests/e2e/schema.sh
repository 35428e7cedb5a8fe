#!/usr/bin/env bash
# End to end (issue 19, items 1 and 5): the dumps and telemetry lines a
# dashboard ingests. Real dumps of the trainer validate against the
# checked-in JSON Schemas (docs/schema/, tests/e2e/schema.py): on, off,
# dry, a periodic rewrite ("final": false), a SIGTERM's, and the telemetry
# lines; they say who wrote them, for what and when (format, version,
# host, rank, mode, command, start and end, the device the probe read);
# an off run and an on run of the same job count the same pace windows
# and copies; an existing file that is not a dump is left alone.
#
# The waits poll for a state (at most a minute); nothing here is timed.
source "$(dirname "$0")/lib.sh"

ROW=1024
JOB=(--samples 300 --row $ROW --batch 16 --epochs 3 --seed 5)
LONG=(--samples 300 --row $ROW --batch 16 --epochs 1000000)
VERSION=$(cat "$ROOT/VERSION")

if ! python3 -c 'import jsonschema' 2>/dev/null; then
	echo "SKIP: the dumps and telemetry validate against docs/schema/ (python3-jsonschema is not installed)"
	exit 0
fi

# trainer_dump NAME ENV...: the short job under the shim, its dump $TMP/NAME.json.
trainer_dump() {
	local name=$1; shift
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_QUIET=1 VRAMPOOL_STATS="$TMP/$name.json" "$@" LD_PRELOAD="$SHIM" \
		"$TRAINER" "${JOB[@]}" >"$TMP/$name.out" 2>"$TMP/$name.err" || { cat "$TMP/$name.err"; return 1; }
}

# json_ok FILE PY: FILE parses as JSON into d and the Python expression PY holds.
json_ok() {
	python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    print("does not hold:", sys.argv[2])
    print(json.dumps(d)[:1500])
    sys.exit(1)
PY
}

validate() { python3 "$ROOT/tests/e2e/schema.py" "$@"; }

# Who wrote it, for what, when: the same in every mode.
WHO="d['format'] == 2 and d['version'] == '$VERSION' and d['rank'] is None and isinstance(d['host'], str) \
and d['command'][0] == '$TRAINER' and d['command'][1:3] == ['--samples', '300'] \
and d['started'].endswith('Z') and d['ended_unix_ms'] >= d['started_unix_ms'] > 1.7e12 \
and d['final'] is True and d['ended_by'] == 'exit'"

on_dump() {
	trainer_dump on || return 1
	validate dump "$TMP/on.json" || return 1
	json_ok "$TMP/on.json" "$WHO and d['mode'] == 'on' and d['device'] == {'name': 'fakecuda emulated device', \
'ordinal': 0} and d['pool']['state'] == 'active'"
}
check "an on dump validates and says who wrote it, for what, when, on which device" on_dump

off_dump() {
	trainer_dump off VRAMPOOL=off || return 1
	validate dump "$TMP/off.json" || return 1
	# no probe ran: no device named, and no CUDA call at exit to find one
	json_ok "$TMP/off.json" "$WHO and d['mode'] == 'off' and d['device'] is None"
}
check "an off dump validates, with no device (no probe ran)" off_dump

dry_dump() {
	trainer_dump dry VRAMPOOL=dry || return 1
	validate dump "$TMP/dry.json" || return 1
	json_ok "$TMP/dry.json" "$WHO and d['mode'] == 'dry' and d['device'] is None"
}
check "a dry dump validates" dry_dump

# The pace counts every program copy in every mode, in windows defined the same way.
same_pace() {
	[ -s "$TMP/on.json" ] && [ -s "$TMP/off.json" ] && [ -s "$TMP/dry.json" ] || return 1
	python3 - "$TMP/on.json" "$TMP/off.json" "$TMP/dry.json" <<'PY'
import json, sys
on, off, dry = (json.load(open(p)) for p in sys.argv[1:])
for d in (on, off, dry):
    p = d["pace"]
    assert p["copies"] == d["copies"]["h2d_calls"] and p["bytes"] == d["bytes"]["requested"], (d["mode"], p)
    assert sum(w[0] for w in p["windows"]) == p["copies"] and sum(w[1] for w in p["windows"]) == p["bytes"], p
    assert sum(w[2] for w in p["windows"]) == p["ns"], p
    assert all(w[0] == p["window_copies"] for w in p["windows"][:-1]), p
    assert 32 < len(p["windows"]) <= 64 and p["steady"]["from_window"] == len(p["windows"]) // 2, p
    assert p["steady"]["copies"] == sum(w[0] for w in p["windows"][len(p["windows"]) // 2:]), p
for key in ("window_copies", "copies", "bytes"):
    assert on["pace"][key] == off["pace"][key] == dry["pace"][key], (key, on["pace"], off["pace"])
assert len(on["pace"]["windows"]) == len(off["pace"]["windows"]) == len(dry["pace"]["windows"])
assert [w[:2] for w in on["pace"]["windows"]] == [w[:2] for w in off["pace"]["windows"]]
assert on["pace"]["steady"]["copies"] == off["pace"]["steady"]["copies"]
PY
}
check "an off run and an on run of the trainer count the same pace windows and copies (dry too)" same_pace

# A job killed mid-run: its periodic rewrite, telemetry lines and SIGTERM dump.
dfl() {
	exec python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# wait_for CMD...: polls CMD until it succeeds, for at most 60 s or until the process $pid is gone.
wait_for() {
	local until=$((SECONDS + 60))
	while [ $SECONDS -lt $until ]; do
		"$@" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || { "$@" 2>/dev/null; return; }
		sleep 0.1
	done
	echo "gave up waiting for: $*"
	return 1
}

# has_lines FILE N: FILE exists and has at least N lines.
has_lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

running_job() {
	dfl env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/run.json" VRAMPOOL_TELEMETRY="$TMP/tel.jsonl" \
		VRAMPOOL_TELEMETRY_S=1 RANK=3 LD_PRELOAD="$SHIM" "$TRAINER" "${LONG[@]}" \
		>"$TMP/run.out" 2>"$TMP/run.err" &
	pid=$!
	wait_for json_ok "$TMP/run.json" "d['final'] is False and d['pace']['copies'] > 0" || { kill -KILL $pid; return 1; }
	cp "$TMP/run.json" "$TMP/periodic.json"
	wait_for has_lines "$TMP/tel.jsonl" 2 || { kill -KILL $pid; return 1; }
	kill -TERM $pid
	wait $pid
	[ $? -eq 143 ] || { cat "$TMP/run.err"; return 1; }
}
check "a job with a stats path and telemetry runs until SIGTERM" running_job

periodic_dump() {
	validate dump "$TMP/periodic.json" || return 1
	json_ok "$TMP/periodic.json" "d['final'] is False and d['ended_by'] is None and d['rank'] == 3 \
and d['ended_unix_ms'] >= d['started_unix_ms'] and d['mode'] == 'on'"
}
check "a periodic rewrite (final false) validates and carries the rank as a number" periodic_dump

sigterm_dump() {
	validate dump "$TMP/run.json" || return 1
	json_ok "$TMP/run.json" "d['final'] is True and d['ended_by'] == 'SIGTERM' and d['rank'] == 3 \
and d['device']['name'] == 'fakecuda emulated device'"
}
check "a SIGTERM's final dump validates" sigterm_dump

telemetry_lines() {
	validate telemetry "$TMP/tel.jsonl" || return 1
	python3 - "$TMP/tel.jsonl" "$VERSION" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 3, len(rows)
for r in rows:
    assert r["format"] == 2 and r["version"] == sys.argv[2] and r["rank"] == 3, r
    assert r["mode"] == "on" and r["layout"] == "1024" and isinstance(r["host"], str), r
PY
}
check "telemetry lines validate and carry format, version, host, rank, mode and layout" telemetry_lines

# An existing file that is not a dump is the user's: left alone, one line, the job unaffected.
foreign_file() {
	printf 'precious notes\n' >"$TMP/notes.txt"
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_QUIET=1 VRAMPOOL_STATS="$TMP/notes.txt" LD_PRELOAD="$SHIM" \
		"$TRAINER" "${JOB[@]}" >"$TMP/notes.out" 2>"$TMP/notes.err" || { cat "$TMP/notes.err"; return 1; }
	grep -qx 'verified OK' "$TMP/notes.out" || return 1
	[ "$(cat "$TMP/notes.txt")" = "precious notes" ] || { echo "the file was replaced"; return 1; }
	[ "$(grep -c 'VRAMPOOL_STATS' "$TMP/notes.err")" = 1 ] || { cat "$TMP/notes.err"; return 1; }
	grep -q "VRAMPOOL_STATS: '$TMP/notes.txt' is an existing file that is not a vrampool dump" "$TMP/notes.err" ||
		{ cat "$TMP/notes.err"; return 1; }
	! compgen -G "$TMP/notes.txt.tmp*" >/dev/null
}
check "an existing file that is not a dump is left alone, with one line naming VRAMPOOL_STATS" foreign_file

dump_replaced() {
	[ -s "$TMP/off.json" ] || return 1
	cp "$TMP/off.json" "$TMP/again.json"
	trainer_dump again || return 1
	json_ok "$TMP/again.json" "d['mode'] == 'on'" || return 1
	: >"$TMP/empty.json"
	trainer_dump empty || return 1
	json_ok "$TMP/empty.json" "d['mode'] == 'on'"
}
check "an earlier dump, or an empty file, is replaced by the new dump" dump_replaced
