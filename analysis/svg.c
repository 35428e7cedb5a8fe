/*
 * svg.c: the SVG writer of svg.h. Plain stdio: one element a line, numbers
 * with two decimals (clamped to a million, so a wild value stays a
 * number), text escaped one character at a time.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "svg.h"

#define SVG_COORD_MAX 1e6

/*
 * The length of the UTF-8 character at P when XML 1.0 allows it in a
 * document and a reader would want it in a label, else 0: a byte that
 * starts no character, a truncated, overlong or surrogate form, a code
 * point past U+10FFFF, U+FFFE and U+FFFF, and the control characters
 * (C0 but tab, line feed and carriage return; DEL; C1).
 */
static int xml_char_len(const unsigned char *p)
{
	static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	uint32_t cp;
	int n, i;

	if (p[0] < 0x80)
		return (p[0] >= 0x20 && p[0] != 0x7f) || p[0] == '\t' || p[0] == '\n' || p[0] == '\r';
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	cp = p[0] & (0x7fu >> n);
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;	/* also stops at the terminating NUL */
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp == 0xfffe || cp == 0xffff || cp <= 0x9f)
		return 0;
	return n;
}

/*
 * Writes into OUT (8 bytes) the escaped form of the character at P,
 * terminated; returns how many bytes of P it stands for.
 */
static int escape_unit(const unsigned char *p, char *out)
{
	static const char *const entity[] = { ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;",
					      ['"'] = "&quot;", ['\''] = "&apos;" };
	int n;

	if (p[0] < sizeof(entity) / sizeof(entity[0]) && entity[p[0]]) {
		strcpy(out, entity[p[0]]);
		return 1;
	}
	n = xml_char_len(p);
	if (!n) {
		strcpy(out, "\xef\xbf\xbd");	/* U+FFFD REPLACEMENT CHARACTER */
		return 1;
	}
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	return n;
}

size_t svg_escape(const char *text, char *out, size_t size)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t len = 0, t;
	bool full = false;
	char unit[8];

	if (size)
		out[0] = '\0';
	while (*p) {
		p += escape_unit(p, unit);
		t = strlen(unit);
		if (!full && len + t < size)
			memcpy(out + len, unit, t + 1);
		else
			full = true;
		len += t;
	}
	return len;
}

/* Appends to S as printf does, unless an earlier write failed. */
__attribute__((format(printf, 2, 3)))
static void put(struct svg *s, const char *fmt, ...)
{
	va_list ap;

	if (s->err)
		return;
	va_start(ap, fmt);
	if (vfprintf(s->f, fmt, ap) < 0)
		s->err = errno ? -errno : -EIO;
	va_end(ap);
}

/* Appends TEXT escaped. */
static void put_escaped(struct svg *s, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	char unit[8];

	while (*p && !s->err) {
		p += escape_unit(p, unit);
		put(s, "%s", unit);
	}
}

/* V as a coordinate: finite, within a million either way. */
static double coord(double v)
{
	if (!isfinite(v))
		return 0;
	return v > SVG_COORD_MAX ? SVG_COORD_MAX : v < -SVG_COORD_MAX ? -SVG_COORD_MAX : v;
}

/* Appends K's stroke attributes. */
static void put_stroke(struct svg *s, const struct svg_stroke *k)
{
	int i;

	put(s, " stroke=\"#%06x\" stroke-width=\"%.2f\"", (unsigned)(k->rgb & 0xffffff), coord(k->width));
	if (k->ndash > 0) {
		put(s, " stroke-dasharray=\"");
		for (i = 0; i < k->ndash; i++)
			put(s, "%s%.2f", i ? "," : "", coord(k->dash[i]));
		put(s, "\"");
	}
}

int svg_begin(struct svg *s, const char *path, double w, double h, const char *family)
{
	s->err = 0;
	s->f = fopen(path, "w");
	if (!s->f)
		return errno ? -errno : -EIO;
	put(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	       "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
	       "viewBox=\"0 0 %.0f %.0f\" font-family=\"",
	    coord(w), coord(h), coord(w), coord(h));
	put_escaped(s, family);
	put(s, "\">\n");
	if (s->err) {
		fclose(s->f);
		s->f = NULL;
		return s->err;
	}
	return 0;
}

void svg_rect(struct svg *s, double x, double y, double w, double h, long fill,
	      const struct svg_stroke *k)
{
	put(s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"",
	    coord(x), coord(y), coord(w), coord(h));
	if (fill == SVG_NO_FILL)
		put(s, " fill=\"none\"");
	else
		put(s, " fill=\"#%06lx\"", (unsigned long)fill & 0xffffff);
	if (k)
		put_stroke(s, k);
	put(s, "/>\n");
}

void svg_polyline(struct svg *s, const double *x, const double *y, int n, const struct svg_stroke *k)
{
	int i;

	if (n < 2)
		return;
	put(s, "<polyline fill=\"none\" stroke-linejoin=\"round\"");
	put_stroke(s, k);
	put(s, " points=\"");
	for (i = 0; i < n; i++)
		put(s, "%s%.2f,%.2f", i ? " " : "", coord(x[i]), coord(y[i]));
	put(s, "\"/>\n");
}

void svg_disc(struct svg *s, double x, double y, double r, uint32_t rgb)
{
	put(s, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"#%06x\"/>\n",
	    coord(x), coord(y), coord(r), (unsigned)(rgb & 0xffffff));
}

void svg_text(struct svg *s, double x, double y, const struct svg_font *font, const char *text)
{
	static const char *const anchor[] = { "start", "middle", "end" };

	put(s, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.2f\" fill=\"#%06x\" text-anchor=\"%s\"",
	    coord(x), coord(y), coord(font->size), (unsigned)(font->rgb & 0xffffff),
	    anchor[font->anchor <= SVG_END ? font->anchor : SVG_START]);
	if (font->rotate != 0)
		put(s, " transform=\"rotate(%.2f %.2f %.2f)\"", coord(font->rotate), coord(x), coord(y));
	put(s, ">");
	put_escaped(s, text);
	put(s, "</text>\n");
}

int svg_end(struct svg *s)
{
	int err;

	if (!s->f)
		return s->err ? s->err : -EBADF;
	put(s, "</svg>\n");
	err = s->err;
	if (fclose(s->f) != 0 && !err)
		err = errno ? -errno : -EIO;
	s->f = NULL;
	s->err = err;
	return err;
}
