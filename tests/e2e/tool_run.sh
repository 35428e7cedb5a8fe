#!/usr/bin/env bash
# End-to-end tests of `vrampool run` on the emulated device: the flags reach
# the shim (read back from its JSON dump, or from the program's environment),
# bad flags and inherited variables stop the launch before the program
# starts (with the library's own message), the exit status passes through
# (a code, a signal, a command that does not exist), --ab prints the
# comparison with a verdict on bytes and time and skips the second run when
# the first never reached CUDA, --repeat N interleaves N pairs, an existing
# LD_PRELOAD survives, the dump is kept in the current directory with the
# command that reads it (an older one there never taken for it), --stats
# refuses a file that is not a dump without --force, a multi-process run reports the processes that copied (several
# side by side), the installed layout finds its library, and a program whose
# copies cannot be seen gets the warning. Signals: one sent to the launcher
# alone is passed on, with SIGKILL after --kill-after; Ctrl-C reaches the
# program once; the launcher ends as the program did; an interrupted run 1
# ends --ab.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SRC=$ROOT/tests/tool
V=$VRAMPOOL_BIN
T=(--samples 120 --row 3072 --batch 16 --epochs 3 --quiet)

# json_is FILE KEY VALUE: the dump's KEY (a.b path) prints as VALUE.
json_is() {
	local got
	got=$(jget "$1" "$2") || return 1
	echo "$2 = $got (want $3)"
	[ "$got" = "$3" ]
}

check "the library, the emulated device and the trainer are built" \
	test -f "$SHIM" -a -f "$FAKE/libcudart.so.13" -a -x "$TRAINER"

cd "$TMP" || exit 1
gcc -std=c11 -I"$CUDA_HOME/include" -o copier "$SRC/copier.c" -L"$CUDA_HOME/lib64" -lcudart
gcc -std=c11 -I"$CUDA_HOME/include" -DPLAIN_RUNTIME -o plain_static "$SRC/plain.c" \
	-L"$CUDA_HOME/lib64" -lcudart_static -ldl -lpthread -lrt
gcc -std=c11 -DSHAPE_MAIN -DSHAPE_STATIC_NODL -o static_nodl "$SRC/shapes.c"
cat >marker.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* Writes this process's LD_PRELOAD into $MARKER when it loads. */
__attribute__((constructor)) static void marker(void)
{
	const char *path = getenv("MARKER");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (f) {
		fprintf(f, "%ld %s\n", (long)getpid(), getenv("LD_PRELOAD"));
		fclose(f);
	}
}
EOF
gcc -shared -fPIC -o marker.so marker.c

# ---- flags reach the shim ---------------------------------------------------
run_layout() {
	"$V" run --layout 3072 --stats "$TMP/on.json" -- "$TRAINER" "${T[@]}" || return 1
	json_is on.json layout 3072 && json_is on.json enabled true
}
check "--layout and --stats reach the shim: the dump names the layout" run_layout
check "the run with a layout serves rows from the pool" \
	bash -c "[ \"\$(python3 -c 'import json;print(json.load(open(\"$TMP/on.json\"))[\"bytes\"][\"served_from_pool\"])')\" -gt 0 ]"
run_off() {
	"$V" run --off --layout 3072 --stats "$TMP/off.json" -- "$TRAINER" "${T[@]}" || return 1
	json_is off.json enabled false && json_is off.json bytes.served_from_pool 0
}
check "--off reaches the shim: the dump says pass-through" run_off
check "--layout auto passes through to the shim without a complaint" \
	bash -c "out=\$('$V' run --layout auto -- '$TRAINER' ${T[*]} 2>&1); rc=\$?; echo \"\$out\"; \
		[ \$rc -eq 0 ] && ! grep -q 'not a layout' <<<\"\$out\""
