#!/usr/bin/env bash
# make install and make uninstall (the Makefile passes $(DESTDIR)$(PREFIX)):
#
#   scripts/install.sh install ROOT COMMAND LIBRARY PAGE...
#       puts COMMAND in ROOT/bin, LIBRARY in ROOT/lib/vrampool and each
#       manual page build/NAME.N in ROOT/share/man/manN, says what it put
#       where, and records every file it installed and every folder it had
#       to create in ROOT/lib/vrampool/installed.txt;
#   scripts/install.sh uninstall ROOT
#       removes the files that list names (or, with no list, the files an
#       install puts there), then the folders the install created when they
#       are left empty, deepest first, and says what it removed. Nothing else
#       is touched. With nothing to remove it says so and fails (exit 1).
set -eu

LIST=lib/vrampool/installed.txt
# What an install puts in ROOT, for a ROOT whose list is gone.
KNOWN_FILES="bin/vrampool lib/vrampool/libvrampool.so share/man/man1/vrampool.1 share/man/man7/vrampool.7"

usage() {
	echo "usage: scripts/install.sh install ROOT COMMAND LIBRARY PAGE... | uninstall ROOT" >&2
	exit 2
}

# install_one SRC MODE DEST: installs SRC at ROOT/DEST and remembers it.
install_one() {
	install -m "$2" "$1" "$root/$3"
	echo "installed $root/$3"
	files="$files $3"
}

do_install() {
	local cmd=$1 lib=$2 page n d dirs="" old="" files=""
	shift 2
	# The folders this install needs, parents first; ROOT itself is ".".
	local need=". bin lib lib/vrampool"
	for page in "$@"; do
		n=${page##*.}
		case " $need " in *" share/man/man$n "*) ;; *) need="$need share share/man share/man/man$n" ;; esac
	done
	[ ! -f "$root/$LIST" ] || old=$(sed -n 's/^dir //p' "$root/$LIST")
	# The folders above ROOT that do not exist yet, as .., ../.. (made by install -d).
	local up=.. p
	p=$(dirname "$root")
	while [ ! -d "$p" ]; do
		dirs="$dirs $up"
		up=$up/..
		p=$(dirname "$p")
	done
	for d in $need; do
		case " $dirs " in *" $d "*) continue ;; esac
		if [ ! -d "$root/$d" ]; then
			install -d "$root/$d"
			dirs="$dirs $d"
		fi
	done
	install_one "$cmd" 0755 bin/vrampool
	install_one "$lib" 0755 lib/vrampool/libvrampool.so
	for page in "$@"; do
		n=${page##*.}
		install_one "$page" 0644 "share/man/man$n/$(basename "$page")"
	done
	# A reinstall keeps the folders the first install created.
	{
		for f in $files; do echo "file $f"; done
		for d in $old $dirs; do echo "dir $d"; done
	} | awk '!seen[$0]++' >"$root/$LIST"
}

do_uninstall() {
	local files dirs f d path removed=0
	if [ -f "$root/$LIST" ]; then
		files=$(sed -n 's/^file //p' "$root/$LIST")
		dirs=$(sed -n 's/^dir //p' "$root/$LIST")
	else
		files=$KNOWN_FILES
		dirs=lib/vrampool
	fi
	for f in $files; do
		if [ -e "$root/$f" ] || [ -L "$root/$f" ]; then
			rm -f "$root/$f"
			echo "removed $root/$f"
			removed=$((removed + 1))
		fi
	done
	rm -f "$root/$LIST"
	if [ "$removed" -eq 0 ]; then
		echo "make uninstall: nothing to remove: no file of vrampool's in $root (is PREFIX the one given to make install?)" >&2
		exit 1
	fi
	# shellcheck disable=SC2086 # the list splits on purpose
	# Deepest first: a folder's path is longer than its parent's; then ROOT
	# (.), then the folders above it (.., ../..), nearest first.
	for d in $(printf '%s\n' $dirs |
		awk '{ print (substr($0, 1, 1) == "." ? 2000 + length($0) : 1000 - length($0)), $0 }' |
		sort -n | cut -d' ' -f2-); do
		case $d in
		.) path=$root ;;
		..*) path=$root
		     for _ in $(seq $(((${#d} + 1) / 3))); do path=$(dirname "$path"); done ;;
		*) path=$root/$d ;;
		esac
		if [ -d "$path" ] && rmdir "$path" 2>/dev/null; then
			echo "removed the empty folder $path"
		fi
	done
	echo "make uninstall: removed $removed file$([ "$removed" -eq 1 ] || echo s) from $root"
}

[ $# -ge 2 ] || usage
mode=$1 root=${2%/}
[ -n "$root" ] || root=/
shift 2
case $mode in
install) [ $# -ge 3 ] || usage; do_install "$@" ;;
uninstall) [ $# -eq 0 ] || usage; do_uninstall ;;
*) usage ;;
esac
