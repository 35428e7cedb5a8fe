/*
 * config_path: the expansion of the path variables' patterns (%p, %r, %h,
 * %q{NAME}), the {NAME} of %q that config.c checks when it reads them, and
 * the secure getter paths are read with (config.h is the contract). Apart from config.c because it is its own
 * concern: what a path becomes for one process, not what was set.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"

const char *config_secure_getenv(const char *name)
{
	return secure_getenv(name);
}

size_t config_env_name(const char *s, char *name)
{
	size_t n = 0;

	if (s[0] != '{' || !(isalpha((unsigned char)s[1]) || s[1] == '_'))
		return 0;
	while (isalnum((unsigned char)s[1 + n]) || s[1 + n] == '_')
		if (++n > CONFIG_ENV_NAME_MAX)
			return 0;
	if (s[1 + n] != '}')
		return 0;
	if (name) {
		memcpy(name, s + 1, n);
		name[n] = '\0';
	}
	return n + 2;
}

/*
 * How config_append filters what it copies: a rank or pid as it is; a host
 * name to [A-Za-z0-9._-] (others '_'; "", "." and ".." become "_"); an
 * environment value ('/' and control characters '_'; "." and ".." "_").
 */
enum config_filter { CONFIG_AS_IS, CONFIG_HOST, CONFIG_ENV };

/* Appends s to out at *k through the filter f. Returns 0 or -ENAMETOOLONG. */
static int config_append(char *out, size_t len, size_t *k, const char *s, enum config_filter f)
{
	if ((f != CONFIG_AS_IS && (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)) ||
	    (f == CONFIG_HOST && s[0] == '\0'))
		s = "_";
	for (; *s != '\0'; s++) {
		char ch = *s;

		if (*k + 1 >= len)
			return -ENAMETOOLONG;
		if (f == CONFIG_HOST && !isalnum((unsigned char)ch) && ch != '.' && ch != '_' && ch != '-')
			ch = '_';
		if (f == CONFIG_ENV && (ch == '/' || (unsigned char)ch < 0x20 || ch == 0x7f))
			ch = '_';
		out[(*k)++] = ch;
	}
	return 0;
}

/*
 * Expands the escape at pattern ('%' and a letter) into out at *k.
 * Returns the characters it spans (0: not an escape, copied as it is),
 * or a negative errno.
 */
static int config_escape(const char *pattern, long pid, const char *rank, const char *host,
			 const char *(*get)(const char *name), char *out, size_t len, size_t *k)
{
	char num[24], name[CONFIG_ENV_NAME_MAX + 1];
	const char *v;
	size_t n;
	int err;

	switch (pattern[1]) {
	case 'p':
		snprintf(num, sizeof(num), "%ld", pid);
		err = config_append(out, len, k, num, CONFIG_AS_IS);
		return err ? err : 2;
	case 'r':
		err = config_append(out, len, k, rank && rank[0] ? rank : "norank", CONFIG_AS_IS);
		return err ? err : 2;
	case 'h':
		err = config_append(out, len, k, host ? host : "", CONFIG_HOST);
		return err ? err : 2;
	case 'q':
		n = config_env_name(pattern + 2, name);
		if (n == 0)
			return -EINVAL;
		v = get ? get(name) : NULL;
		err = config_append(out, len, k, v ? v : "", CONFIG_ENV);
		return err ? err : (int)n + 2;
	default:
		return 0;
	}
}

int config_expand_path_env(const char *pattern, long pid, const char *rank, const char *host,
			   const char *(*get)(const char *name), char *out, size_t len)
{
	size_t k = 0;
	int n;

	if (len == 0)
		return -ENAMETOOLONG;
	while (*pattern != '\0') {
		n = pattern[0] == '%' ? config_escape(pattern, pid, rank, host, get, out, len, &k) : 0;
		if (n < 0)
			goto out_fail;
		if (n > 0) {
			pattern += n;
			continue;
		}
		if (k + 1 >= len) {
			n = -ENAMETOOLONG;
			goto out_fail;
		}
		out[k++] = *pattern++;
	}
	out[k] = '\0';
	return 0;

out_fail:
	out[0] = '\0';
	return n;
}

int config_expand_path(const char *pattern, long pid, const char *rank, const char *host,
		       char *out, size_t len)
{
	return config_expand_path_env(pattern, pid, rank, host, config_secure_getenv, out, len);
}

int config_stats_path(const struct config *c, long pid, char *out, size_t len)
{
	char host[256];

	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	return config_expand_path(c->stats_path, pid, c->has_rank ? c->rank : NULL, host, out, len);
}