# show_env: a program that prints the variables vrampool run set for it.
show_env='echo "VRAMPOOL=${VRAMPOOL-unset} TELEMETRY=${VRAMPOOL_TELEMETRY-unset} INTERVAL=${VRAMPOOL_TELEMETRY_S-unset}"'
check "--dry sets VRAMPOOL=dry for the program" \
	expect 0 '^VRAMPOOL=dry ' "$V" run --dry -- sh -c "$show_env"
check "--telemetry FILE and --interval S set VRAMPOOL_TELEMETRY and VRAMPOOL_TELEMETRY_S" \
	expect 0 "TELEMETRY=$TMP/tel.jsonl INTERVAL=5\$" "$V" run --telemetry "$TMP/tel.jsonl" --interval 5 -- sh -c "$show_env"
check "--dry and --off exclude each other" expect 2 'exclude each other' "$V" run --dry --off -- true
inherited_stats() {
	rm -f "$TMP/inh.json"
	VRAMPOOL_STATS=$TMP/inh.json "$V" run --layout 4096 -- ./copier 2 4096 0 || return 1
	json_is inh.json copies.h2d_calls 2
}
check "an inherited VRAMPOOL_STATS is where the dump stays" inherited_stats

# ---- the launcher checks before it starts ------------------------------------
# not_started REGEX ARGS...: `vrampool run ARGS -- touch ran` exits 2 with
# REGEX in its output, and the program never ran.
not_started() {
	local re=$1; shift
	rm -f "$TMP/ran"
	expect 2 "$re" "$V" run "$@" -- touch "$TMP/ran" || return 1
	if [ -e "$TMP/ran" ]; then echo "the program ran"; return 1; fi
}
check "--layout garbage stops the launch before the program starts" \
	not_started "VRAMPOOL_LAYOUT='garbage' is not a layout: .*\\(set by --layout\\)" --layout garbage
check "--budget -5 stops the launch before the program starts" \
	not_started "VRAMPOOL_BUDGET='-5' is not a budget" --budget -5
# A cosmetic variable's bad value is a warning: the program runs with the default (issue 19).
check "--interval 0 is a warning, the default used, and the program runs" \
	expect 0 "VRAMPOOL_TELEMETRY_S='0' is not an interval .*ignored, the default \\(10 s\\) is used" \
	"$V" run --interval 0 -- true
# once_warned: the launcher warns about a misspelled name once, the preloaded program (a shell
# that starts another program) not again, and the program runs.
once_warned() {
	local out rc=0
	out=$(env VRAMPOOL_LAYUOT=auto "$V" run -- sh -c 'sh -c true; true' 2>&1) || rc=$?
	printf '%s\n' "$out"
	[ "$rc" -eq 0 ] || { echo "exit status $rc"; return 1; }
	[ "$(grep -c 'unknown variable VRAMPOOL_LAYUOT (did you mean VRAMPOOL_LAYOUT?)' <<<"$out")" -eq 1 ] ||
		{ echo "not exactly one warning"; return 1; }
}
check "an inherited misspelled VRAMPOOL_LAYUOT is one warning line naming VRAMPOOL_LAYOUT, and the program runs" \
	once_warned
check "an inherited malformed VRAMPOOL_SLAB stops the launch" \
	env VRAMPOOL_SLAB=12Q bash -c "$(declare -f expect not_started); V='$V' TMP='$TMP' not_started \"VRAMPOOL_SLAB='12Q' is not a size\""
check "an inherited malformed VRAMPOOL stops the launch" \
	env VRAMPOOL=maybe bash -c "$(declare -f expect not_started); V='$V' TMP='$TMP' not_started \"VRAMPOOL='maybe' is not a switch\""
