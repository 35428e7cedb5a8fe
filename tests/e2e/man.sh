#!/usr/bin/env bash
# The manual as a user reads it: both pages, vrampool(1) (the command) and
# vrampool(7) (the preloaded library), rendered with `man -l` at 80
# columns, are clean (no troff warning, no Markdown left over: backticks,
# `**`, `](`, a leading `#`, a table row, an `*italic*` mark, a raw font
# escape), each has a one-line NAME that man-db can index, each is made
# from its own source and by `make all`; and they are complete and true:
# every option of the command's `struct option` tables and getopt strings
# (analysis/*.c, main.c's own) is in vrampool(1) and every option either
# page shows exists (in vrampool(1)'s EXAMPLES, up to a command's " -- ":
# the rest is the program's own); every VRAMPOOL_* name the library reads
# (shim/) is in vrampool(7) and every VRAMPOOL_* name either page shows is
# read.
# Skipped, with the reason, where `man` is absent.
source "$(dirname "$0")/lib.sh"

if ! command -v man >/dev/null 2>&1; then
	echo "SKIP: the manual pages (man is not installed: apt-get install man-db)"
	exit 0
fi

PAGES="1 7"

# render N: the page vrampool(N) as `man -l` shows it, 80 columns, no pager.
render() {
	MANWIDTH=80 MANPAGER=cat PAGER=cat man -l "$B/vrampool.$1" 2>&1
}

for n in $PAGES; do
	check "vrampool($n) is built" test -s "$B/vrampool.$n"
done
both_in_all() {
	local all
	all=$(make -C "$ROOT" -pq 2>/dev/null | grep -E '^all:')
	echo "$all"
	grep -q 'build/vrampool\.1\b' <<<"$all" && grep -q 'build/vrampool\.7\b' <<<"$all"
}
check "make all builds both manual pages" both_in_all

# same_source N: the built page is what md2man makes of docs/vrampool.N.md today.
same_source() {
	local version
	version=$(sed -n 's/^\.TH .*"vrampool \([^"]*\)".*/\1/p' "$B/vrampool.$1")
	awk -v version="$version" -f "$ROOT/analysis/md2man.awk" "$ROOT/docs/vrampool.$1.md" | cmp - "$B/vrampool.$1"
}
# no_warnings N: neither groff (all warnings) nor man (its default set) says a word.
no_warnings() {
	local out
	if command -v groff >/dev/null 2>&1; then
		out=$(groff -man -Tutf8 -ww -z "$B/vrampool.$1" 2>&1)
		[ -z "$out" ] || { echo "groff: $out"; return 1; }
	fi
	out=$(MANWIDTH=80 MANPAGER=cat man --warnings -l "$B/vrampool.$1" 2>&1 >/dev/null)
	[ -z "$out" ] || { echo "man: $out"; return 1; }
}
# no_residue N: nothing of the Markdown source or of roff shows in the text.
no_residue() {
	local text bad
	text=$(render "$1") || return 1
	[ -n "$text" ] || { echo "empty page"; return 1; }
	# (a heading's # or a table's | at the margin of the text, not in an example)
	bad=$(grep -nE '`|\*\*|\]\(|^ {0,7}#|^ {0,7}\||(^|[[:space:](])\*[A-Za-z][^*]*\*|\\f[BIRP]' <<<"$text")
	[ -z "$bad" ] || { echo "left in the rendered page:"; echo "$bad"; return 1; }
}
# one_name N: NAME is one source line "vrampool \- ...", section N in .TH,
# and lexgrog (what mandb indexes for whatis and apropos) reads it.
one_name() {
	local page=$B/vrampool.$1 name
	grep -q "^\.TH VRAMPOOL $1 " "$page" || { echo "no .TH VRAMPOOL $1"; return 1; }
	name=$(awk '/^\.SH NAME/ { getline; print; getline; print; exit }' "$page")
	echo "$name"
	[ "$(sed -n 1p <<<"$name")" != "" ] && grep -q '^vrampool \\- ' <<<"$name" &&
		grep -q '^\.S[HS] ' <<<"$(sed -n 2p <<<"$name")" || return 1
	if command -v lexgrog >/dev/null 2>&1; then
		lexgrog "$page" | grep -q ': "vrampool - ' || return 1
	fi
}
for n in $PAGES; do
	check "vrampool($n) is made from docs/vrampool.$n.md (one source)" same_source "$n"
	check "vrampool($n) formats without a troff warning" no_warnings "$n"
	check "vrampool($n) shows no backtick, Markdown or roff residue" no_residue "$n"
	check "vrampool($n) has a one-line NAME that whatis can index" one_name "$n"
done

