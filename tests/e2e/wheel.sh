#!/usr/bin/env bash
# The wheel (issue 20): `pip wheel .` builds it through pyproject.toml's
# in-tree backend (python/vrampool_build.py, the project's own make), with
# no network (--no-index); auditwheel, from scripts/deps.sh's wheel-tools
# env, vendors the command's libraries (python/wheel_repair.py: all but
# glibc and expat) and must find a manylinux policy, as `make wheel` does.
# The wheel is then installed, alone, into a fresh virtual environment, and
# used from a directory outside the repository with no repository path on
# PATH (LD_LIBRARY_PATH names only the emulated device): `vrampool run
# --layout auto --ab` on a loop that needs only the standard library
# (tests/python/ctypes_loop.py: ctypes on the driver), `python -m vrampool
# report` on its dumps, `report --plot`, the three versions against VERSION,
# library_path() against the library the loop was given, load_dump() and
# read_telemetry(). Last, the sdist: what it carries, and that make finds
# every source of the wheel's build in it.
#
# Without python3-venv, every check is a SKIP line saying so; without the
# wheel-tools env (no network when scripts/deps.sh ran), the auditwheel
# checks are, and the unrepaired wheel is the one installed.
source "$(dirname "$0")/lib.sh"

VERSION=$(cat "$ROOT/VERSION")
TOOLS=$("$ROOT/scripts/deps.sh" --pyenv wheel)
V=$TMP/venv
W=$TMP/work
mkdir -p "$W" "$TMP/raw"

skip_all() {
	local why=$1 name
	for name in "pip wheel . builds the wheel offline" "auditwheel" "the installed wheel" \
		"vrampool run --layout auto --ab" "python -m vrampool report" "versions agree" \
		"load_dump and read_telemetry" "the sdist"; do
		echo "SKIP: wheel: $name ($why)"
	done
	exit 0
}
{ python3 -m venv "$V" >"$TMP/venv.log" 2>&1 && "$V/bin/python" -m pip --version >/dev/null 2>&1; } ||
	skip_all "python3 -m venv cannot make an environment with pip here (python3-venv): $(tail -n 1 "$TMP/venv.log")"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# one PATH...: the one file a glob matched; fails when it matched none or several.
one() {
	[ $# -eq 1 ] && [ -f "$1" ] && echo "$1"
}

# inv CMD...: CMD in $W with a clean environment: PATH the venv and the system,
# LD_LIBRARY_PATH the emulated device only, the link stated (as clients.sh).
inv() {
	(cd "$W" && env -i HOME="$TMP" TMPDIR="$TMP" PATH="$V/bin:/usr/bin:/bin" LD_LIBRARY_PATH="$FAKE" \
		VRAMPOOL_LINK_GBPS=1 VRAMPOOL_SLAB=1M "$@")
}

pip_wheel() {
	(cd "$ROOT" && "$V/bin/python" -m pip wheel --no-index --no-deps -w "$TMP/raw" .) || return 1
	RAW=$(one "$TMP"/raw/vrampool-*.whl) || return 1
	[ "$(basename "$RAW")" = "vrampool-$VERSION-py3-none-linux_$(uname -m).whl" ] ||
		{ echo "unexpected name: $RAW"; return 1; }
	"$V/bin/python" - "$RAW" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"vrampool/__init__.py", "vrampool/__main__.py", "vrampool/_version.py", "vrampool/bin/vrampool",
        "vrampool/lib/vrampool/libvrampool.so", "vrampool/share/man/man1/vrampool.1"}
missing = need - names
print("missing:", sorted(missing)) if missing else None
sys.exit(1 if missing else 0)
PY
}
check "pip wheel . builds vrampool-$VERSION-py3-none-linux_$(uname -m).whl offline (package, command, library, man page)" pip_wheel
RAW=$(one "$TMP"/raw/vrampool-*.whl)
[ -n "$RAW" ] || { echo "FAIL: no wheel was built: nothing more to check"; exit 0; }

