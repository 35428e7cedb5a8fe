#!/usr/bin/env bash
# The make targets a user runs first (issue 19): `make demo` builds only what
# the demo runs (the library, the command, the emulated device, the trainer)
# with no compiler line on the terminal, and its output is the demo's own;
# `make install` and `make uninstall` in a temporary PREFIX: uninstall
# removes what install put there and the folders it created (when left
# empty), nothing else, says what it removed, and fails with a message when
# there is nothing to remove.
source "$(dirname "$0")/lib.sh"

cd "$TMP" || exit 1

# ---- make demo ------------------------------------------------------------------
# A copy of the source tree as a fresh clone has it (no build/), where
# `make -n demo` shows what the demo's build would make, without making it.
mkdir -p clone
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
	(cd "$ROOT" && xargs -0 cp --parents -t "$TMP/clone" 2>/dev/null)
demo_builds_only_what_it_runs() {
	local log=clone/build/demo-build.log want others
	make -C clone -n demo >dry.txt 2>&1 || { cat dry.txt; return 1; }
	[ -f "$log" ] || { echo "no $log"; cat dry.txt; return 1; }
	for want in '-o build/libvrampool\.so ' '-o build/vrampool ' '-o build/fakecuda/libcudart\.so\.13 ' \
		'-o build/apps/trainer '; do
		grep -Eq -- "$want" "$log" || { echo "the demo's build lacks: $want"; return 1; }
	done
	# Every file it makes is part of one of the four.
	others=$(grep -oE -- '-o build/[^ ]+' "$log" | sed 's/^-o //' |
		grep -vE '^build/(shim/|analysis/|fakecuda/obj/|fakecuda/libcudart\.so\.13$|libvrampool\.(so|map)$|vrampool$|apps/trainer$)')
	if [ -n "$others" ]; then
		echo "the demo's build makes what it does not run:"
		printf '%s\n' "$others"
		return 1
	fi
}
check "make demo builds only the library, the command, the emulated device and the trainer" \
	demo_builds_only_what_it_runs

# The real run, on the tree's own build (made before the tests), small.
demo_output_is_the_demos() {
	local out rc
	out=$(DEMO_SAMPLES=256 DEMO_EPOCHS=2 make -C "$ROOT" --no-print-directory demo 2>&1); rc=$?
	printf '%s\n' "$out"
	[ "$rc" -eq 0 ] || { echo "exit $rc"; return 1; }
	if grep -E '^(cc|gcc|clang|g\+\+|nvcc|/[^ ]*/nvcc|ld|ar|awk|ln|cp|mkdir|install) |^make(\[[0-9]+\])?: |Entering directory|-Werror' <<<"$out"; then
		echo "a build line reached the demo's output"
		return 1
	fi
	grep -q '^demo: building' <<<"$out" && grep -q '^verdict: ' <<<"$out"
}
check "make demo prints the demo's own lines, no compiler line" demo_output_is_the_demos
check "make demo V=1 shows the build (here: nothing left to make)" \
	bash -c "DEMO_SAMPLES=64 DEMO_EPOCHS=2 make -C '$ROOT' --no-print-directory demo V=1 2>&1 | grep -q 'Nothing to be done\\|is up to date'"

# ---- make install and make uninstall in a temporary PREFIX ----------------------------
P=$TMP/new/prefix
installs() {
	local out
	out=$(make -C "$ROOT" --no-print-directory install PREFIX="$P" 2>&1) || { echo "$out"; return 1; }
	echo "$out"
	grep -q "^installed $P/bin/vrampool$" <<<"$out" &&
		grep -q "^installed $P/lib/vrampool/libvrampool.so$" <<<"$out" &&
		grep -q "^installed $P/share/man/man1/vrampool.1$" <<<"$out" &&
		test -x "$P/bin/vrampool" && test -f "$P/lib/vrampool/installed.txt"
}
check "make install says what it put where, in a PREFIX that did not exist" installs
uninstalls_all() {
	local out
	out=$(make -C "$ROOT" --no-print-directory uninstall PREFIX="$P" 2>&1) || { echo "$out"; return 1; }
	echo "$out"
	grep -q "^removed $P/bin/vrampool$" <<<"$out" &&
		grep -q "^removed $P/lib/vrampool/libvrampool.so$" <<<"$out" &&
		grep -q "^removed $P/share/man/man1/vrampool.1$" <<<"$out" &&
		grep -q "^removed the empty folder $P/lib/vrampool$" <<<"$out" &&
		grep -q "^make uninstall: removed [0-9]* files from $P$" <<<"$out" &&
		[ ! -e "$P" ] && [ ! -e "$TMP/new" ]
}
check "make uninstall removes the files and the folders install created, and says so" uninstalls_all
check "make uninstall with nothing to remove fails with a message" \
	expect 2 "make uninstall: nothing to remove: no file of vrampool's in $P" \
	make -C "$ROOT" --no-print-directory uninstall PREFIX="$P"

# A PREFIX that already holds folders and files of others: they stay.
Q=$TMP/shared
mkdir -p "$Q/bin" "$Q/share/man/man1" "$Q/lib"
echo other >"$Q/bin/other-tool"
keeps_what_is_not_its_own() {
	make -C "$ROOT" --no-print-directory install PREFIX="$Q" >/dev/null || return 1
	make -C "$ROOT" --no-print-directory uninstall PREFIX="$Q" || return 1
	find "$Q" | sort
	[ -f "$Q/bin/other-tool" ] && [ -d "$Q/share/man/man1" ] && [ -d "$Q/lib" ] &&
		[ ! -e "$Q/lib/vrampool" ] && [ ! -e "$Q/bin/vrampool" ] &&
		[ ! -e "$Q/share/man/man1/vrampool.1" ]
}
check "make uninstall leaves others' files and the folders that were there before" keeps_what_is_not_its_own

# An install whose list is gone: the files an install puts there are still found.
without_list() {
	make -C "$ROOT" --no-print-directory install PREFIX="$Q" >/dev/null || return 1
	rm "$Q/lib/vrampool/installed.txt"
	make -C "$ROOT" --no-print-directory uninstall PREFIX="$Q" || return 1
	[ ! -e "$Q/bin/vrampool" ] && [ ! -e "$Q/lib/vrampool" ] && [ -f "$Q/bin/other-tool" ]
}
check "make uninstall without install's list removes the files an install puts there" without_list

# DESTDIR staging, as a package build does it.
staged() {
	make -C "$ROOT" --no-print-directory install DESTDIR="$TMP/stage" PREFIX=/usr/local >/dev/null || return 1
	test -x "$TMP/stage/usr/local/bin/vrampool" || return 1
	make -C "$ROOT" --no-print-directory uninstall DESTDIR="$TMP/stage" PREFIX=/usr/local || return 1
	[ ! -e "$TMP/stage" ]
}
check "install and uninstall honour DESTDIR" staged
