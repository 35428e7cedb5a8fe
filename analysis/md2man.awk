# md2man.awk: turns docs/vrampool.md into the roff page vrampool(1), so
# that the manual has one source. It knows the Markdown that file uses and
# no more: "# title", "## section", "### subsection", paragraphs, "- " lists
# (with indented continuation lines), tables (first cell becomes the tag),
# fenced code blocks, `code` and **bold**. Run as
#   awk -v version=0.2.0 -f analysis/md2man.awk docs/vrampool.md > vrampool.1

# Escapes text for roff: backslashes, hyphens, a leading dot or quote.
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	if (s ~ /^[.']/)
		s = "\\&" s
	return s
}

# Escapes text and turns `code` and **bold** into bold.
function inline(s,    out, i, c, n) {
	s = esc(s)
	out = ""
	while ((i = index(s, "`")) > 0) {
		out = out substr(s, 1, i - 1)
		s = substr(s, i + 1)
		n = index(s, "`")
		if (n == 0) {
			out = out "`"
			break
		}
		out = out "\\fB" substr(s, 1, n - 1) "\\fR"
		s = substr(s, n + 1)
	}
	s = out s
	while (match(s, /\*\*[^*]+\*\*/)) {
		c = substr(s, RSTART + 2, RLENGTH - 4)
		s = substr(s, 1, RSTART - 1) "\\fB" c "\\fR" substr(s, RSTART + RLENGTH)
	}
	return s
}

function trim(s) {
	sub(/^[ \t]+/, "", s)
	sub(/[ \t]+$/, "", s)
	return s
}

BEGIN {
	code = 0
	intable = 0
	named = 0
}

# Fenced code: verbatim, no filling.
/^```/ {
	if (!code) {
		print ".PP"
		print ".nf"
		print ".RS 4"
		code = 1
	} else {
		print ".RE"
		print ".fi"
		code = 0
	}
	next
}
code {
	print esc($0)
	next
}

# The title: NAME and the start of DESCRIPTION.
/^# / && !named {
	title = substr($0, 3)
	name = title
	sub(/\(1\).*/, "", name)
	what = title
	sub(/^[^:]*: */, "", what)
	printf ".TH %s 1 \"\" \"vrampool %s\" \"User Commands\"\n", toupper(name), version
	print ".nh"
	print ".ad l"
	print ".SH NAME"
	print esc(name) " \\- " esc(what)
	print ".SH DESCRIPTION"
	named = 1
	next
}
/^## / {
	intable = 0
	print ".SH " esc(toupper(substr($0, 4)))
	next
}
/^### / {
	intable = 0
	print ".SS " esc(substr($0, 5))
	next
}

# Tables: the header row and the rule under it are dropped; each row is
# a tagged paragraph, the first cell the tag, the others its text.
/^\|/ {
	line = $0
	if (line ~ /^\|[ \t:|-]+\|?[ \t]*$/) {
		next
	}
	if (!intable) {
		intable = 1
		next
	}
	sub(/^\|/, "", line)
	sub(/\|[ \t]*$/, "", line)
	n = split(line, cells, "|")
	print ".TP"
	print inline(trim(cells[1]))
	text = ""
	for (i = 2; i <= n; i++)
		text = text (i > 2 ? "; " : "") trim(cells[i])
	print inline(text)
	next
}
{
	intable = 0
}

/^- / {
	print ".IP \\(bu 2"
	print inline(substr($0, 3))
	next
}
/^[ \t]*$/ {
	print ".PP"
	next
}
{
	print inline(trim($0))
}
