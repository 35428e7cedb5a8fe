# md2man.awk: turns a manual page written in Markdown (docs/vrampool.1.md,
# docs/vrampool.7.md) into roff for man(7), so that each page has one
# source. It knows the Markdown those files use and no more:
#   "# NAME(N): what it is"   the title: the header and the NAME line
#   "## Section", "### Subsection"
#   paragraphs, "- " and "1. " lists (continued on the following lines,
#   indented or not, up to a blank line or the next block)
#   tables (the first cell becomes the tag, the second its text, any
#   further cell "(header: cell)"), fenced code blocks
#   inline: `code` (bold, verbatim), **bold**, *italic*, [text](url)
# A paragraph is gathered whole before its inline marks are read, so a
# code span may run across a line break. Run as
#   awk -v version=0.2.0 -f analysis/md2man.awk docs/vrampool.1.md > vrampool.1

# Escapes text for roff: backslashes, hyphens (as minus signs, so options
# can be copied), and a dot or quote that would start a request.
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	if (s ~ /^[.']/)
		s = "\\&" s
	return s
}

# The marks of prose outside code spans: **bold**, *italic*, [text](url).
function prose(s,    c) {
	while (match(s, /\[[^]]+\]\([^)]+\)/)) {
		c = substr(s, RSTART + 1, RLENGTH - 2)
		sub(/\]\(/, " <", c)
		s = substr(s, 1, RSTART - 1) c ">" substr(s, RSTART + RLENGTH)
	}
	while (match(s, /\*\*[^*]+\*\*/)) {
		c = substr(s, RSTART + 2, RLENGTH - 4)
		s = substr(s, 1, RSTART - 1) "\\fB" c "\\fR" substr(s, RSTART + RLENGTH)
	}
	while (match(s, /\*[^* ][^*]*\*/)) {
		c = substr(s, RSTART + 1, RLENGTH - 2)
		s = substr(s, 1, RSTART - 1) "\\fI" c "\\fR" substr(s, RSTART + RLENGTH)
	}
	return s
}

# A code span: bold, verbatim; a short one (a command and its flags,
# `ldconfig -p`) is never broken across lines.
function codespan(s) {
	s = esc(s)
	if (length(s) <= 40)
		gsub(/ /, "\\~", s)
	return "\\fB" s "\\fR"
}

# One logical line of text to roff: code spans through codespan(), the prose
# between them through prose(). An unpaired backtick stays.
function inline(s,    out, i, n) {
	out = ""
	while ((i = index(s, "`")) > 0) {
		n = index(substr(s, i + 1), "`")
		if (n == 0)
			break
		out = out prose(esc(substr(s, 1, i - 1))) codespan(substr(s, i + 1, n - 1))
		s = substr(s, i + n + 1)
	}
	out = out prose(esc(s))
	if (out ~ /^[.']/)
		out = "\\&" out
	return out
}

function trim(s) {
	sub(/^[ \t]+/, "", s)
	sub(/[ \t]+$/, "", s)
	return s
}

# Prints the gathered paragraph or list item, if any.
function flush() {
	if (kind == "")
		return
	if (kind == "p") {
		if (!fresh)
			print ".PP"
	} else if (kind == "li") {
		print ".IP \\(bu 2"
	} else {
		print ".IP " kind " 4"
	}
	print inline(buf)
	kind = ""
	buf = ""
	fresh = 0
}

# Adds one source line to the block being gathered, starting one of kind k.
function gather(k, text) {
	if (kind == "") {
		kind = k
		buf = trim(text)
	} else {
		buf = buf " " trim(text)
	}
}

BEGIN {
	code = 0
	intable = 0
	named = 0
	kind = ""
	fresh = 0
}

# Fenced code: verbatim, no filling.
/^```/ {
	flush()
	intable = 0
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
	fresh = 0
	next
}
code {
	print esc($0)
	next
}

# The title "# NAME(N): what": the header, NAME and the start of DESCRIPTION.
/^# / && !named {
	title = substr($0, 3)
	name = title
	sub(/\(.*/, "", name)
	section = title
	sub(/^[^(]*\(/, "", section)
	sub(/\).*/, "", section)
	what = title
	sub(/^[^:]*: */, "", what)
	manual = section == "1" ? "User Commands" : "Miscellaneous Information Manual"
	printf ".TH %s %s \"\" \"vrampool %s\" \"%s\"\n", toupper(name), section, version, manual
	print ".nh"
	print ".ad l"
	print ".SH NAME"
	print esc(name) " \\- " inline(what)
	named = 1
	fresh = 1
	next
}
/^## / {
	flush()
	intable = 0
	print ".SH " esc(toupper(substr($0, 4)))
	fresh = 1
	next
}
/^### / {
	flush()
	intable = 0
	print ".SS " esc(substr($0, 5))
	fresh = 1
	next
}

# Tables: the header row is kept for the names of the third and later
# columns, the rule under it dropped; each row is a tagged paragraph.
/^\|/ {
	flush()
	line = $0
	if (line ~ /^\|[ \t:|-]+\|?[ \t]*$/)
		next
	sub(/^\|/, "", line)
	sub(/\|[ \t]*$/, "", line)
	n = split(line, cells, "|")
	if (!intable) {
		intable = 1
		for (i = 1; i <= n; i++)
			head[i] = trim(cells[i])
		next
	}
	# The first row resets the indentation a list before it left.
	if (intable++ == 1 && !fresh)
		print ".PP"
	print ".TP"
	print inline(trim(cells[1]))
	text = trim(cells[2])
	for (i = 3; i <= n; i++)
		text = text " (" head[i] ": " trim(cells[i]) ")"
	print inline(text)
	fresh = 0
	next
}
{
	intable = 0
}

/^- / {
	flush()
	gather("li", substr($0, 3))
	next
}
/^[0-9]+\. / {
	flush()
	number = $0
	sub(/ .*/, "", number)
	gather(number, substr($0, length(number) + 2))
	next
}
/^[ \t]*$/ {
	flush()
	next
}
{
	gather("p", $0)
}
END {
	flush()
}