# names: the options and variables, from the code and from the rendered pages.
names() {
	render 1 >"$TMP/page1.txt" && render 7 >"$TMP/page7.txt" || return 1
	python3 - "$ROOT" "$TMP/page1.txt" "$TMP/page7.txt" "$1" <<'PY'
import glob, re, sys

root, page1, page7, what = sys.argv[1:5]
text1 = open(page1).read()
text7 = open(page7).read()

def code(path):
    """A C file without its comments (a name in a comment is not code)."""
    src = open(path).read()
    src = re.sub(r'/\*.*?\*/', ' ', src, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', src)

def has(text, token):
    return re.search(r'(?<![\w-])' + re.escape(token) + r'(?![\w-])', text) is not None

def sections(text):
    """{SECTION: its text} of a rendered page (headings start in column 0)."""
    out, name = {}, ''
    for line in text.splitlines():
        if re.match(r'^[A-Z][A-Z0-9 ,]*$', line):
            name = line
        out[name] = out.get(name, '') + line + '\n'
    return out

bad = []
if what == 'options':
    longs, pairs, shorts = set(), set(), set()
    for path in sorted(glob.glob(root + '/analysis/*.c')):
        src = code(path)
        optstrings = re.findall(r'getopt(?:_long)?\s*\(\s*\w+\s*,\s*\w+\s*,\s*"([^"]*)"', src)
        letters = set(c for s in optstrings for c in s if c.isalnum())
        shorts |= set('-' + c for c in letters)
        for name, val in re.findall(r'\{\s*"([a-z0-9-]+)"\s*,\s*(?:no|required|optional)_argument\s*,'
                                    r'\s*NULL\s*,\s*\'(.)\'\s*\}', src):
            longs.add('--' + name)
            if val in letters:
                pairs.add(('-' + val, '--' + name))
        # main.c compares argv by hand: strcmp(argv[1], "--version")
        for opt in re.findall(r'strcmp\s*\(\s*(?:argv\[\d\]|arg)\s*,\s*"(-[-\w]+)"\s*\)', src):
            (longs if opt.startswith('--') else shorts).add(opt)
    if len(longs) < 10 or len(pairs) < 5:
        bad.append('the option tables were not found in analysis/*.c (%d long, %d pairs)' % (len(longs), len(pairs)))
    print('in the code:', ' '.join(sorted(longs)), ' '.join(sorted(shorts)))
    for opt in sorted(longs | shorts):
        if not has(text1, opt):
            bad.append('%s is an option in analysis/ but not in vrampool(1)' % opt)
    for short, long in sorted(pairs):
        if not re.search(r'(?<![\w-])%s, %s(?![\w-])' % (re.escape(short), re.escape(long)), text1):
            bad.append('vrampool(1) does not pair %s with %s as the code does ("%s, %s")' % (short, long, short, long))
    # What the page shows: every --name outside EXAMPLES, and in EXAMPLES the
    # vrampool command lines up to their " -- " (the rest is CMD's own).
    shown = set()
    for sect, body in sections(text1).items():
        if sect == 'EXAMPLES':
            for line in body.splitlines():
                if 'vrampool ' in line:
                    line = line[line.index('vrampool '):].split(' -- ')[0]
                    shown |= set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', line))
                    shown |= set(re.findall(r'(?<![\w-])-[A-Za-z](?![\w-])', line))
        else:
            shown |= set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', body))
    # and every option tag (an option at the start of an indented line)
    for line in text1.splitlines():
        m = re.match(r'^ {7}(-[A-Za-z]), --', line)
        if m:
            shown.add(m.group(1))
    for opt in sorted(shown - longs - shorts):
        bad.append('vrampool(1) shows %s, which no option table in analysis/ has' % opt)
    for opt in sorted(set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', text7)) - longs):
        bad.append('vrampool(7) shows %s, which no option table in analysis/ has' % opt)
else:
    # The names the library reads: every "VRAMPOOL..." string in shim/
    # (config.c reads them with config_get(get, "NAME") and friends; a
    # header may name one in a macro; include guards are no strings).
    # Excluded: names of the project that are not the library's own
    # variables, should one appear in shim/ (the test scripts' binary and
    # Python environment, tests/unit/test_config.c's secure_getenv probe).
    excluded = {'VRAMPOOL_BIN', 'VRAMPOOL_PYENV', 'VRAMPOOL_CLIENTS_PYENV', 'VRAMPOOL_TEST_SECURE'}
    name_re = r'\bVRAMPOOL(?:_[A-Z0-9_]*[A-Z0-9])?\b'
    read = set()
    for path in sorted(glob.glob(root + '/shim/**/*.[ch]', recursive=True)):
        for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', code(path)):
            if re.fullmatch(name_re, lit):
                read.add(lit)
    read -= excluded
    if len(read) < 10 or 'VRAMPOOL' not in read or 'VRAMPOOL_LAYOUT' not in read:
        bad.append('the variables were not found in shim/ (%d names)' % len(read))
    print('read by the library:', ' '.join(sorted(read)))
    for name in sorted(read):
        if not has(text7, name):
            bad.append('%s is read by the library but not in vrampool(7)' % name)
    # VRAMPOOL_LAYUOT: the pages' example of a misspelled name (warned about)
    for page, text in (('vrampool(7)', text7), ('vrampool(1)', text1)):
        for name in sorted(set(re.findall(name_re, text)) - read - {'VRAMPOOL_LAYUOT'}):
            bad.append('%s shows %s, which the library does not read' % (page, name))
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
PY
}
check "every option of the command is in vrampool(1), and every option the pages show exists" names options
check "every VRAMPOOL_* variable the library reads is in vrampool(7), and every one shown is read" names variables