same_message() {
	local lib ours
	lib=$(LD_PRELOAD=$SHIM VRAMPOOL_LAYOUT='u8:3y224' ./copier 1 4096 0 2>&1 | grep "VRAMPOOL_LAYOUT='u8:3y224'" |
		sed -e 's/^vrampool: //' -e 's/; running as pass-through$//')
	ours=$("$V" run --layout 'u8:3y224' -- true 2>&1 | grep "VRAMPOOL_LAYOUT='u8:3y224'" |
		sed -e 's/^vrampool run: //' -e 's/ (set by --layout)$//')
	echo "library: $lib"
	echo "run:     $ours"
	[ -n "$lib" ] && [ "$lib" = "$ours" ]
}
check "the launcher's message is the library's own" same_message
check "--stats in a directory that does not exist stops the launch" \
	not_started "VRAMPOOL_STATS='/nonexistent/dir/x\\.json': the directory /nonexistent/dir does not exist" \
	--stats /nonexistent/dir/x.json
check "an inherited VRAMPOOL_STATS in a directory that does not exist stops the launch" \
	env VRAMPOOL_STATS=/nonexistent/d/s.json bash -c "$(declare -f expect not_started); V='$V' TMP='$TMP' not_started 'the directory /nonexistent/d does not exist'"
check "--stats naming a directory stops the launch" \
	not_started "is a directory" --stats "$TMP"
check "--telemetry in a directory that does not exist stops the launch" \
	not_started "VRAMPOOL_TELEMETRY='/nonexistent/t\\.jsonl': the directory /nonexistent does not exist" \
	--telemetry /nonexistent/t.jsonl
budget_8m() {
	VRAMPOOL_SLAB=1M "$V" run --budget 8M --layout 3072 --stats "$TMP/b.json" -- "$TRAINER" "${T[@]}" || return 1
	json_is b.json probe.decided true && json_is b.json pool.budget 8388608
}
check "--budget 8M reaches the shim (and VRAMPOOL_SLAB is inherited): the budget is 8 MiB" budget_8m
check "the report follows the run and is printed once (the shim is quiet)" \
	bash -c "out=\$('$V' run --layout 3072 -- '$TRAINER' ${T[*]} 2>&1); echo \"\$out\"; \
		grep -q '^vrampool report: ' <<<\"\$out\" && ! grep -q 'host-to-device copies' <<<\"\$out\""
# issue 19: --verbose printed the summary twice (the shim's and the report)
verbose_once() {
	local out
	out=$("$V" run --verbose --layout 3072 -- "$TRAINER" "${T[@]}" 2>&1) || return 1
	printf '%s\n' "$out"
	grep -q '^vrampool: probe: ' <<<"$out" || { echo "no progress line"; return 1; }
	grep -q '^vrampool report: ' <<<"$out" || { echo "no report"; return 1; }
	! grep -q 'host-to-device copies,' <<<"$out" || { echo "the shim's summary too: printed twice"; return 1; }
}
check "--verbose shows the shim's progress lines and the summary once (the report)" verbose_once
check "the report numbers are the dump's numbers" \
	bash -c "out=\$('$V' run --layout 3072 --stats '$TMP/n.json' -- '$TRAINER' ${T[*]} 2>&1); \
		calls=\$(python3 -c 'import json;print(json.load(open(\"$TMP/n.json\"))[\"copies\"][\"h2d_calls\"])'); \
		echo \"\$out\"; grep -Eq \"host-to-device +\$calls calls\" <<<\"\$out\""

# ---- exit status --------------------------------------------------------------
check "the exit status of the program passes through (7)" \
	expect 7 'vrampool report' "$V" run -- ./copier 4 4096 7
check "a program killed by SIGTERM gives 128+15" expect 143 'copier: done' "$V" run -- ./copier 4 4096 sig:15
check "a program killed by SIGKILL gives 128+9" expect 137 'copier: done' "$V" run -- ./copier 4 4096 sig:9
check "a command that does not exist gives 127 and a message" \
	expect 127 'cannot run no-such-program-here' "$V" run -- no-such-program-here
check "a program without CUDA runs, and the report says no stats were written" \
	expect 0 'wrote no stats.*|vrampool inspect' "$V" run -- true
check "no command is a usage error" expect 2 'no command given' "$V" run --layout 3072
check "an unknown option is a usage error" expect 2 "^vrampool run: unknown option '--frob'" "$V" run --frob -- true

