#!/usr/bin/env bash
# End to end: the preloaded shim as a pass-through (issue 3). The trainer
# runs on the emulated device with libvrampool.so preloaded, in every stream
# mode and with jitter; every byte must verify and the shim's counters must
# equal the device's own. Also: exports, malformed variables, fork.
source "$(dirname "$0")/lib.sh"
# These checks expect hits: the cost ledger is forced to pool, so that none
# depends on how fast this machine hashes (ledger.sh tests the ledger).
export VRAMPOOL_LEDGER=force

export FAKECUDA_JITTER_US=100
SMALL="--samples 300 --row 3072 --batch 32 --epochs 3"

# shim_run NAME BIN ENV... -- ARGS...: runs BIN under the shim with a stats
# dump and a device report in $TMP/NAME.{json,fake.json,out,err}.
shim_run() {
	local name=$1 bin=$2; shift 2
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" LD_PRELOAD="$SHIM" VRAMPOOL_STATS="$TMP/$name.json" \
		FAKECUDA_REPORT="$TMP/$name.fake.json" "$bin" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# passthrough_mode NAME BIN VRAMPOOL_VALUE ARGS...: verified, counters agree.
passthrough_mode() {
	local name=$1 bin=$2 mode=$3; shift 3
	shim_run "$name" "$bin" VRAMPOOL="$mode" -- "$@" || { cat "$TMP/$name.out" "$TMP/$name.err"; return 1; }
	grep -q 'verified OK' "$TMP/$name.out" || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$name.json" "$TMP/$name.fake.json" --calls \
		--expect bytes.served_from_pool=0 --expect copies.matched_calls=0 || return 1
	# the shim's count of copies is the trainer's own
	local copies
	copies=$(sed -n 's/^total .* copies \([0-9]*\).*/\1/p' "$TMP/$name.out")
	[ -z "$copies" ] || [ "$copies" = "$(jget "$TMP/$name.json" copies.h2d_calls)" ]
}

for mode in off on; do
	for stream in legacy ptds nonblocking "multi --streams 3" "threads --threads 3"; do
		for mem in pinned pageable; do
			tag="$mode-${stream%% *}-$mem"
			# shellcheck disable=SC2086
			check "pass-through ($mode) verifies and counts exactly: --stream $stream --$mem" \
				passthrough_mode "$tag" "$TRAINER" "$mode" $SMALL --stream $stream --$mem
		done
	done
	# shellcheck disable=SC2086
	check "pass-through ($mode) verifies with cudaMemcpy (--sync)" \
		passthrough_mode "$mode-sync" "$TRAINER" "$mode" $SMALL --sync
	# shellcheck disable=SC2086
	check "pass-through ($mode) verifies with cudaMemcpyDefault" \
		passthrough_mode "$mode-default" "$TRAINER" "$mode" $SMALL --copy-api memcpy-default
	# shellcheck disable=SC2086
	check "pass-through ($mode) verifies in the per-thread-default-stream build (_ptsz, _ptds)" \
		passthrough_mode "$mode-ptsz" "$TRAINER_PTSZ" "$mode" $SMALL --stream legacy
	# shellcheck disable=SC2086
	check "pass-through ($mode) verifies the _ptds cudaMemcpy" \
		passthrough_mode "$mode-ptds-sync" "$TRAINER_PTSZ" "$mode" $SMALL --sync
done

exports_only_interposed() {
	local got want
	got=$(nm -D --defined-only "$SHIM" | awk '{print $3}' | sort | tr '\n' ' ')
	# the rows of the entry table (shim/intercept/entries.h: X(name, lib) and
	# A(X, name, ...), W(X, name, ...)), dlsym, dlvsym, and the functions that set a signal's
	# disposition (shim/intercept/signals.h)
	want=$({ sed -n 's/^[[:space:]]*X(\([A-Za-z0-9_]*\), .*/\1/p; s/^[[:space:]]*[AW](X, \([A-Za-z0-9_]*\), .*/\1/p' \
		"$ROOT/shim/intercept/entries.h"; printf '%s\n' dlsym dlvsym sigaction signal bsd_signal ssignal sysv_signal __sysv_signal sigset; } | sort | tr '\n' ' ')
	[ "$got" = "$want" ] || { echo "exports: $got"; echo "table:   $want"; return 1; }
	# and depends on libc, libdl and pthread only (ld.so provides __tls_get_addr)
	! readelf -d "$SHIM" | grep NEEDED | grep -vE 'libc\.so|libdl\.so|libpthread\.so|ld-linux'
}
check "the library exports only the interposed entry points (and dlsym, dlvsym and the signal setters)" exports_only_interposed

# bad_var VAR VALUE: one line on stderr naming VAR, the run intact and counted.
bad_var() {
	local var=$1 value=$2 tag=bad-$1
	# shellcheck disable=SC2086
	shim_run "$tag" "$TRAINER" VRAMPOOL_LAYOUT=3072 "$var=$value" -- $SMALL || return 1
	grep -q 'verified OK' "$TMP/$tag.out" || return 1
	local lines
	lines=$(grep -c "^vrampool: $var=" "$TMP/$tag.err")
	[ "$lines" = 1 ] || { cat "$TMP/$tag.err"; return 1; }
	grep "^vrampool: $var=" "$TMP/$tag.err" | grep -q 'expected' || return 1
	# one line: the summary names the variable and does not repeat the line
	[ "$(grep -c "$var='$value'" "$TMP/$tag.err")" = 1 ] || { cat "$TMP/$tag.err"; return 1; }
	grep -q "^vrampool: pass-through, pool off by a malformed $var: " "$TMP/$tag.err" ||
		{ cat "$TMP/$tag.err"; return 1; }
	# a rejected layout is said as such, never as a missing one
	if [ "$var" = VRAMPOOL_LAYOUT ]; then
		grep -q "^vrampool: VRAMPOOL_LAYOUT was rejected at load (bad dtype 'f8'" "$TMP/$tag.err" &&
			! grep -q 'no VRAMPOOL_LAYOUT set' "$TMP/$tag.err" || { cat "$TMP/$tag.err"; return 1; }
	fi
	# malformed means pass-through: nothing served, everything counted
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$tag.json" "$TMP/$tag.fake.json" --calls \
		--expect enabled=false --expect bytes.served_from_pool=0
}
check "a malformed VRAMPOOL gets one line and an intact run" bad_var VRAMPOOL maybe
check "a malformed VRAMPOOL_LAYOUT gets one line and an intact run" bad_var VRAMPOOL_LAYOUT f8:3x3
check "a malformed VRAMPOOL_BUDGET gets one line and an intact run" bad_var VRAMPOOL_BUDGET 150%
check "a malformed VRAMPOOL_PROBE_AFTER gets one line and an intact run" bad_var VRAMPOOL_PROBE_AFTER two
check "a malformed VRAMPOOL_RESERVE_BATCHES gets one line and an intact run" bad_var VRAMPOOL_RESERVE_BATCHES -3
check "a malformed VRAMPOOL_MARGIN gets one line and an intact run" bad_var VRAMPOOL_MARGIN 5X
check "a malformed VRAMPOOL_SLAB gets one line and an intact run" bad_var VRAMPOOL_SLAB 12Q
check "a malformed VRAMPOOL_THREADS gets one line and an intact run" bad_var VRAMPOOL_THREADS many

# cosmetic_var VAR VALUE: a cosmetic variable's bad value is one warning line and
# costs the pool nothing (issue 19): the run pools, with the default in place.
cosmetic_var() {
	local var=$1 value=$2 tag=cosmetic-$1
	# shellcheck disable=SC2086
	shim_run "$tag" "$TRAINER" VRAMPOOL_LAYOUT=3072 "$var=$value" -- $SMALL || return 1
	grep -q 'verified OK' "$TMP/$tag.out" || return 1
	[ "$(grep -c "^vrampool: $var='$value' .*ignored, the default" "$TMP/$tag.err")" = 1 ] ||
		{ cat "$TMP/$tag.err"; return 1; }
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/$tag.json" "$TMP/$tag.fake.json" --calls \
		--expect enabled=true
	[ "$(jget "$TMP/$tag.json" bytes.served_from_pool)" -gt 0 ] || { echo "nothing served"; return 1; }
}
check "a malformed VRAMPOOL_VERBOSE is one warning and the pool runs" cosmetic_var VRAMPOOL_VERBOSE maybe
check "a malformed VRAMPOOL_QUIET is one warning and the pool runs" cosmetic_var VRAMPOOL_QUIET loud
check "a malformed VRAMPOOL_TELEMETRY_S is one warning and the pool runs" cosmetic_var VRAMPOOL_TELEMETRY_S 0
# The usual spellings of on and off, in any case (issue 19).
spellings() {
	# shellcheck disable=SC2086
	shim_run on-caps "$TRAINER" VRAMPOOL=ON VRAMPOOL_LAYOUT=3072 -- $SMALL || return 1
	# shellcheck disable=SC2086
	shim_run off-caps "$TRAINER" VRAMPOOL=False VRAMPOOL_LAYOUT=3072 -- $SMALL || return 1
	! grep -h 'vrampool: VRAMPOOL=' "$TMP/on-caps.err" "$TMP/off-caps.err" || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/on-caps.json" "$TMP/on-caps.fake.json" \
		--expect enabled=true --expect mode=on || return 1
	python3 "$ROOT/tests/e2e/check_stats.py" "$TMP/off-caps.json" "$TMP/off-caps.fake.json" \
		--expect enabled=false --expect mode=off
}
check "VRAMPOOL=ON pools and VRAMPOOL=False passes through, without a complaint" spellings

fork_reports_once() {
	VRAMPOOL_STATS="$TMP/fork-%p.json" LD_PRELOAD="$SHIM" "$B/apps/forker" >"$TMP/fork.out" 2>"$TMP/fork.err" || return 1
	local parent
	parent=$(sed -n 's/^forker: parent \([0-9]*\) .*/\1/p' "$TMP/fork.out")
	[ "$(ls "$TMP"/fork-*.json | wc -l)" = 1 ] || { ls "$TMP"; return 1; }
	[ -f "$TMP/fork-$parent.json" ] || return 1
	[ "$(jget "$TMP/fork-$parent.json" copies.h2d_calls)" = 5 ] || return 1
	# one summary: its first line names the copies once
	[ "$(grep -c 'host-to-device copies' "$TMP/fork.err")" = 1 ] || { cat "$TMP/fork.err"; return 1; }
}
check "a forked child that never used CUDA neither prints nor writes the parent's numbers" fork_reports_once

fork_child_own_numbers() {
	VRAMPOOL_STATS="$TMP/forkc-%p.json" LD_PRELOAD="$SHIM" "$B/apps/forker" --child-cuda >"$TMP/forkc.out" 2>"$TMP/forkc.err" || return 0
	# The emulated device, like CUDA, may refuse a child's use of CUDA; if
	# the child did copy, its dump holds its own 2 copies, not the parent's.
	for f in "$TMP"/forkc-*.json; do
		n=$(jget "$f" copies.h2d_calls)
		[ "$n" = 5 ] || [ "$n" = 2 ] || return 1
	done
}
check "a forked child that uses CUDA reports only its own copies" fork_child_own_numbers

quiet_and_stats_path() {
	VRAMPOOL_QUIET=1 VRAMPOOL_STATS="$TMP/q-%p.json" LD_PRELOAD="$SHIM" "$TRAINER" --samples 64 --epochs 1 \
		>"$TMP/q.out" 2>"$TMP/q.err" || return 1
	! grep -q '^vrampool:' "$TMP/q.err" || return 1
	ls "$TMP"/q-[0-9]*.json >/dev/null
}
check "VRAMPOOL_QUIET=1 prints nothing and %p names the dump by pid" quiet_and_stats_path

suggests_layout() {
	LD_PRELOAD="$SHIM" "$TRAINER" --samples 256 --batch 64 --row 3072 --epochs 1 >"$TMP/sg.out" 2>"$TMP/sg.err" || return 1
	grep -q 'VRAMPOOL_LAYOUT' "$TMP/sg.err" || { cat "$TMP/sg.err"; return 1; }
	grep 'VRAMPOOL_LAYOUT' "$TMP/sg.err" | grep -q '196608'
}
check "with no layout the summary suggests one from the copy sizes seen" suggests_layout

off_suggests_looking() {
	VRAMPOOL=off LD_PRELOAD="$SHIM" "$TRAINER" --samples 256 --batch 64 --row 3072 --epochs 1 >"$TMP/so.out" 2>"$TMP/so.err" || return 1
	grep -q 'vrampool run --dry --layout auto' "$TMP/so.err" || { cat "$TMP/so.err"; return 1; }
	! grep -q 'try VRAMPOOL_LAYOUT=' "$TMP/so.err"
}
check "VRAMPOOL=off with no layout points to a dry auto run, never to a batch's size" off_suggests_looking
