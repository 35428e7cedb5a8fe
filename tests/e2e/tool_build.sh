#!/usr/bin/env bash
# What a user does before running anything: plain `make` builds what the
# README and the manual talk about (the default goal is `all`, checked on a
# copy of the source tree as a fresh clone has it), `vrampool --version`,
# `make install` puts the command, the library and the manual page in
# PREFIX (so `man vrampool` works) and `make uninstall` takes them away.
# The manual page is made from docs/vrampool.1.md and must format cleanly.
source "$(dirname "$0")/lib.sh"
V=$VRAMPOOL_BIN

cd "$TMP" || exit 1

# A fresh clone: the files git knows about (committed or not, ignored ones left out).
fresh_clone() {
	mkdir -p clone &&
		(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
		(cd "$ROOT" && xargs -0 cp --parents -t "$TMP/clone" 2>/dev/null)
	test -f clone/Makefile
}
check "a copy of the source tree as a fresh clone has it can be made" fresh_clone
plain_make_builds_all() {
	local out
	out=$(make -C clone -n 2>&1)
	printf '%s\n' "$out" | grep -E -- '-o build/(vrampool|libvrampool\.so)( |$)'
	grep -Eq -- '-o build/vrampool( |$)' <<<"$out" && grep -Eq -- '-o build/libvrampool\.so( |$)' <<<"$out" &&
		grep -q 'build/vrampool\.1' <<<"$out"
}
check "plain make in a fresh clone would build the command, the library and the manual" \
	plain_make_builds_all
check "the default goal is all" \
	bash -c "make -C clone -pq 2>/dev/null | grep -qx '.DEFAULT_GOAL := all'"
check "vrampool --version works from the build" expect 0 '^vrampool [0-9]' "$V" --version

# ---- the manual page -------------------------------------------------------------
check "the manual page is built" test -s "$B/vrampool.1"
check "the manual page formats without a warning" \
	bash -c "out=\$(groff -man -Tutf8 -ww -z '$B/vrampool.1' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
check "the manual page has its name line and the three commands" \
	bash -c "text=\$(MANWIDTH=100 man -l '$B/vrampool.1' 2>/dev/null); grep -q 'vrampool - run a program with the vrampool shim' <<<\"\$text\" && \
		grep -q 'VRAMPOOL RUN' <<<\"\$text\" && grep -q 'VRAMPOOL INSPECT' <<<\"\$text\" && grep -q 'VRAMPOOL REPORT' <<<\"\$text\""
same_source() {
	local version
	version=$(sed -n 's/^\.TH .*"vrampool \([^"]*\)".*/\1/p' "$B/vrampool.1")
	awk -v version="$version" -f "$ROOT/analysis/md2man.awk" "$ROOT/docs/vrampool.1.md" | cmp - "$B/vrampool.1"
}
check "the manual page is made from docs/vrampool.1.md (one source)" same_source

# ---- install and uninstall ------------------------------------------------------------
P=$TMP/prefix
installed() {
	make -C "$ROOT" --no-print-directory install PREFIX="$P" || return 1
	ls -R "$P"
	test -x "$P/bin/vrampool" && test -f "$P/lib/vrampool/libvrampool.so" &&
		test -f "$P/share/man/man1/vrampool.1"
}
check "make install puts the command, the library and the manual page in PREFIX" installed
check "man vrampool finds the installed page" \
	bash -c "[ \"\$(MANPATH='$P/share/man' man -w vrampool)\" = '$P/share/man/man1/vrampool.1' ]"
check "man vrampool shows the installed page" \
	bash -c "MANPATH='$P/share/man' MANWIDTH=100 man vrampool 2>/dev/null | grep -q 'vrampool - run a program with the vrampool shim'"
check "the installed command finds its library" \
	expect 0 'host-to-device' "$P/bin/vrampool" run -- "$B/apps/trainer" --samples 32 --row 1024 --batch 8 --epochs 2 --quiet
uninstalled() {
	make -C "$ROOT" --no-print-directory uninstall PREFIX="$P" || return 1
	find "$P" -type f | tee left.txt
	[ ! -s left.txt ] && [ ! -e "$P/lib/vrampool" ]
}
check "make uninstall removes everything install put there" uninstalled
check "make uninstall twice says there is nothing to remove" \
	expect 2 'nothing to remove' make -C "$ROOT" --no-print-directory uninstall PREFIX="$P"
