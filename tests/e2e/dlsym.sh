#!/usr/bin/env bash
# End to end: the shim hooks dlsym and dlvsym (issue 10, item 6), and must
# stay invisible where production interposers that hook them were not
# (HAMi-core, DMTCP, GOTCHA: RTLD_NEXT answered for the wrong object,
# look-ups from constructors, RTLD_DEEPBIND, CUDA-named functions of other
# libraries, concurrent first calls, cuGetProcAddress before cuInit and
# with unknown versions). build/apps/dltest runs each case and prints what
# it found without addresses; every case must exit 0 and print exactly the
# same with the shim (pooling, and VRAMPOOL=off) as without it. A time
# limit turns a deadlock into a failure.
source "$(dirname "$0")/lib.sh"

DLTEST=$B/apps/dltest
LIMIT=60

# dl_run NAME CASE ENV...: one case, its output in $TMP/NAME.out.
dl_run() {
	local name=$1 case=$2; shift 2
	env "$@" timeout "$LIMIT" "$DLTEST" "$case" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ $rc -eq 0 ] || { echo "$name: exit $rc (124: past ${LIMIT}s, a deadlock?)"; cat "$TMP/$name.err"; }
	return $rc
}

# same_as_without CASE: the case without the shim, then with it (pooling
# with a layout its copies match, and off); the outputs must be equal.
same_as_without() {
	local case=$1 mode
	dl_run "$case.plain" "$case" || return 1
	for mode in pool off; do
		local envs=(LD_PRELOAD="$SHIM" VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=4096)
		[ $mode = off ] && envs+=(VRAMPOOL=off)
		dl_run "$case.$mode" "$case" "${envs[@]}" || return 1
		if ! diff -u "$TMP/$case.plain.out" "$TMP/$case.$mode.out"; then
			echo "case $case: output differs under the shim ($mode)"
			return 1
		fi
	done
}

describe() {
	case $1 in
	next) echo "dlsym(RTLD_NEXT) from the program and from linked libraries finds the same definitions as without the shim" ;;
	needed-ctor) echo "look-ups from the constructor of a linked library (run before the shim's) find the same as without the shim" ;;
	dlopen-ctor) echo "look-ups from the constructor of a dlopen()ed library (loader lock held) find the same as without the shim, without deadlock" ;;
	deepbind) echo "a library opened RTLD_DEEPBIND finds its own and the C library's symbols as without the shim" ;;
	libc) echo "dlsym and dlvsym on libc and libm, and dlerror after a miss, are unaffected by the shim" ;;
	foreign-cu) echo "a non-CUDA library's own CUDA-named functions are found on its handle, not the shim's wrappers" ;;
	getproc) echo "cuGetProcAddress (both forms) before cuInit, for known and unknown versions and every stream flag, answers as without the shim, and the entry points work after cuInit" ;;
	dlvsym) echo "dlvsym on the driver's and the runtime's handles answers as without the shim, and what it gives works" ;;
	threads) echo "16 threads making their first driver and runtime calls at once all succeed under the shim" ;;
	*) echo "dltest case $1 prints the same with and without the shim" ;;
	esac
}

for case in $("$DLTEST" --list); do
	check "$(describe "$case")" same_as_without "$case"
done

# Every case in a forked child of one process, under the shim.
all_in_children() {
	LD_PRELOAD="$SHIM" VRAMPOOL_QUIET=1 VRAMPOOL_LAYOUT=4096 timeout $((LIMIT * 3)) "$DLTEST" >"$TMP/all.out" 2>&1
	local rc=$?
	[ $rc -eq 0 ] || { echo "exit $rc"; grep -E '^== .*(end [^0]|killed)' "$TMP/all.out"; }
	return $rc
}
check "every case, each in a forked child of one process, runs to its end under the shim" all_in_children
