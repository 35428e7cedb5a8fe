#!/usr/bin/env bash
# The house rules of shim/ (docs/architecture.md, STYLE.md 16): layers one
# way down by includes and by calls, no circle between files, the size
# limits, tests and benchmarks free of the interception layer, and a map
# that names only what exists. tests/e2e/house.py does the reading.
source "$(dirname "$0")/lib.sh"
HOUSE=$ROOT/tests/e2e/house.py

check "shim includes run one way down the layers (intercept, report, pool, device, core)" \
	python3 "$HOUSE" includes "$ROOT"
check "shim objects call one way down the layers (nm), no circle between files" \
	python3 "$HOUSE" calls "$ROOT"
check "no file in shim/ over 600 lines, none in analysis/ over 700 (unless it says why)" \
	python3 "$HOUSE" sizes "$ROOT"
check "unit tests and benchmarks link nothing of the interception layer" \
	python3 "$HOUSE" nointercept "$ROOT"
check "docs/architecture.md names only files and functions that exist" \
	python3 "$HOUSE" doc "$ROOT"

# The guards themselves: a copy of the tree with one rule broken fails.
guard_catches() {
	local t=$TMP/house
	mkdir -p "$t/shim" "$t/build/shim"
	cp -r "$ROOT/shim/." "$t/shim/"
	cp -r "$ROOT/build/shim/." "$t/build/shim/"
	echo '#include "report/report.h"' >>"$t/shim/pool/classify.c"
	python3 "$HOUSE" includes "$t" | grep -q 'pool includes from report' || return 1
	printf '%s\n' "$(seq 700 | sed 's/^/\/\/ /')" >"$t/shim/core/long.h"
	mkdir -p "$t/analysis"
	python3 "$HOUSE" sizes "$t" | grep -q 'core/long.h: 700 lines' || return 1
	# an object of the core layer that calls up into the pool layer
	printf 'void whatif_reset(void);\nvoid core_up(void);\nvoid core_up(void) { whatif_reset(); }\n' >"$t/shim/core/up.c"
	cc -c -o "$t/build/shim/core/up.o" "$t/shim/core/up.c" || return 1
	python3 "$HOUSE" calls "$t" | grep -q 'core/up.o calls whatif_reset' || return 1
	# a circle inside one layer: size now calls config, which calls size
	rm "$t/build/shim/core/up.o" "$t/shim/core/up.c"
	printf 'int config_load_secure(void);\nint size_parse(void);\nint size_parse(void) { return config_load_secure(); }\n' >"$t/up.c"
	cc -c -o "$t/build/shim/core/size.o" "$t/up.c" || return 1
	python3 "$HOUSE" calls "$t" | grep -q 'call circle: .*core/size -> core/config' || return 1
	# a map that names a function and a file the code does not have
	mkdir -p "$t/docs"
	{ cat "$ROOT/docs/architecture.md"; echo 'then `pool_vanish()` in `shim/pool/vanish.c`'; } >"$t/docs/architecture.md"
	python3 "$HOUSE" doc "$t" >"$t/doc.out"
	grep -q 'pool_vanish()` is not a function' "$t/doc.out" && grep -q 'vanish.c` names no file' "$t/doc.out"
}
check "the house checks fail on an include from above, a circle, a long file, a call from above and a map naming what is not there" guard_catches
