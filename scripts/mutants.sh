#!/usr/bin/env bash
# Mutation testing: plants each bug of tests/mutants/NN-name.patch, one at
# a time, in a scratch copy of this tree and checks that the tests catch it.
#
#   scripts/mutants.sh [--rounds N] [--no-baseline] [NAME...]
#   scripts/mutants.sh --list       each mutant and the suites meant to kill it
#   scripts/mutants.sh --check      every patch still applies here (make test runs this)
#
# NAME picks mutants by name or prefix (`01`, `index-half-key`,
# `01-index-half-key.patch`); none: all. For each mutant and round: restore
# the scratch copy, apply the patch (one that no longer applies is a
# failure), `make -j2 all` there (incremental; a mutant that does not build
# is a failure too), then run the suites its `kill:` line names, fail-fast,
# in order. A suite kills the mutant when it reports a failure, crashes or
# times out (MUTANTS_TIMEOUT seconds, default 600). A mutant that survives
# them all gets the whole suite (scripts/test.sh); killed there, the table
# says so and names the suite to add to its `kill:` line. Before the first
# mutant the unmutated copy must pass every suite named (--no-baseline
# skips that), so that a kill means the bug was seen.
#
# The scratch copy lives in MUTANTS_WORK (default a directory under /tmp
# named for this checkout): tree/ is `git ls-files` of this checkout
# (tracked and untracked files, uncommitted changes included; a git
# repository of its own, committed as copied) and its
# build/, kept between runs and seeded from this checkout's build/, so
# that each mutant rebuilds only what its file touches; logs/ holds each
# run's build and test output. It never touches this checkout.
#
# A patch: lines of plain text first (what bug it plants; `kill:` and the
# suites, e.g. `kill: build/unit/test_index tests/e2e/reentry.sh`), then a
# `git diff` of files under shim/ with little context (-U2). To refresh one
# that no longer applies after the code moved: in a clean checkout, make
# the same edit by hand, then
#   { sed '/^diff --git/,$d' tests/mutants/NN-name.patch; git diff -U2 shim/; } >NEW
#   git checkout shim/ && mv NEW tests/mutants/NN-name.patch
# and check that `scripts/mutants.sh NN` still kills it.
#
# Exit status: 0 when every mutant was killed in every round; 1 when one
# survived, did not apply or did not build; 2 on a usage or set-up error.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
MUT_DIR=tests/mutants
ROUNDS=1
BASELINE=1
MODE=run
NAMES=()
TIMEOUT_S=${MUTANTS_TIMEOUT:-600}

while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=${2:-}; shift ;;
	--rounds=*) ROUNDS=${1#--rounds=} ;;
	--no-baseline) BASELINE=0 ;;
	--list) MODE=list ;;
	--check) MODE=check ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "mutants: unknown option $1" >&2; exit 2 ;;
	*) NAMES+=("$1") ;;
	esac
	shift
done
case $ROUNDS in '' | *[!0-9]* | 0) echo "mutants: --rounds wants a positive number" >&2; exit 2 ;; esac

# The patches chosen, sorted.
PATCHES=()
for f in "$MUT_DIR"/*.patch; do
	[ -f "$f" ] || continue
	b=$(basename "$f" .patch)
	if [ ${#NAMES[@]} -eq 0 ]; then
		PATCHES+=("$f")
		continue
	fi
	for n in "${NAMES[@]}"; do
		n=${n%.patch}
		case $b in "$n"* | [0-9][0-9]-"$n"*) PATCHES+=("$f"); break ;; esac
	done
done
[ ${#PATCHES[@]} -gt 0 ] || { echo "mutants: no patch in $MUT_DIR matches ${NAMES[*]:-}" >&2; exit 2; }

# kill_suites PATCH: the suites of its `kill:` lines, one a line.
kill_suites() {
	sed -n '/^diff --git/q; s/^kill:[[:space:]]*//p' "$1" | tr -s ' \t' '\n' | sed '/^$/d'
}

# patch_paths PATCH: the files it changes, one a line.
patch_paths() {
	sed -n 's|^+++ b/||p; s|^--- a/||p' "$1" | sort -u
}