# ---- --ab ------------------------------------------------------------------------
check "--ab runs off then on and prints the comparison with a verdict" \
	expect 0 'verdict: with the pool, [0-9.]+x fewer bytes' "$V" run --ab --layout 3072 -- "$TRAINER" "${T[@]}"
check "--ab prints the off and on columns" \
	expect 0 ' +off +on +off/on' "$V" run --ab --layout 3072 -- "$TRAINER" "${T[@]}"
ab_files() {
	"$V" run --ab --layout 3072 --stats "$TMP/ab.json" -- "$TRAINER" "${T[@]}" || return 1
	json_is ab.off.json enabled false && json_is ab.on.json enabled true
}
check "--ab with --stats keeps both dumps, FILE.off and FILE.on" ab_files
check "--ab exits with the first nonzero status" expect 5 'run 1 exited with status 5' \
	"$V" run --ab -- ./copier 2 4096 5
check "--ab reports the time of each run and their off/on ratio" \
	expect 0 'wall time +[0-9.]+ [mun]?s +[0-9.]+ [mun]?s +[0-9]+\.[0-9]+$' \
	"$V" run --ab --layout 3072 -- "$TRAINER" "${T[@]}"
ab_first_failed() {
	local out rc
	out=$("$V" run --ab -- sh -c 'echo "usage: bad arguments" >&2; exit 3' 2>&1); rc=$?
	printf '%s\n' "$out"
	[ "$rc" -eq 3 ] && grep -q 'exited with status 3 before its first CUDA call' <<<"$out" &&
		grep -q 'not running it again with the pool on' <<<"$out" &&
		! grep -q 'run 2 of 2' <<<"$out" && ! grep -qi 'static' <<<"$out"
}
check "--ab does not run again when the first run failed before any CUDA call, and blames the failure" \
	ab_first_failed

# ---- signals: passed on once, a bounded wait, the launcher ends as CMD did ----------
# (issue 17, H and I). No timing is asserted: the waits poll for a state,
# and --kill-after is short only to keep the run short.

# on_tty WAIT_RE TIMEOUT CMD...: runs CMD on a new terminal (a pty; CMD
# leads its session, in the foreground), waits for WAIT_RE in its output,
# types Ctrl-C, and prints the output and "status: exit N" or "status:
# signal N". After TIMEOUT seconds the session is killed ("status: timeout").
cat >"$TMP/on_tty.py" <<'PY'
import os, pty, re, select, signal, sys, time
wait_re, timeout, cmd = re.compile(sys.argv[1].encode(), re.M), float(sys.argv[2]), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)
    os.execvp(cmd[0], cmd)
out, typed, end = b"", False, time.time() + timeout
while time.time() < end:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if not typed and wait_re.search(out):
        os.write(fd, b"\x03")
        typed = True
else:
    os.killpg(pid, signal.SIGKILL)
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r\n", "\n"))
if time.time() >= end:
    print("status: timeout")
elif os.WIFSIGNALED(st):
    print("status: signal %d" % os.WTERMSIG(st))
else:
    print("status: exit %d" % os.WEXITSTATUS(st))
PY
# counter.py SIG: counts SIG for a second after the first, then prints
# "got N" and exits N; with "group" it first sends SIG to its own process
# group (kill(0, SIG)), as a program ending its workers does.
cat >"$TMP/counter.py" <<'PY'
import os, signal, sys, time
sig, n = getattr(signal, sys.argv[1]), [0]
signal.signal(sig, lambda s, f: n.__setitem__(0, n[0] + 1))
print("ready %d" % os.getpid(), flush=True)
if sys.argv[2:] == ["group"]:
    os.kill(0, sig)
end = time.time() + 20
while not n[0] and time.time() < end:
    time.sleep(0.02)
