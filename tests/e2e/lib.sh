# shellcheck shell=bash disable=SC2034
# Helpers for the end-to-end scripts: source it, then call check.
# Every check prints "PASS: name" or "FAIL: name" (and the failing command's
# output), which scripts/test.sh counts. Paths are absolute so a check may cd.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$ROOT/build
FAKE=$B/fakecuda
SHIM=$B/libvrampool.so
TRAINER=$B/apps/trainer
TRAINER_PTSZ=$B/apps/trainer_ptsz
VRAMPOOL_BIN=$B/vrampool
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vrampool-e2e.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# Under `make SANITIZE=...` the vrampool command carries ASan: it then runs
# with other preloads only if ASan does not insist on coming first, and
# valgrind cannot run it at all (TOOL_SANITIZED tells the scripts).
TOOL_SANITIZED=
if ldd "$VRAMPOOL_BIN" 2>/dev/null | grep -q libasan; then
	TOOL_SANITIZED=1
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
fi

# check NAME CMD...: runs CMD (a function or a command); exit 0 passes.
check() {
	local name=$1; shift
	local out
	if out=$("$@" 2>&1); then
		echo "PASS: $name"
	else
		echo "FAIL: $name"
		printf '%s\n' "$out" | tail -n 25
	fi
}

# expect STATUS REGEX CMD...: CMD exits with STATUS and its output (stdout
# and stderr) matches the extended REGEX.
expect() {
	local want=$1 re=$2 out rc; shift 2
	out=$("$@" 2>&1); rc=$?
	printf '%s\n' "$out"
	if [ "$rc" -ne "$want" ]; then echo "exit status $rc, expected $want"; return 1; fi
	if ! grep -Eq -- "$re" <<<"$out"; then echo "output does not match: $re"; return 1; fi
}

# jget FILE KEY.PATH: prints one value of a JSON file (python3 is a test-only dependency).
jget() {
	python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    v = v[k]
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
PY
}

# known_bug NAME REASON CMD...: like check, for a check that fails today
# because of a known shim bug (REASON says which). A failure prints
# "XFAIL: name (REASON)", which scripts/test.sh does not count, so the run
# still finishes; once the bug is fixed the check prints PASS: drop the mark.
known_bug() {
	local name=$1 reason=$2; shift 2
	local out
	if out=$("$@" 2>&1); then
		echo "PASS: $name"
	else
		echo "XFAIL: $name (known shim bug: $reason)"
		printf '%s\n' "$out" | tail -n 12 | sed 's/^/    /'
	fi
}

# py_loop NAME ENV... -- ARGS...: runs "$PY" "$LOOP" ARGS (a Python upload
# loop of tests/python) with ENV, a device report and --json; files in
# $TMP/NAME.* (.out, .err, .fake.json, .loop.json); returns its status.
# (cupy.sh and clients.sh)
py_loop() {
	local name=$1; shift
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env FAKECUDA_REPORT="$TMP/$name.fake.json" "${envs[@]}" \
		"$PY" "$LOOP" --json "$TMP/$name.loop.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
