#!/usr/bin/env bash
# The README's commands work when copied (issue 19): every fenced block that
# README.md marks as meant to be run (an HTML comment `<!-- run -->` on the
# line before its opening fence) is taken out and run as a user would paste
# it, from the top of a checkout: here a scratch directory whose build/ is
# this tree's, with a bare environment (none of the test's LD_LIBRARY_PATH,
# no VRAMPOOL_* or FAKECUDA_* variable: the block sets what it needs), under
# bash -e, with a time limit per block. No GPU is needed: the blocks that run
# say how to use the emulated device.
source "$(dirname "$0")/lib.sh"
README=$ROOT/README.md
LIMIT=${README_BLOCK_LIMIT_S:-120}

cd "$TMP" || exit 1
mkdir -p blocks checkout
ln -s "$ROOT/build" checkout/build

# Writes each marked block to blocks/N.sh (N from 1, in order) and prints N.
python3 - "$README" blocks <<'PY'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
n, i = 0, 0
while i < len(lines):
    if lines[i].strip() == "<!-- run -->":
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not re.match(r"^```", lines[j]):
            sys.exit("README.md line %d: <!-- run --> is not followed by a fenced block" % (i + 1))
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        if k >= len(lines):
            sys.exit("README.md line %d: the block never closes" % (j + 1))
        n += 1
        with open("%s/%d.sh" % (sys.argv[2], n), "w") as out:
            out.write("# README.md line %d\n" % (j + 2))
            out.write("\n".join(lines[j + 1:k]) + "\n")
        i = k
    i += 1
pass
PY
nblocks=$(ls blocks | wc -l)
check "README.md marks blocks to run (<!-- run -->), here $nblocks" test "$nblocks" -ge 1

# run_block N: runs blocks/N.sh in the checkout as pasted into a fresh shell.
run_block() {
	local n=$1 rc
	sed 's/^/  | /' "blocks/$n.sh"
	(cd checkout && env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb \
		timeout -k 5 "$LIMIT" bash -e "$TMP/blocks/$n.sh") >"out.$n" 2>&1
	rc=$?
	cat "out.$n"
	[ "$rc" -ne 124 ] || { echo "block $n ran past ${LIMIT}s"; return 1; }
	[ "$rc" -eq 0 ] || { echo "block $n: exit $rc"; return 1; }
}
for n in $(seq 1 "$nblocks"); do
	check "README block $n ($(sed -n '1s/^# //p' "blocks/$n.sh")) runs as copied, within ${LIMIT}s" run_block "$n"
done

# The blocks that run use the command where `make` puts it, or put build/ on PATH.
check "every marked block that calls vrampool says where it is (build/ on PATH, or build/vrampool)" \
	bash -c "for f in blocks/*.sh; do ! grep -qE '(^|[;&|] *)vrampool ' \"\$f\" || \
		grep -qE 'PATH=[^ ]*build|build/vrampool' \"\$f\" || { echo \"\$f\"; exit 1; }; done"

# The check has teeth: the README's old way (the command as `vrampool`, the
# demo with no emulated device) fails here as it did for a user.
printf 'vrampool --version\n' >blocks/bare.sh
printf 'build/vrampool run --layout 3072 -- build/apps/trainer --samples 64 --row 3072 --batch 8 --epochs 2\n' >blocks/nofake.sh
check "a block that calls vrampool without build/ on PATH fails the smoke check" \
	bash -c "! (LIMIT=$LIMIT TMP=$TMP; $(declare -f run_block); run_block bare)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: the demo without the emulated device's variables runs on this machine's GPU"
else
	check "the demo without the emulated device's variables fails the smoke check (no GPU here)" \
		bash -c "! (LIMIT=$LIMIT TMP=$TMP; $(declare -f run_block); run_block nofake)"
fi