# auditwheel: repaired, then shown; the policy a manylinux one in both.
# (check runs its command in a subshell: WHEEL is set after it.)
repair() {
	PATH=$TOOLS/bin:$PATH "$TOOLS/bin/python" "$ROOT/python/wheel_repair.py" "$RAW" "$TMP/fixed" || return 1
	WHEEL=$(one "$TMP"/fixed/vrampool-*.whl) || return 1
	case $(basename "$WHEEL") in
	"vrampool-$VERSION-py3-none-manylinux_2_"*"_$(uname -m).whl") ;;
	*) echo "not a manylinux wheel: $WHEEL"; return 1 ;;
	esac
}
show() {
	local out tag
	out=$("$TOOLS/bin/python" -m auditwheel show "$WHEEL") || return 1
	echo "$out"
	tag=$(basename "$WHEEL" .whl)
	tag=${tag##*-}
	# a library from outside the policy would make both say linux_x86_64
	tr '\n' ' ' <<<"$out" | grep -q "consistent with the following platform tag: \"$tag\"" &&
		tr '\n' ' ' <<<"$out" | grep -q "constrains the platform tag to \"$tag\""
}
if [ -x "$TOOLS/bin/python" ] && "$TOOLS/bin/python" -c 'import auditwheel' 2>/dev/null; then
	check "auditwheel repair vendors the command's libraries: a py3-none-manylinux_2_N wheel" repair
	WHEEL=$(one "$TMP"/fixed/vrampool-*.whl) || WHEEL=$RAW
	check "auditwheel show: the repaired wheel needs nothing beyond its manylinux policy" show
else
	why="no wheel-tools env at $TOOLS (scripts/deps.sh makes it where PyPI is reachable)"
	[ -f "$TOOLS.log" ] && why="$why: $(tail -n 1 "$TOOLS.log")"
	echo "SKIP: wheel: auditwheel repair and show ($why); the unrepaired wheel is installed instead"
	WHEEL=$RAW
fi

install_wheel() {
	echo "installing $WHEEL"
	"$V/bin/python" -m pip install --no-index --no-deps "$WHEEL" || return 1
	[ "$(inv sh -c 'command -v vrampool')" = "$V/bin/vrampool" ] || { echo "vrampool is not $V/bin/vrampool"; return 1; }
	# repaired, the command loads every library from vrampool.libs/ but glibc's and expat
	if [ "$WHEEL" != "$RAW" ]; then
		ldd "$(inv python -c 'import vrampool; print(vrampool.command_path())')" >"$TMP/ldd.txt" || return 1
		grep ' => ' "$TMP/ldd.txt" | grep -v " => $V/.*/vrampool\.libs/" |
			grep -Ev '^\s(libc|libm|libdl|libpthread|librt|libexpat)\.so\.[0-9]+ => ' >"$TMP/ldd.system"
		grep -q "libcairo-.* => $V/.*/vrampool\.libs/" "$TMP/ldd.txt" && [ ! -s "$TMP/ldd.system" ] ||
			{ cat "$TMP/ldd.txt"; echo "from the system:"; cat "$TMP/ldd.system"; return 1; }
	fi
	# the package, not the source tree, is what the venv imports
	inv python -c 'import vrampool, sys; sys.exit(not vrampool.__file__.startswith(sys.prefix))'
}
check "the wheel installs alone into a fresh virtual environment (no index, no dependencies); its command loads nothing from the system but glibc and expat" install_wheel

cp "$ROOT/tests/python/ctypes_loop.py" "$W/loop.py"
ab() {
	local out
	out=$(inv vrampool run --layout auto --ab --stats ab.json --telemetry t.jsonl -- python loop.py 2>&1) ||
		{ echo "$out"; return 1; }
	echo "$out"
	[ "$(grep -c '^verified OK' <<<"$out")" -eq 2 ] && grep -q '^verdict: ' <<<"$out" &&
		[ -f "$W/ab.off.json" ] && [ -f "$W/ab.on.json" ] || return 1
	# the library the command preloaded is the wheel's, and library_path() names it
	lib=$(inv python -c 'import vrampool; print(vrampool.library_path())') || return 1
	[ "$(grep '^preload ' <<<"$out" | sort -u)" = "preload $lib" ] ||
		{ echo "preloaded: $(grep '^preload ' <<<"$out" | sort -u); library_path(): $lib"; return 1; }
	case $lib in "$V"/lib/python3*/site-packages/vrampool/lib/vrampool/libvrampool.so) ;; *) return 1 ;; esac
}
check "the installed vrampool runs an A/B (--layout auto) of a stdlib loop through the wheel's library, library_path() that file" ab

