/*
 * load.c: checked reading of the library's JSON files (load.h): each value
 * read with jansson, each number checked to be what its key promises, each
 * failure one line that names the file and the key.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"
#include "vrampool.h"

size_t load_where(struct load_error *e)
{
	int n;

	if (e->line)
		n = snprintf(e->msg, e->size, "%s: line %ld: ", esc(e->path), e->line);
	else
		n = snprintf(e->msg, e->size, "%s: ", esc(e->path));
	return n < 0 ? 0 : (size_t)n < e->size ? (size_t)n : e->size - 1;
}

int load_type_error(struct load_error *e, const char *section,
		    const char *key, const char *what)
{
	size_t o = load_where(e);

	snprintf(e->msg + o, e->size - o, "key \"%s%s%s\" is not %s",
		 section ? section : "", section ? "." : "", key, what);
	return -EINVAL;
}

int load_value_error(struct load_error *e, const char *section, const char *key,
		     const char *value, const char *why)
{
	size_t o = load_where(e);

	snprintf(e->msg + o, e->size - o, "key \"%s%s%s\" is %s: %s",
		 section ? section : "", section ? "." : "", key, value, why);
	return -EINVAL;
}

int load_count(struct load_error *e, json_t *v, const char *section,
	       const char *key, uint64_t *out)
{
	char shown[64];
	double r;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0) {
			snprintf(shown, sizeof(shown), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
			return load_value_error(e, section, key, shown,
						"negative, and a count cannot be");
		}
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_real(v))
		return load_type_error(e, section, key, "a non-negative number");
	r = json_real_value(v);
	snprintf(shown, sizeof(shown), "%.17g", r);
	if (r < 0)
		return load_value_error(e, section, key, shown, "negative, and a count cannot be");
	if (r != floor(r))
		return load_value_error(e, section, key, shown, "a fraction where a whole number is expected");
	if (r >= 18446744073709551616.0)
		return load_value_error(e, section, key, shown,
					"too large to represent (2^64 or more)");
	*out = (uint64_t)r;
	return 0;
}

int load_u64(struct load_error *e, json_t *obj, const char *section,
	     const char *key, uint64_t *out)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	return load_count(e, v, section, key, out);
}

int load_seconds(struct load_error *e, json_t *obj, const char *section,
		 const char *key, double *out, bool *has)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;
	char shown[64];

	*out = 0;
	if (has)
		*has = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return load_type_error(e, section, key, "a number");
	*out = json_number_value(v);
	if (*out < 0 || !isfinite(*out)) {
		snprintf(shown, sizeof(shown), "%.17g", *out);
		return load_value_error(e, section, key, shown, "negative, and a time cannot be");
	}
	if (has)
		*has = true;
	return 0;
}

int load_string(struct load_error *e, json_t *obj, const char *section,
		const char *key, char *out, size_t size, bool numbers)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	out[0] = '\0';
	if (!v || json_is_null(v))
		return 0;
	if (numbers && json_is_integer(v)) {
		snprintf(out, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return 0;
	}
	if (!json_is_string(v))
		return load_type_error(e, section, key, "a string");
	snprintf(out, size, "%s", json_string_value(v));
	return 0;
}

int load_bool(struct load_error *e, json_t *obj, const char *section,
	      const char *key, bool def, bool *out, bool *has)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	*out = def;
	if (has)
		*has = false;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_boolean(v))
		*out = json_is_true(v);
	else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
		*out = json_integer_value(v) != 0;
	else
		return load_type_error(e, section, key, "a boolean");
	if (has)
		*has = true;
	return 0;
}

json_t *load_section(struct load_error *e, json_t *root, const char *key, int *err)
{
	json_t *v = json_object_get(root, key);

	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_object(v)) {
		if (!*err)
			*err = load_type_error(e, NULL, key, "an object");
		return NULL;
	}
	return v;
}

int load_file(struct load_error *e, const char *path, uint64_t max, char **buf, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *p = NULL, *grown;
	ssize_t r;
	int fd, ret = 0;
	size_t o;

	fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ret = -errno;
		o = load_where(e);
		snprintf(e->msg + o, e->size - o, "%s", strerror(errno));
		return ret;
	}
	p = malloc(cap + 1);
	if (!p) {
		ret = -ENOMEM;
		goto out_close;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= max) {
				ret = -EFBIG;
				o = load_where(e);
				snprintf(e->msg + o, e->size - o, "larger than %" PRIu64 " MiB: not a vrampool file",
					 max >> 20);
				goto out_close;
			}
			cap = cap * 2 > max ? (size_t)max : cap * 2;
			grown = realloc(p, cap + 1);
			if (!grown) {
				ret = -ENOMEM;
				goto out_close;
			}
			p = grown;
		}
		r = read(fd, p + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			o = load_where(e);
			snprintf(e->msg + o, e->size - o, "%s", strerror(errno));
			goto out_close;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	p = NULL;
out_close:
	if (ret == -ENOMEM) {
		o = load_where(e);
		snprintf(e->msg + o, e->size - o, "out of memory");
	}
	free(p);
	if (fd != STDIN_FILENO)
		close(fd);
	return ret;
}

int load_json_error(struct load_error *e, const json_error_t *jerr)
{
	size_t o = load_where(e);

	if (strstr(jerr->text, "too big") || strstr(jerr->text, "overflow"))
		snprintf(e->msg + o, e->size - o,
			 "line %d, column %d: a number too large to represent (2^63 or more): %s",
			 jerr->line, jerr->column, esc(jerr->text));
	else if (jerr->line > 0)
		snprintf(e->msg + o, e->size - o, "not valid JSON (line %d, column %d): %s",
			 jerr->line, jerr->column, esc(jerr->text));
	else
		snprintf(e->msg + o, e->size - o, "%s", esc(jerr->text));
	return -EINVAL;
}
