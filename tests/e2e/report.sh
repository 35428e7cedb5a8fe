#!/usr/bin/env bash
# End to end: what the shim reports while a job runs and when it ends
# (issues 11 and 12). A job stopped by SIGTERM, SIGINT or SIGHUP leaves its
# final dump and its summary and dies of the same signal (the exit status
# of the same kill without the shim); a program's own handler and SIG_IGN
# are left alone; a Python job ended by KeyboardInterrupt leaves its dump;
# the dump is rewritten while the job runs ("final": false), telemetry
# lines grow; %r and %h name files; a stats directory that does not exist
# is reported at load time.
#
# The waits below poll for a file or a line (at most a minute) so that a
# kill lands mid-run: they wait for a state, they assert no timing.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

ROW=3072
LONG="--samples 400 --row $ROW --batch 32 --epochs 1000000"
PYLOOP=$ROOT/tests/apps/pyloop.py
CUDART=$FAKE/libcudart.so.13

# wait_for CMD...: polls CMD until it succeeds, at most 60 s, or until the
# process $pid (when set) is gone.
wait_for() {
	local _
	for _ in $(seq 600); do
		"$@" 2>/dev/null && return 0
		if [ -n "${pid:-}" ] && ! kill -0 "$pid" 2>/dev/null; then
			"$@" 2>/dev/null && return 0
			echo "process $pid ended while waiting for: $*"
			return 1
		fi
		sleep 0.1
	done
	echo "gave up waiting for: $*"
	return 1
}