# suite_source SUITE: the file a suite is built or run from (for --check).
suite_source() {
	case $1 in
	build/unit/*) echo "tests/unit/${1#build/unit/}.c" ;;
	build/fakecuda/check/*) echo "tests/fakecuda/check/${1#build/fakecuda/check/}.c" ;;
	tests/e2e/*.sh) echo "$1" ;;
	*) return 1 ;;
	esac
}

# check_patch PATCH: it names suites that exist, changes shim/ only, and applies here.
check_patch() {
	local p=$1 s src ok=0
	[ -n "$(kill_suites "$p")" ] || { echo "$p: no kill: line"; ok=1; }
	for s in $(kill_suites "$p"); do
		src=$(suite_source "$s") && [ -f "$src" ] || { echo "$p: kill: $s is no suite of this tree"; ok=1; }
	done
	[ -n "$(patch_paths "$p")" ] || { echo "$p: no diff"; ok=1; }
	for s in $(patch_paths "$p"); do
		case $s in shim/*) ;; *) echo "$p: changes $s, outside shim/"; ok=1 ;; esac
	done
	git apply --check "$p" 2>&1 || { echo "$p: no longer applies to this tree (see the header of $0)"; ok=1; }
	return $ok
}

if [ "$MODE" = list ]; then
	for p in "${PATCHES[@]}"; do
		printf '%-40s kill: %s\n' "$(basename "$p" .patch)" "$(kill_suites "$p" | tr '\n' ' ')"
	done
	exit 0
fi
if [ "$MODE" = check ]; then
	bad=0
	for p in "${PATCHES[@]}"; do
		check_patch "$p" || bad=$((bad + 1))
	done
	echo "${#PATCHES[@]} patches, $bad not usable"
	[ "$bad" -eq 0 ]
	exit
fi

# ---- the scratch copy ----------------------------------------------------------
WORK=${MUTANTS_WORK:-${TMPDIR:-/tmp}/vrampool-mutants.$(id -u).$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)}
TREE=$WORK/tree
LOGS=$WORK/logs
mkdir -p "$TREE" "$LOGS" "$WORK/orig" || exit 2

# Copies this checkout's files over the tree (mtimes kept, so make rebuilds
# only what changed); files gone from the checkout go from the tree.
sync_tree() {
	find "$TREE" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} + || return 1
	git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$TREE" || return 1
	# A repository of its own (tests/e2e/tool_build.sh clones the tree), committed as copied.
	(cd "$TREE" && { [ -d .git ] || git init -q; } && git add -A &&
		git -c user.name=mutants -c user.email=mutants@localhost commit -q --allow-empty -m "scratch copy") ||
		return 1
	# Files a mutant changed since the last build of the unmutated tree
	# (a run stopped midway): their objects may be the mutant's, and the
	# copy just gave them their old mtimes back; newer, they are rebuilt.
	rm -f "$WORK/applied"
	[ ! -f "$WORK/dirty" ] || (cd "$TREE" && xargs -r touch <"$WORK/dirty")
	if [ ! -d "$TREE/build" ] && [ -d build ]; then
		echo "seeding the scratch build from build/"
		mkdir -p "$TREE/build" &&
			tar --exclude=./test-logs --exclude=./fuzz/work -C build -cf - . | tar -xf - -C "$TREE/build"
	fi
}

# Restores the files the applied mutant changed (new mtimes: make rebuilds them).
restore_tree() {
	[ -f "$WORK/applied" ] || return 0
	while read -r f; do
		cp "$WORK/orig/$f" "$TREE/$f" || return 1
	done <"$WORK/applied"
	rm -f "$WORK/applied"
}

# apply_mutant PATCH: saves the files it changes, then applies it in the tree.
apply_mutant() {
	local p=$ROOT/$1 f
	patch_paths "$p" >"$WORK/paths"
	cat "$WORK/paths" >>"$WORK/dirty"
	while read -r f; do
		mkdir -p "$WORK/orig/$(dirname "$f")" && cp -p "$TREE/$f" "$WORK/orig/$f" || return 1
	done <"$WORK/paths"
	(cd "$TREE" && git apply "$p") || return 1
	mv "$WORK/paths" "$WORK/applied"
}

# build_tree LOG [TARGET...]: make -j2 in the tree (all when no target is named).
build_tree() {
	local log=$1; shift
	(cd "$TREE" && make -j2 "${@:-all}") >"$log" 2>&1
}

# build_targets PATCH: what its kill: suites need built: their binaries when
# all are CUnit suites (a relink of one, not of every unit test), else all.
build_targets() {
	local s
	for s in $(kill_suites "$1"); do
		case $s in build/*) echo "$s" ;; *) echo all; return ;; esac
	done
}

# run_suite SUITE LOG: 0 when the suite passes in the tree, 1 when it reports
# a failure (or dies, or runs past TIMEOUT_S); sets SUITE_WHY.
run_suite() {
	local s=$1 log=$2 rc f p
	SUITE_WHY=
	case $s in
	build/unit/* | build/fakecuda/check/*)
		(cd "$TREE" && LD_LIBRARY_PATH=$TREE/build/fakecuda ASAN_OPTIONS=detect_leaks=1 \
			timeout "$TIMEOUT_S" "$s") >"$log" 2>&1
		rc=$?
		f=$(awk '$1 == "tests" && NF >= 6 { print $5 }' "$log" | tail -n 1)
		if [ "$rc" -eq 0 ] && [ -n "$f" ] && [ "$f" -eq 0 ]; then return 0; fi
		if [ "$rc" -eq 124 ]; then SUITE_WHY="timed out"
		elif [ -n "$f" ] && [ "$f" -gt 0 ]; then SUITE_WHY="$f failed"
		else SUITE_WHY="exit $rc"; fi
		return 1 ;;
	tests/e2e/*.sh)
		(cd "$TREE" && timeout "$TIMEOUT_S" bash "$s") >"$log" 2>&1
		rc=$?
		p=$(grep -c '^PASS: ' "$log")
		f=$(grep -c '^FAIL: ' "$log")
		if [ "$rc" -eq 0 ] && [ "$f" -eq 0 ] && [ "$p" -gt 0 ]; then return 0; fi
		if [ "$rc" -eq 124 ]; then SUITE_WHY="timed out"
		elif [ "$f" -gt 0 ]; then SUITE_WHY="$f failed"
		else SUITE_WHY="exit $rc"; fi
		return 1 ;;
	esac
	SUITE_WHY="no such suite"
	return 1
}

# whole_suite LOG: 0 when scripts/test.sh passes in the tree; else SUITE_WHY names what failed.
whole_suite() {
	(cd "$TREE" && timeout 3600 scripts/test.sh) >"$1" 2>&1 && return 0
	SUITE_WHY=$(sed -n 's/^failing: //p' "$1" | tail -n 1)
	[ -n "$SUITE_WHY" ] || SUITE_WHY=$(tail -n 1 "$1")
	return 1
}

START=$(date +%s)
echo "mutants: ${#PATCHES[@]} mutants, $ROUNDS round(s); scratch copy $TREE, logs $LOGS"
sync_tree || { echo "mutants: cannot make the scratch copy" >&2; exit 2; }
echo "building the scratch copy"
build_tree "$LOGS/build.log" || { echo "mutants: the unmutated tree does not build ($LOGS/build.log)" >&2; exit 2; }
rm -f "$WORK/dirty"

# A suite that fails without a mutant would kill every mutant it is named
# for: stop. One that fails once and then passes is flaky: said, and run.
if [ "$BASELINE" -eq 1 ]; then
	mapfile -t ALL_SUITES < <(for p in "${PATCHES[@]}"; do kill_suites "$p"; done | awk '!seen[$0]++')
	for s in "${ALL_SUITES[@]}"; do
		log="$LOGS/baseline.$(basename "$s").log"
		if run_suite "$s" "$log"; then
			echo "baseline: $s passes"
		elif cp "$log" "$log.first" && run_suite "$s" "$log"; then
			echo "baseline: $s FLAKY: failed once ($log.first), then passed; a kill by it may be a flake"
		else
			echo "mutants: $s fails without any mutant ($SUITE_WHY; $log): fix that first" >&2
			exit 2
		fi
	done
fi

ROWS=()
killed=0 survived=0 broken=0 late=0
for ((round = 1; round <= ROUNDS; round++)); do
	for p in "${PATCHES[@]}"; do
		name=$(basename "$p" .patch)
		t0=$(date +%s)
		verdict= by=
		restore_tree || { echo "mutants: cannot restore the scratch copy" >&2; exit 2; }
		if ! check_patch "$p" >"$LOGS/$name.apply.log" 2>&1 || ! apply_mutant "$p" >>"$LOGS/$name.apply.log" 2>&1; then
			verdict="NOT APPLIED"; by="$(head -n 1 "$LOGS/$name.apply.log")"
			cat "$LOGS/$name.apply.log"
		elif ! build_tree "$LOGS/$name.build.log" $(build_targets "$p"); then
			verdict="NO BUILD"; by="$LOGS/$name.build.log"
			grep -m 5 -E 'error|Error' "$LOGS/$name.build.log"
		else
			for s in $(kill_suites "$p"); do
				if ! run_suite "$s" "$LOGS/$name.$(basename "$s").log"; then
					verdict=killed; by="$s ($SUITE_WHY)"
					break
				fi
			done
			if [ -z "$verdict" ]; then
				echo "$name survived its kill: suites; running the whole suite"
				if ! build_tree "$LOGS/$name.build-all.log"; then
					verdict="killed late"; by="make all ($LOGS/$name.build-all.log)"
				elif whole_suite "$LOGS/$name.all.log"; then
					verdict=SURVIVED; by="scripts/test.sh passed ($LOGS/$name.all.log)"
				else
					verdict="killed late"; by="scripts/test.sh: $SUITE_WHY"
				fi
			fi
		fi
		case $verdict in
		killed) killed=$((killed + 1)) ;;
		"killed late") killed=$((killed + 1)); late=$((late + 1)) ;;
		SURVIVED) survived=$((survived + 1)) ;;
		*) broken=$((broken + 1)) ;;
		esac
		row=$(printf '%-42s %5d  %-11s %5ds  %s' "$name" "$round" "$verdict" $(($(date +%s) - t0)) "$by")
		echo "$row"
		ROWS+=("$row")
	done
done
# Leave the scratch build unmutated for the next run.
if restore_tree && build_tree "$LOGS/build.log"; then
	rm -f "$WORK/dirty"
else
	echo "mutants: the restored scratch copy did not build ($LOGS/build.log)"
fi

echo
printf '%-42s %5s  %-11s %6s  %s\n' mutant round verdict time "killed by"
printf '%s\n' "${ROWS[@]}"
echo
[ "$late" -eq 0 ] || echo "$late killed only by the whole suite: add the suite that killed it to the patch's kill: line"
echo "${#PATCHES[@]} mutants x $ROUNDS rounds: $killed killed, $survived survived, $broken did not apply or build" \
	"($(( ($(date +%s) - START + 30) / 60 )) min)"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