time.sleep(1)
print("got %d" % n[0], flush=True)
sys.exit(n[0])
PY
# alive PID: the process is there and not a zombie.
alive() { [ -d /proc/$1 ] && ! grep -q '^State:.*Z' /proc/$1/status 2>/dev/null; }
# ended PID: waits for this shell's child PID (at most a minute, else
# SIGKILL) and returns its status.
ended() {
	local _
	for _ in $(seq 600); do alive "$1" || break; sleep 0.1; done
	alive "$1" && { echo "gave up waiting for $1"; kill -KILL "$1"; }
	wait "$1"
}

# stop_launcher PID DUMP: once DUMP (the program's running dump) is
# there, sends SIGTERM to the launcher PID (this shell's child) and waits
# for it, its status in rc; fails when the program (the dump's pid)
# outlives it.
stop_launcher() {
	local prog _
	for _ in $(seq 300); do [ -s "$2" ] && break; sleep 0.1; done
	prog=$(jget "$2" pid) || { kill -KILL "$1"; return 1; }
	kill -TERM "$1"
	ended "$1"
	rc=$?
	for _ in $(seq 100); do alive "$prog" || break; sleep 0.1; done
	if alive "$prog"; then echo "the program $prog runs on after the launcher ended"; kill -KILL "$prog"; return 1; fi
}
sigterm_passed_on() {
	local rc
	rm -f "$TMP/term.json"
	"$V" run --layout 3072 --stats "$TMP/term.json" -- "$TRAINER" --samples 400 --row 3072 --batch 32 \
		--epochs 1000000 >"$TMP/term.out" 2>"$TMP/term.err" &
	stop_launcher $! "$TMP/term.json" || return 1
	cat "$TMP/term.err"
	[ "$rc" = 143 ] || { echo "launcher exit $rc"; return 1; }
	grep -q 'SIGTERM passed on to' "$TMP/term.err" && grep -q 'ended by SIGTERM' "$TMP/term.err" &&
		json_is term.json final true && json_is term.json ended_by SIGTERM
}
check "SIGTERM to vrampool run alone is passed on: the program ends with its final dump (ended by SIGTERM) and the launcher dies of SIGTERM" \
	sigterm_passed_on
sigkill_after_grace() {
	local pid rc prog
	"$V" run --kill-after 1 -- python3 -c 'import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready %d" % os.getpid(), flush=True)
time.sleep(60)' >"$TMP/grace.out" 2>"$TMP/grace.err" &
	pid=$!
	for _ in $(seq 300); do grep -q '^ready' "$TMP/grace.out" && break; sleep 0.1; done
	prog=$(sed -n 's/^ready //p' "$TMP/grace.out")
	kill -TERM $pid
	ended $pid
	rc=$?
	if [ -n "$prog" ] && alive "$prog"; then echo "the program $prog runs on"; kill -KILL "$prog"; return 1; fi
	cat "$TMP/grace.err"
	[ "$rc" = 137 ] && grep -q 'did not end within 1 s of SIGTERM: sending SIGKILL' "$TMP/grace.err"
}
check "a program that ignores the signal passed on gets SIGKILL after --kill-after, and the launcher ends as it did" \
	sigkill_after_grace
check "--kill-after must be a number of seconds" expect 2 "--kill-after 'soon' is not a number of seconds" \
	"$V" run --kill-after soon -- true
ctrl_c_once() {
	local out
	out=$(python3 "$TMP/on_tty.py" '^ready' 30 "$V" run -- python3 "$TMP/counter.py" SIGINT)
	printf '%s\n' "$out"
	# a second SIGINT sent while the first is pending merges with it, so
	# the count alone may hide one: the launcher must not have sent any
	grep -q 'got 1$' <<<"$out" && grep -q '^status: exit 1$' <<<"$out" && ! grep -q 'passed on' <<<"$out"
}
check "Ctrl-C on the terminal reaches the program once, not once more through the launcher, which ends with the program's status" \
	ctrl_c_once