report() {
	expect 0 '^verdict: with the pool' inv python -m vrampool report ab.off.json ab.on.json || return 1
	# the plot: cairo, fontconfig, freetype and png as the wheel carries them
	inv vrampool report --plot plot.png --telemetry t.on.jsonl ab.on.json >/dev/null || return 1
	[ "$(head -c 8 "$W/plot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "plot.png is no PNG"; return 1; }
}
check "python -m vrampool report reads the A/B's dumps; the installed vrampool report --plot draws a PNG" report

versions() {
	local a b c d
	a=$(inv vrampool --version) && b=$(inv python -m vrampool --version) &&
		c=$(inv python -c 'import importlib.metadata as m; print(m.version("vrampool"))') &&
		d=$(inv python -c 'import vrampool; print(vrampool.__version__)') || return 1
	echo "vrampool --version: $a; python -m vrampool --version: $b; metadata: $c; __version__: $d; VERSION: $VERSION"
	[ "$a" = "vrampool $VERSION" ] && [ "$b" = "$a" ] && [ "$c" = "$VERSION" ] && [ "$d" = "$VERSION" ] || return 1
	# the dump's own "version" (issue 19), where the library writes one
	[ "$(inv python -c 'import vrampool; print(vrampool.load_dump("ab.on.json").get("version", "'"$VERSION"'"))')" = "$VERSION" ]
}
check "vrampool --version, python -m vrampool --version and the installed metadata all say VERSION ($VERSION)" versions

api() {
	inv python - <<'PY'
import itertools, vrampool
off, on = vrampool.load_dump("ab.off.json"), vrampool.load_dump("ab.on.json")
assert on["bytes"]["requested"] == off["bytes"]["requested"] > 0, (on["bytes"], off["bytes"])
assert on["bytes"]["served_from_pool"] > 0 and off["bytes"]["served_from_pool"] == 0
recs = list(vrampool.read_telemetry("t.on.jsonl"))
assert recs and all("rows_seen" in r and "bytes_requested" in r for r in recs), recs
assert recs[-1]["bytes_requested"] == on["bytes"]["requested"], (recs[-1], on["bytes"])
# a last line cut short by a kill is dropped; any other bad line is an error
text = open("t.on.jsonl").read()
open("cut.jsonl", "w").write(text + text.splitlines()[-1][:20])
assert len(list(vrampool.read_telemetry("cut.jsonl"))) == len(recs)
open("bad.jsonl", "w").write("{nope\n" + text)
for path, fn in (("bad.jsonl", vrampool.read_telemetry), ("t.on.jsonl", vrampool.load_dump)):
    try:
        list(fn(path)) if fn is vrampool.read_telemetry else fn(path)
        raise SystemExit("%s accepted %s" % (fn.__name__, path))
    except ValueError as e:
        print("refused:", e)
print("ok", len(recs), "telemetry records")
PY
}
check "load_dump() and read_telemetry() read the run's dump and telemetry (a cut last line dropped, junk refused)" api

sdist() {
	local tgz
	tgz=$(cd "$ROOT" && "$V/bin/python" -c 'import sys; sys.path.insert(0, "python")
import vrampool_build as b; print(b.build_sdist(sys.argv[1]))' "$TMP/sdist") || return 1
	[ "$tgz" = "vrampool-$VERSION.tar.gz" ] || { echo "name: $tgz"; return 1; }
	tar -xzf "$TMP/sdist/$tgz" -C "$TMP/sdist" || return 1
	local d=$TMP/sdist/vrampool-$VERSION f
	for f in PKG-INFO pyproject.toml VERSION Makefile python/vrampool_build.py python/vrampool/__init__.py \
		shim/core/config.c analysis/run.c docs/vrampool.1.md; do
		[ -f "$d/$f" ] || { echo "the sdist lacks $f"; return 1; }
	done
	! ls "$d/build" >/dev/null 2>&1 || { echo "the sdist carries build/"; return 1; }
	# every source the wheel's make needs is there (make -n fails on a missing one)
	(cd "$d" && make -n B=build/wheel/obj SANITIZE= build/wheel/obj/vrampool build/wheel/obj/libvrampool.so \
		build/wheel/obj/vrampool.1 >/dev/null)
}
check "the sdist carries the sources, pyproject.toml and PKG-INFO, and make finds every source of the wheel in it" sdist