# dfl CMD...: execs CMD with SIGINT, SIGTERM and SIGHUP at their default.
# Use it in the background only (it replaces the shell it runs in): a
# script's background jobs start with SIGINT ignored.
dfl() {
	exec python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# lines FILE: the number of lines in FILE.
lines() { wc -l <"$1"; }

# has_lines FILE N: FILE exists and has at least N lines.
has_lines() { [ -f "$1" ] && [ "$(lines "$1")" -ge "$2" ]; }

# json_ok FILE PY: FILE parses as JSON into d and the Python expression PY holds.
json_ok() {
	python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("does not hold:", sys.argv[2])
    print(json.dumps(d)[:600])
sys.exit(0 if ok else 1)
PY
}

# killed_trainer NAME SIG SHIM: runs the trainer for ever (under the shim
# when SHIM is yes, with $TMP/NAME.json), sends SIG once epoch 2 is done,
# and prints the exit status.
killed_trainer() {
	local name=$1 sig=$2 shim=$3 pid rc
	if [ "$shim" = yes ]; then
		# shellcheck disable=SC2086
		dfl env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/$name.json" LD_PRELOAD="$SHIM" \
			"$TRAINER" $LONG >"$TMP/$name.out" 2>"$TMP/$name.err" &
	else
		# shellcheck disable=SC2086
		dfl "$TRAINER" $LONG >"$TMP/$name.out" 2>"$TMP/$name.err" &
	fi
	pid=$!
	wait_for grep -q '^epoch 2 ' "$TMP/$name.out" || { kill -KILL $pid; return 1; }
	kill -"$sig" $pid
	wait $pid
	rc=$?
	echo "$rc"
}

# signal_ends_job SIG: the final dump, the summary, the same exit status as without the shim.
signal_ends_job() {
	local sig=$1 with without
	without=$(killed_trainer "plain-$sig" "$sig" no) || return 1
	with=$(killed_trainer "kill-$sig" "$sig" yes) || return 1
	[ "$without" -gt 128 ] || { echo "without the shim: exit $without"; return 1; }
	[ "$with" = "$without" ] || { echo "exit $with with the shim, $without without"; return 1; }
	json_ok "$TMP/kill-$sig.json" "d['final'] is True and d['ended_by'] == 'SIG$sig' and d['copies']['h2d_calls'] > 0" ||
		return 1
	grep -q '^vrampool: [0-9]* host-to-device copies' "$TMP/kill-$sig.err" || { cat "$TMP/kill-$sig.err"; return 1; }
	grep -q '^vrampool: rows [0-9]* seen' "$TMP/kill-$sig.err"
}
for sig in TERM INT HUP; do
	check "SIG$sig mid-run leaves the final dump and the summary, and the exit status of the same kill without the shim" \
		signal_ends_job $sig
done

# early_ends MODE END SIG [APP]: build/apps/early (or APP) makes one CUDA
# call the shim does not hook (MODE), then exits (END exit) or is sent SIG
# once ready (END wait). The exit status is the one without the shim, and
# the final dump and the summary are there, ended by exit or by SIG.
early_ends() {
	local mode=$1 end=$2 sig=$3 app=${4:-$B/apps/early} tag pid rc0 rc1 ended_by=exit shim
	tag=early-$(basename "$app")-$mode-$end-$sig
	for shim in no yes; do
		if [ "$shim" = yes ]; then
			dfl env VRAMPOOL_STATS="$TMP/$tag.json" LD_PRELOAD="$SHIM" "$app" "$mode" "$end" \
				>"$TMP/$tag.out" 2>"$TMP/$tag.err" &
		else
			dfl "$app" "$mode" "$end" >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
		fi
		pid=$!
		if [ "$end" = wait ]; then
			wait_for grep -q '^ready' "$TMP/$tag.out" || { kill -KILL $pid; return 1; }
			kill -"$sig" $pid
		fi
		wait $pid
		rc1=$?
		[ "$shim" = no ] && rc0=$rc1
	done
	[ "$end" = wait ] && ended_by=SIG$sig
	[ "$rc1" = "$rc0" ] || { echo "exit $rc1 with the shim, $rc0 without"; return 1; }
	json_ok "$TMP/$tag.json" "d['final'] is True and d['ended_by'] == '$ended_by'" || return 1
	grep -q '^vrampool: 0 host-to-device copies' "$TMP/$tag.err" || { cat "$TMP/$tag.err"; return 1; }
}
early_linked() {
	local mode sig
	for mode in setdevice hostalloc stream; do
		early_ends "$mode" exit - || { echo "== $mode, exit"; return 1; }
	done
	for sig in TERM INT HUP; do
		early_ends setdevice wait $sig || { echo "== setdevice, SIG$sig"; return 1; }
	done
	early_ends stream wait TERM || { echo "== stream, SIGTERM"; return 1; }
}
check "a program linked against CUDA that ends (exit, SIGTERM, SIGINT, SIGHUP) after only cudaSetDevice, cudaHostAlloc or cudaStreamCreate leaves its summary and final dump" \
	early_linked
early_lookup() {
	early_ends getproc exit - "$B/apps/early_drv" || return 1
	early_ends getproc wait TERM "$B/apps/early_drv"
}
check "a program that reaches the driver through cuGetProcAddress (a static runtime's way) and ends before its first copy leaves its summary and final dump" \
	early_lookup
non_cuda_silent() {
	local rc
	# shellcheck disable=SC2016
	(dfl env VRAMPOOL_STATS="$TMP/nocuda.json" LD_PRELOAD="$SHIM" sh -c 'kill -TERM $$; sleep 5') \
		>"$TMP/nocuda.out" 2>"$TMP/nocuda.err"
	rc=$?
	[ "$rc" = 143 ] || { echo "exit $rc"; return 1; }
	[ ! -e "$TMP/nocuda.json" ] || { echo "a dump was written"; return 1; }
	[ ! -s "$TMP/nocuda.err" ] || { cat "$TMP/nocuda.err"; return 1; }
	env VRAMPOOL_STATS="$TMP/nocuda2.json" LD_PRELOAD="$SHIM" "$B/apps/early_drv" none exit \
		>/dev/null 2>"$TMP/nocuda2.err"
	[ $? = 7 ] && [ ! -e "$TMP/nocuda2.json" ] && [ ! -s "$TMP/nocuda2.err" ]
}
check "a process that never touches CUDA (a shell, a program not linked against it) stays silent, at exit and under SIGTERM" \
	non_cuda_silent

# The dump on disk while the job runs: "final": false, then, after SIGKILL, still there.
running_dump() {
	local pid
	# shellcheck disable=SC2086
	dfl env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/run.json" VRAMPOOL_TELEMETRY_S=1 LD_PRELOAD="$SHIM" \
		"$TRAINER" $LONG >"$TMP/run.out" 2>"$TMP/run.err" &
	pid=$!
	wait_for test -s "$TMP/run.json" || { kill -KILL $pid; return 1; }
	json_ok "$TMP/run.json" "d['final'] is False and d['ended_by'] is None and d['elapsed_s'] >= 0" ||
		{ kill -KILL $pid; return 1; }
	# rewritten: rows grow from one rewrite to the next
	local first
	first=$(jget "$TMP/run.json" rows.seen)
	wait_for json_ok "$TMP/run.json" "d['rows']['seen'] > $first" || { kill -KILL $pid; return 1; }
	kill -KILL $pid
	wait $pid
	json_ok "$TMP/run.json" "d['final'] is False and d['rows']['seen'] > $first" || return 1
	# no temporary file left beside it
	! compgen -G "$TMP/run.json.tmp*" >/dev/null
}
check "the dump is rewritten while the job runs (final false) and survives a SIGKILL" running_dump

telemetry_grows() {
	local pid
	# shellcheck disable=SC2086
	dfl env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_TELEMETRY="$TMP/tel.jsonl" VRAMPOOL_TELEMETRY_S=1 LD_PRELOAD="$SHIM" \
		"$TRAINER" $LONG >"$TMP/tel.out" 2>"$TMP/tel.err" &
	pid=$!
	wait_for has_lines "$TMP/tel.jsonl" 3 || { kill -KILL $pid; return 1; }
	kill -TERM $pid
	wait $pid
	python3 - "$TMP/tel.jsonl" <<'PY'
import json, sys
keys = ["t", "elapsed_s", "pid", "rank", "rows_seen", "rows_hits", "bytes_requested", "bytes_h2d",
        "bytes_served", "pool_bytes", "pool_budget", "state", "stood_aside", "ledger",
        "format", "version", "host", "mode", "layout"]    # issue 19 (schema.sh validates them)
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 4, len(rows)                  # three while running, one at the end
for r in rows:
    assert sorted(r) == sorted(keys), sorted(r)
    assert all(s["decision"] in ("pooling", "stood_aside") for s in r["ledger"]), r["ledger"]
    assert r["bytes_requested"] == r["bytes_h2d"] + r["bytes_served"], r
for a, b in zip(rows, rows[1:]):
    assert b["t"] >= a["t"] and b["elapsed_s"] >= a["elapsed_s"], (a, b)
    assert b["rows_seen"] >= a["rows_seen"] and b["bytes_requested"] >= a["bytes_requested"], (a, b)
assert rows[-1]["rows_seen"] > rows[0]["rows_seen"], (rows[0], rows[-1])
assert rows[-1]["state"] == "active" and rows[-1]["rows_hits"] > 0, rows[-1]
PY
}
check "telemetry lines parse, carry every key and grow" telemetry_grows

own_handler_kept() {
	local pid rc
	dfl env VRAMPOOL_STATS="$TMP/own.json" LD_PRELOAD="$SHIM" python3 "$PYLOOP" "$CUDART" --term-handler \
		>"$TMP/own.out" 2>"$TMP/own.err" &
	pid=$!
	wait_for grep -q '^ready' "$TMP/own.out" || { kill -KILL $pid; return 1; }
	kill -TERM $pid
	wait $pid
	rc=$?
	[ "$rc" = 7 ] || { echo "exit $rc"; cat "$TMP/own.out" "$TMP/own.err"; return 1; }
	grep -q '^own handler ran' "$TMP/own.out" || return 1
	# the program saw the default, not the shim's handler, as the one it replaced
	grep -q '^previous SIGTERM handler: SIG_DFL' "$TMP/own.out" || { cat "$TMP/own.out"; return 1; }
	json_ok "$TMP/own.json" "d['final'] is True and d['ended_by'] == 'exit'"
}
check "a program's own SIGTERM handler, set after the first CUDA call, is kept" own_handler_kept

ignored_stays_ignored() {
	local pid rc
	# SIG_IGN is inherited through exec: the trainer starts with SIGTERM ignored
	dfl sh -c "trap '' TERM; exec env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS='$TMP/ign.json' LD_PRELOAD='$SHIM' \
		'$TRAINER' --samples 400 --row $ROW --batch 32 --epochs 400" >"$TMP/ign.out" 2>"$TMP/ign.err" &
	pid=$!
	wait_for grep -q '^epoch 2 ' "$TMP/ign.out" || { kill -KILL $pid; return 1; }
	kill -TERM $pid || { echo "the trainer ended before SIGTERM was sent"; return 1; }
	wait $pid
	rc=$?
	[ "$rc" = 0 ] || { echo "exit $rc"; tail -n 3 "$TMP/ign.out" "$TMP/ign.err"; return 1; }
	grep -q 'verified OK' "$TMP/ign.out" || return 1
	json_ok "$TMP/ign.json" "d['final'] is True and d['ended_by'] == 'exit'"
}
check "SIGTERM ignored by the program stays ignored" ignored_stays_ignored

# signal_routes: a handler set, then SIG_DFL set back, through each of the
# C library's functions (tests/apps/sigroutes.c): the program prints and
# ends as it does without the shim, and when it ends by SIGTERM at its
# default the shim's dump says so.
signal_routes() {
	local set reset tag plain rc0 rc1 bad=0
	for set in signal sigaction bsd_signal ssignal sysv_signal __sysv_signal sigset; do
		for reset in none signal "$set"; do
			tag=route-$set-$reset
			[ -e "$TMP/$tag.0" ] && continue
			(dfl "$B/apps/sigroutes" "$set" "$reset") >"$TMP/$tag.0" 2>&1
			rc0=$?
			(dfl env VRAMPOOL_STATS="$TMP/$tag.json" VRAMPOOL_QUIET=1 LD_PRELOAD="$SHIM" \
				"$B/apps/sigroutes" "$set" "$reset") >"$TMP/$tag.1" 2>&1
			rc1=$?
			plain=143
			[ "$reset" = none ] && plain=42
			if [ "$rc0" != "$plain" ] || [ "$rc1" != "$rc0" ] || ! cmp -s "$TMP/$tag.0" "$TMP/$tag.1"; then
				echo "== $set then $reset: exit $rc1 with the shim, $rc0 without (want $plain)"
				diff "$TMP/$tag.0" "$TMP/$tag.1"
				bad=1
			elif [ "$reset" != none ] &&
				! json_ok "$TMP/$tag.json" "d['final'] is True and d['ended_by'] == 'SIGTERM'"; then
				echo "== $set then $reset: no final dump ended by SIGTERM"
				bad=1
			fi
		done
	done
	return $bad
}
check "a handler set and SIG_DFL set back through signal, sigaction, bsd_signal, ssignal, sysv_signal, __sysv_signal or sigset: the program sees and ends as without the shim" \
	signal_routes

# A handler set to run once (SA_RESETHAND, sysv_signal): the first SIGTERM
# runs it, the program is told SIG_DFL after, and the second SIGTERM ends
# it by the default, as without the shim, leaving the final dump.
oneshot_handler() {
	local route tag rc0 rc1
	for route in sigaction sysv_signal; do
		tag=oneshot-$route
		(dfl "$B/apps/oneshot" "$route") >"$TMP/$tag.0" 2>&1
		rc0=$?
		(dfl env VRAMPOOL_STATS="$TMP/$tag.json" VRAMPOOL_QUIET=1 LD_PRELOAD="$SHIM" \
			"$B/apps/oneshot" "$route") >"$TMP/$tag.1" 2>&1
		rc1=$?
		if [ "$rc0" != 143 ] || [ "$rc1" != 143 ] || ! cmp -s "$TMP/$tag.0" "$TMP/$tag.1"; then
			echo "== $route: exit $rc1 with the shim, $rc0 without (want 143)"
			diff "$TMP/$tag.0" "$TMP/$tag.1"
			return 1
		fi
		grep -q '^handler ran' "$TMP/$tag.1" || { cat "$TMP/$tag.1"; return 1; }
		json_ok "$TMP/$tag.json" "d['final'] is True and d['ended_by'] == 'SIGTERM'" ||
			{ echo "== $route: no final dump ended by SIGTERM"; return 1; }
	done
}
check "a handler that runs once (SA_RESETHAND, sysv_signal): the second SIGTERM ends the job as without the shim and leaves the final dump" \
	oneshot_handler

python_keyboard_interrupt() {
	local pid rc without
	dfl python3 "$PYLOOP" "$CUDART" >"$TMP/py0.out" 2>"$TMP/py0.err" &
	pid=$!
	wait_for grep -q '^ready' "$TMP/py0.out" || { kill -KILL $pid; return 1; }
	kill -INT $pid
	wait $pid
	without=$?
	dfl env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/py.json" VRAMPOOL_TELEMETRY_S=1 LD_PRELOAD="$SHIM" \
		python3 "$PYLOOP" "$CUDART" >"$TMP/py.out" 2>"$TMP/py.err" &
	pid=$!
	wait_for grep -q '^ready' "$TMP/py.out" || { kill -KILL $pid; return 1; }
	# the running dump shows the pool serving before the interrupt comes
	wait_for json_ok "$TMP/py.json" "d['rows']['hits'] > 0" >/dev/null || { kill -KILL $pid; return 1; }
	kill -INT $pid
	wait $pid
	rc=$?
	if [ "$without" != 130 ] || [ "$rc" != 130 ]; then
		echo "exit $rc with the shim, $without without"
		return 1
	fi
	grep -q '^KeyboardInterrupt' "$TMP/py.err" || { cat "$TMP/py.err"; return 1; }
	grep -q '^vrampool: [0-9]* host-to-device copies' "$TMP/py.err" || { cat "$TMP/py.err"; return 1; }
	json_ok "$TMP/py.json" "d['final'] is True and d['ended_by'] == 'SIGINT' and d['rows']['hits'] > 0"
}
check "a Python job ended by KeyboardInterrupt leaves its dump and summary and dies of SIGINT" \
	python_keyboard_interrupt

rank_and_host() {
	local host pid
	host=$(python3 -c 'import re, socket; print(re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()))')
	env RANK=3 LOCAL_RANK=1 VRAMPOOL_STATS="$TMP/r%r-%h-%p.json" LD_PRELOAD="$SHIM" \
		"$TRAINER" --samples 64 --epochs 1 >"$TMP/rank.out" 2>"$TMP/rank.err" &
	pid=$!
	wait $pid || return 1
	json_ok "$TMP/r3-$host-$pid.json" "d['rank'] == 3 and d['host'] is not None and d['pid'] == $pid" || return 1
	env -u RANK -u LOCAL_RANK -u OMPI_COMM_WORLD_RANK -u PMI_RANK SLURM_PROCID=5 \
		VRAMPOOL_STATS="$TMP/s%r.json" LD_PRELOAD="$SHIM" "$TRAINER" --samples 64 --epochs 1 >/dev/null 2>&1 || return 1
	json_ok "$TMP/s5.json" "d['rank'] == 5" || return 1
	env -u RANK -u LOCAL_RANK -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u SLURM_PROCID \
		VRAMPOOL_STATS="$TMP/n%r.json" LD_PRELOAD="$SHIM" "$TRAINER" --samples 64 --epochs 1 >/dev/null 2>&1 || return 1
	json_ok "$TMP/nnorank.json" "d['rank'] is None" || return 1   # issue 19: not n0, rank 0's name
	[ ! -e "$TMP/n0.json" ]
}
check "%r (RANK, else SLURM_PROCID, else norank) and %h name the dump, and the dump records the rank" rank_and_host

missing_stats_dir() {
	# a process that never uses CUDA: the line comes at load time
	env VRAMPOOL_STATS="$TMP/nope/s.json" LD_PRELOAD="$SHIM" true 2>"$TMP/nodir0.err" || return 1
	[ "$(grep -c "^vrampool: VRAMPOOL_STATS: cannot write in '$TMP/nope'" "$TMP/nodir0.err")" = 1 ] ||
		{ cat "$TMP/nodir0.err"; return 1; }
	[ "$(lines "$TMP/nodir0.err")" = 1 ] || return 1
	# the job itself runs on, and says so first
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/nope/s.json" VRAMPOOL_TELEMETRY_S=1 LD_PRELOAD="$SHIM" \
		"$TRAINER" --samples 400 --row $ROW --batch 32 --epochs 4 >"$TMP/nodir.out" 2>"$TMP/nodir.err" || return 1
	grep -q 'verified OK' "$TMP/nodir.out" || return 1
	head -n 1 "$TMP/nodir.err" | grep -q "^vrampool: VRAMPOOL_STATS: cannot write in '$TMP/nope'" ||
		{ cat "$TMP/nodir.err"; return 1; }
	grep -q '^vrampool: [0-9]* host-to-device copies' "$TMP/nodir.err" || return 1
	# at load only: the periodic and the final writes that fail the same way say nothing more
	[ "$(grep -c "$TMP/nope" "$TMP/nodir.err")" = 1 ] || { cat "$TMP/nodir.err"; return 1; }
}
check "a stats directory that does not exist is reported at load time only, and the job runs on" missing_stats_dir

stats_to_a_device_or_fifo() {
	# a stats path through a link to a FIFO a collector reads: the dump
	# arrives there, and the link and the FIFO stay what they were
	mkfifo "$TMP/collector" || return 1
	ln -s "$TMP/collector" "$TMP/collector.link" || return 1
	cat "$TMP/collector" >"$TMP/collected.json" &
	local reader=$!
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS="$TMP/collector.link" LD_PRELOAD="$SHIM" \
		"$TRAINER" --samples 64 --row $ROW --batch 32 --epochs 2 >"$TMP/fifo.out" 2>"$TMP/fifo.err" ||
		{ kill $reader; return 1; }
	wait $reader
	grep -q 'verified OK' "$TMP/fifo.out" || return 1
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["final"] is True' \
		"$TMP/collected.json" || { head -c 300 "$TMP/collected.json"; return 1; }
	[ -L "$TMP/collector.link" ] && [ -p "$TMP/collector" ] || return 1
	! grep -q 'could not write' "$TMP/fifo.err" || { cat "$TMP/fifo.err"; return 1; }
	# /dev/null takes the dump quietly and stays a device
	env VRAMPOOL_LAYOUT=$ROW VRAMPOOL_STATS=/dev/null LD_PRELOAD="$SHIM" \
		"$TRAINER" --samples 64 --row $ROW --batch 32 --epochs 2 >/dev/null 2>"$TMP/null.err" || return 1
	[ -c /dev/null ] || return 1
	! grep -q 'could not write\|cannot write' "$TMP/null.err" || { cat "$TMP/null.err"; return 1; }
}
check "a stats path naming a FIFO (through a link) or /dev/null is written in place" stats_to_a_device_or_fifo

control_characters_escaped() {
	local dir=$TMP/$'esc\033[31mred'
	env VRAMPOOL_STATS="$dir/s.json" LD_PRELOAD="$SHIM" true 2>"$TMP/esc.err" || return 1
	grep -q 'esc\\x1b\[31mred' "$TMP/esc.err" || { cat -v "$TMP/esc.err"; return 1; }
	! grep -q $'\033' "$TMP/esc.err"
}
check "a path with control characters is printed escaped" control_characters_escaped