own_group_kill() {
	local out rc
	# the launcher in a group of its own, so that kill(0) spares this script
	out=$(python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' \
		"$V" run -- python3 "$TMP/counter.py" SIGTERM group 2>&1)
	rc=$?
	printf '%s\nexit %s\n' "$out" "$rc"
	[ "$rc" = 1 ] && grep -q '^got 1$' <<<"$out" && ! grep -q 'passed on' <<<"$out"
}
check "the program's own kill(0, SIGTERM) is not passed back to it: once, and the program's status" own_group_kill
ab_ctrl_c() {
	local out
	out=$(python3 "$TMP/on_tty.py" '^epoch 2 ' 60 "$V" run --ab --layout 3072 -- "$TRAINER" --samples 400 --row 3072 \
		--batch 32 --epochs 1000000)
	printf '%s\n' "$out" | grep -v '^epoch'
	grep -q 'run 1 of 2 (pool off) was interrupted by SIGINT: the A/B stops here, with no comparison' <<<"$out" &&
		grep -q 'ended by SIGINT' <<<"$out" && grep -q '^status: signal 2$' <<<"$out" &&
		! grep -q 'run 2 of 2\|verdict' <<<"$out"
}
check "Ctrl-C during run 1 of --ab ends the A/B: run 1 reported as interrupted, no run 2, no verdict, the launcher dies of SIGINT" \
	ab_ctrl_c
ab_sigterm() {
	local rc
	rm -f "$TMP/abt.off.json"
	"$V" run --ab --layout 3072 --stats "$TMP/abt.json" -- "$TRAINER" --samples 400 --row 3072 --batch 32 \
		--epochs 1000000 >/dev/null 2>"$TMP/abt.err" &
	stop_launcher $! "$TMP/abt.off.json" || return 1
	cat "$TMP/abt.err"
	[ "$rc" = 143 ] && grep -q 'run 1 of 2 (pool off) was interrupted by SIGTERM' "$TMP/abt.err" &&
		! grep -q 'run 2 of 2\|verdict' "$TMP/abt.err" && [ ! -e "$TMP/abt.on.json" ]
}
check "SIGTERM to vrampool run --ab during run 1 ends the A/B there" ab_sigterm

# ---- the environment of the program ------------------------------------------------
preload_kept() {
	rm -f marker.txt
	MARKER=$TMP/marker.txt LD_PRELOAD=$TMP/marker.so "$V" run --stats "$TMP/p.json" -- ./copier 2 4096 0 || return 1
	cat marker.txt
	grep -q "libvrampool.so:$TMP/marker.so" marker.txt && test -f p.json
}
check "an existing LD_PRELOAD survives: both libraries load in the program" preload_kept
kept() {
	local out pid
	mkdir -p "$TMP/keep" && cd "$TMP/keep" || return 1
	out=$("$V" run --layout 4096 -- "$TMP/copier" 3 4096 0 2>&1); rc=$?
	cd "$TMP" || return 1
	printf '%s\n' "$out"
	ls -A "$TMP/keep"
	[ "$rc" -eq 0 ] || return 1
	pid=$(ls "$TMP/keep" | sed -n 's/^vrampool\.copier\.\([0-9]*\)\.json$/\1/p')
	[ -n "$pid" ] && [ "$(ls -A "$TMP/keep" | wc -l)" -eq 1 ] &&
		grep -q "^  vrampool report vrampool\.copier\.$pid\.json\$" <<<"$out" &&
		[ "$(jget "$TMP/keep/vrampool.copier.$pid.json" copies.h2d_calls)" = 3 ]
}
check "without --stats the dump is kept as ./vrampool.PROGRAM.PID.json, and the command that reads it is printed" kept
kept_rank() {
	mkdir -p "$TMP/keepr" && cd "$TMP/keepr" || return 1
	RANK=3 "$V" run --layout 4096 -- "$TMP/copier" 2 4096 0 || { cd "$TMP"; return 1; }
	cd "$TMP" || return 1
	ls -A "$TMP/keepr"
	ls "$TMP/keepr" | grep -Eq '^vrampool\.copier\.[0-9]+\.r3\.json$'
}
check "a launcher with a rank keeps its dump with .rRANK" kept_rank
kept_not_older() {
	local out
	mkdir -p "$TMP/keepo" && cp "$SRC/../tool/dump_on.json" "$TMP/keepo/vrampool.copier.1.json" || return 1
	cd "$TMP/keepo" || return 1
	out=$("$V" run --layout 4096 -- "$TMP/copier" 2 4096 0 2>&1)
	cd "$TMP" || return 1
	printf '%s\n' "$out"
	grep -Eq 'host-to-device +2 calls' <<<"$out" && ! grep -q 'vrampool\.copier\.1\.json' <<<"$out" &&
		! grep -q 'side by side' <<<"$out"
}
check "an older dump in the same directory is never taken for this run's" kept_not_older
ab_kept() {
	local out cmd
	mkdir -p "$TMP/keepab" && cd "$TMP/keepab" || return 1
	out=$("$V" run --ab --layout 3072 -- "$TRAINER" "${T[@]}" 2>&1)
	printf '%s\n' "$out"
	cmd=$(grep -A1 'read them again' <<<"$out" | tail -n 1 | sed 's/^  vrampool //')
	[ -n "$cmd" ] && ls vrampool.trainer.*.off.json vrampool.trainer.*.on.json &&
		"$V" $cmd | grep -q '^verdict: with the pool'
	rc=$?
	cd "$TMP"
	return $rc
}
check "--ab keeps both dumps, and the printed command compares them again" ab_kept
refuse() {
	printf 'precious notes\n' >"$TMP/notes.txt"
	expect 2 'notes\.txt exists and is not a vrampool dump: not overwriting it \(--force overwrites it\)' \
		"$V" run --stats "$TMP/notes.txt" -- ./copier 2 4096 0 || return 1
	grep -q 'precious notes' "$TMP/notes.txt" || return 1
	"$V" run --force --stats "$TMP/notes.txt" -- ./copier 2 4096 0 || return 1
	[ "$(jget "$TMP/notes.txt" copies.h2d_calls)" = 2 ] || return 1
	"$V" run --stats "$TMP/notes.txt" -- ./copier 3 4096 0 || return 1
	[ "$(jget "$TMP/notes.txt" copies.h2d_calls)" = 3 ] || return 1
	: >"$TMP/empty.json"
	"$V" run --stats "$TMP/empty.json" -- ./copier 2 4096 0
}
check "--stats refuses a regular file that is not a dump unless --force; a dump or an empty file is overwritten" refuse
check "--stats /proc/s.json is refused before the launch with why, never blamed on CUDA" \
	bash -c "out=\$('$V' run --stats /proc/s.json -- ./copier 2 4096 0 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 2 ] && grep -q 'cannot create /proc/s.json' <<<\"\$out\" && ! grep -q 'saw no CUDA call' <<<\"\$out\""
check "--stats /dev/null is written in place, as the library does, and said to leave nothing to report" \
	bash -c "out=\$('$V' run --stats /dev/null -- ./copier 2 4096 0 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 0 ] && grep -q 'went to /dev/null, a FIFO or a device, written in place' <<<\"\$out\" && ! grep -q 'saw no CUDA call' <<<\"\$out\""
repeat() {
	local out
	out=$("$V" run --ab --repeat 2 --layout 3072 --stats "$TMP/rep.json" -- "$TRAINER" "${T[@]}" 2>&1) || return 1
	printf '%s\n' "$out"
	grep -q 'run 2 of 4, pool on' <<<"$out" && grep -q 'run 3 of 4, pool on' <<<"$out" &&
		grep -q 'run 4 of 4, pool off' <<<"$out" &&
		grep -Eq 'pairs \(time off/on\) +[0-9.]+ [0-9.]+: median [0-9.]+, spread' <<<"$out" &&
		grep -q '^verdict: time: ' <<<"$out" &&
		json_is rep.off.1.json mode off && json_is rep.on.1.json mode on &&
		json_is rep.off.2.json mode off && json_is rep.on.2.json mode on
}
check "--ab --repeat 2 interleaves two pairs (off on, on off) and reports their median and spread" repeat
check "--repeat needs --ab" expect 2 'repeats the pairs of --ab' "$V" run --repeat 3 -- true
check "a multi-process run reports the process that made the copies" \
	expect 0 'host-to-device +6 calls' "$V" run --layout 4096 --stats "$TMP/mp.%p.json" -- ./copier 6 4096 0 fork
check "a multi-process run without --stats also finds the worker's dump" \
	expect 0 'host-to-device +5 calls' "$V" run --layout 4096 -- ./copier 5 4096 0 fork
check "two processes that both copy are reported side by side with a total" \
	expect 0 'host-to-device calls +[23] +[23] +5$' \
	"$V" run --layout 4096 -- sh -c './copier 2 4096 0 & ./copier 3 4096 0; wait'
unseen_warned() {
	local out
	out=$("$V" run -- ./static_nodl 2>&1)
	printf '%s\n' "$out"
	grep -q 'warning: the copies of ./static_nodl will not be seen' <<<"$out" &&
		grep -q 'wrote no stats' <<<"$out"
}
check "a program whose runtime cannot be reached gets a warning, runs anyway, and writes no stats" unseen_warned
static_not_warned() {
	local out
	out=$("$V" run -- ./plain_static 2>&1)
	printf '%s\n' "$out"
	! grep -q 'warning' <<<"$out"
}
check "a static-runtime program is not warned about: it is seen through the driver entry points" \
	static_not_warned

# ---- where the library is found ------------------------------------------------
installed() {
	mkdir -p inst/bin inst/lib/vrampool elsewhere
	cp "$V" inst/bin/vrampool && cp "$SHIM" inst/lib/vrampool/libvrampool.so || return 1
	ln -sf "$TMP/inst/bin/vrampool" elsewhere/vrampool
	elsewhere/vrampool run --stats "$TMP/i.json" -- ./copier 2 4096 0 && test -f i.json
}
check "an installed vrampool finds ../lib/vrampool/libvrampool.so, also through a symlink" installed
check "a vrampool without its library says so and exits 2" \
	bash -c "mkdir -p '$TMP/lonely' && cp '$V' '$TMP/lonely/' && \
		out=\$('$TMP/lonely/vrampool' run -- true 2>&1); rc=\$?; echo \"\$out\"; \
		[ \$rc -eq 2 ] && grep -q 'cannot find the library' <<<\"\$out\""

# Progress without --verbose: on a terminal (script(1) gives CMD and the
# launcher a pseudo-terminal) the launcher redraws one line from the dump
# the library rewrites at each interval, and clears it before the report;
# piped to a file, or under --verbose, it draws nothing (no carriage return).
progress() {
	local slow=(env FAKECUDA_CALL_US=2000 "$V" run --interval 1 --layout 3072 --
		"$TRAINER" --samples 2000 --row 3072 --batch 64 --epochs 8 --quiet)
	script -qfec "${slow[*]}" /dev/null >tty.out 2>&1 || return 1
	grep -aq $'\r\e\[Kvrampool run: 0:0[1-9], [0-9]* copies, .* requested, .*% served from the pool' tty.out || return 1
	grep -aq $'\r\e\[Kvrampool report:' tty.out || return 1
	"${slow[@]}" >piped.out 2>&1 || return 1
	! grep -aq $'\r' piped.out || return 1
	script -qfec "${slow[*]/--interval/--verbose --interval}" /dev/null >verbose.out 2>&1 || return 1
	! grep -aq $'\e\[K' verbose.out
}
if command -v script >/dev/null; then
	check "a one-line progress on a terminal, none when piped or under --verbose" progress
else
	echo "SKIP: progress on a terminal: script(1) (util-linux) is not installed"
fi
