/*
 * loader.c: which file a name means (loader.h): ld.so's search order for
 * DT_NEEDED, execvp's for commands, the #! line, pyenv's shims. Every file
 * opened here is opened through loader_open_regular.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "loader.h"

#define PYENV_SHIM_MAX 8192	/* bytes of a shim script read */

/* Names the kind of a file that is not a regular one. */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "is a directory";
	if (S_ISFIFO(mode))
		return "a FIFO (named pipe)";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

int loader_open_regular(const char *path, struct stat *st, char *err, size_t err_size)
{
	struct stat after;
	int fd, ret, flags;

	if (stat(path, st) != 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		return ret;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, err_size, "%s, not a program or library", file_kind(st->st_mode));
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	}
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		return ret;
	}
	if (fstat(fd, &after) != 0 || !S_ISREG(after.st_mode) ||
	    after.st_dev != st->st_dev || after.st_ino != st->st_ino) {
		snprintf(err, err_size, "changed while it was opened (now %s)",
			 fstat(fd, &after) == 0 ? file_kind(after.st_mode) : "unreadable");
		close(fd);
		return -EINVAL;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags >= 0)
		fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	*st = after;
	return fd;
}

void loader_cache_release(struct loader_cache *c)
{
	int i;

	for (i = 0; i < c->n; i++) {
		free(c->entries[i].name);
		free(c->entries[i].path);
	}
	free(c->entries);
	c->entries = NULL;
	c->n = 0;
}

/* Loads `ldconfig -p` once: the ld.so cache, name => path. */
static void loader_cache_load(struct loader_cache *c)
{
	const char *ldconfig = access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig -p" :
			       "/usr/sbin/ldconfig -p";
	char line[PATH_MAX + 256], *name, *arrow, *end;
	FILE *p;
	void *grown;

	c->loaded = true;
	p = popen(ldconfig, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		name = line + strspn(line, " \t");
		end = strchr(name, ' ');
		arrow = strstr(name, " => ");
		if (!end || !arrow)
			continue;
		*end = '\0';
		arrow += 4;
		arrow[strcspn(arrow, "\n")] = '\0';
		grown = realloc(c->entries, (size_t)(c->n + 1) * sizeof(*c->entries));
		if (!grown)
			break;
		c->entries = grown;
		c->entries[c->n].name = strdup(name);
		c->entries[c->n].path = strdup(arrow);
		if (!c->entries[c->n].name || !c->entries[c->n].path) {
			free(c->entries[c->n].name);
			free(c->entries[c->n].path);
			break;
		}
		c->n++;
	}
	pclose(p);
}

/* The Debian multiarch directory name for MACHINE, or NULL. */
static const char *multiarch(int machine)
{
	switch (machine) {
	case EM_X86_64:
		return "x86_64-linux-gnu";
	case EM_AARCH64:
		return "aarch64-linux-gnu";
	case EM_PPC64:
		return "powerpc64le-linux-gnu";
	default:
		return NULL;
	}
}

/*
 * Whether PATH is a candidate ld.so accepts: an ELF object of CLASS and
 * MACHINE (1), or a file that exists but is not a regular file, which ld.so
 * would try to open (-1). 0: skip it.
 */
static int candidate(const char *path, int elfclass, int machine)
{
	unsigned char h[20];
	char err[128];
	struct stat st;
	ssize_t n;
	int fd, m;

	fd = loader_open_regular(path, &st, err, sizeof(err));
	if (fd < 0)
		return fd == -EINVAL && stat(path, &st) == 0 && !S_ISDIR(st.st_mode) ? -1 : 0;
	n = pread(fd, h, sizeof(h), 0);
	close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h, ELFMAG, SELFMAG) != 0 || h[EI_CLASS] != elfclass)
		return 0;
	m = h[EI_DATA] == ELFDATA2MSB ? (h[18] << 8 | h[19]) : (h[19] << 8 | h[18]);
	return m == machine;
}

/* Expands $ORIGIN, $LIB and $PLATFORM (with or without braces) in DIR. */
static void expand_dst(const char *dir, const char *origin, int machine,
		       char *out, size_t size)
{
	static const char *const names[] = { "ORIGIN", "LIB", "PLATFORM" };
	char lib[64];
	const char *values[3];
	struct utsname u;
	size_t o = 0, len, k;
	const char *ma = multiarch(machine);

	snprintf(lib, sizeof(lib), "%s%s", ma ? "lib/" : "lib64", ma ? ma : "");
	values[0] = origin;
	values[1] = lib;
	values[2] = uname(&u) == 0 ? u.machine : "x86_64";
	while (*dir && o + 1 < size) {
		bool done = false;

		if (*dir == '$') {
			bool brace = dir[1] == '{';

			for (k = 0; k < 3 && !done; k++) {
				len = strlen(names[k]);
				if (strncmp(dir + 1 + brace, names[k], len) != 0 ||
				    (brace && dir[1 + brace + len] != '}'))
					continue;
				o += (size_t)snprintf(out + o, size - o, "%s", values[k]);
				if (o >= size)
					o = size - 1;
				dir += 1 + brace + len + brace;
				done = true;
			}
		}
		if (!done)
			out[o++] = *dir++;
	}
	out[o] = '\0';
}

/*
 * Searches NAME in the colon-separated LIST of directories; writes the first
 * candidate into OUT and returns true.
 */
static bool search_list(const char *list, const char *name, const char *origin,
			int elfclass, int machine, char *out, size_t size)
{
	char dir[PATH_MAX], expanded[PATH_MAX];
	const char *p = list, *colon;
	size_t len;

	while (p) {
		colon = strchr(p, ':');
		len = colon ? (size_t)(colon - p) : strlen(p);
		if (len >= sizeof(dir))
			len = sizeof(dir) - 1;
		memcpy(dir, p, len);
		dir[len] = '\0';
		expand_dst(len ? dir : ".", origin, machine, expanded, sizeof(expanded));
		if ((size_t)snprintf(out, size, "%s/%s", expanded, name) < size &&
		    candidate(out, elfclass, machine))
			return true;
		p = colon ? colon + 1 : NULL;
	}
	return false;
}

bool loader_resolve(struct loader_cache *cache, const char *name,
		    const struct elf_facts *f, const char *origin,
		    const struct loader_chain *up, char *out, size_t size)
{
	static const char *const defaults[] = { "/lib64", "/usr/lib64", "/lib", "/usr/lib" };
	const struct loader_chain *l;
	const char *env = getenv("LD_LIBRARY_PATH");
	const char *ma = multiarch(f->machine);
	char dir[PATH_MAX];
	size_t i;
	int k;

	if (strchr(name, '/')) {
		snprintf(out, size, "%s", name);
		return candidate(out, f->elfclass, f->machine) != 0;
	}
	if (!f->has_runpath) {
		if (f->has_rpath &&
		    search_list(f->rpath, name, origin, f->elfclass, f->machine, out, size))
			return true;
		for (l = up; l; l = l->up)
			if (l->rpath && search_list(l->rpath, name, l->origin, f->elfclass,
						    f->machine, out, size))
				return true;
	}
	if (env && *env && search_list(env, name, origin, f->elfclass, f->machine, out, size))
		return true;
	if (f->has_runpath &&
	    search_list(f->runpath, name, origin, f->elfclass, f->machine, out, size))
		return true;
	if (!cache->loaded)
		loader_cache_load(cache);
	for (k = 0; k < cache->n; k++)
		if (strcmp(cache->entries[k].name, name) == 0 &&
		    candidate(cache->entries[k].path, f->elfclass, f->machine) > 0) {
			snprintf(out, size, "%s", cache->entries[k].path);
			return true;
		}
	if (ma) {
		snprintf(dir, sizeof(dir), "/lib/%s:/usr/lib/%s", ma, ma);
		if (search_list(dir, name, origin, f->elfclass, f->machine, out, size))
			return true;
	}
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (search_list(defaults[i], name, origin, f->elfclass, f->machine, out, size))
			return true;
	return false;
}

/* Whether PATH names an executable regular file. */
static bool executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/*
 * Finds NAME in the colon-separated LIST of directories, skipping the
 * directory SKIP (a real path, or NULL). Returns true with the path in OUT.
 */
static bool path_search_in(const char *list, const char *name, const char *skip,
			   char *out, size_t size)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *p, *colon;
	size_t len;

	for (p = list; p; p = colon ? colon + 1 : NULL) {
		colon = strchr(p, ':');
		len = colon ? (size_t)(colon - p) : strlen(p);
		if (len >= sizeof(dir))
			continue;
		snprintf(dir, sizeof(dir), "%.*s", (int)len, len ? p : ".");
		if (skip && realpath(dir, real) && strcmp(real, skip) == 0)
			continue;
		if ((size_t)snprintf(out, size, "%s/%s", dir, name) >= size)
			continue;
		if (executable_file(out))
			return true;
	}
	return false;
}

bool loader_path_search(const char *name, char *out, size_t size)
{
	const char *path = getenv("PATH");

	if (strchr(name, '/')) {
		snprintf(out, size, "%s", name);
		return true;
	}
	return path_search_in(path ? path : "/usr/local/bin:/usr/bin:/bin", name, NULL, out, size);
}

bool loader_script_interpreter(const char *line, char *out, size_t size)
{
	char buf[256], *word, *save = NULL;
	const char *base;

	snprintf(buf, sizeof(buf), "%s", line);
	word = strtok_r(buf, " \t\r", &save);
	if (!word)
		return false;
	base = strrchr(word, '/');
	base = base ? base + 1 : word;
	if (strcmp(base, "env") != 0) {
		snprintf(out, size, "%s", word);
		return true;
	}
	while ((word = strtok_r(NULL, " \t\r", &save)) != NULL) {
		if (word[0] == '-' || strchr(word, '='))
			continue;
		return loader_path_search(word, out, size);
	}
	return false;
}

bool loader_is_shell(const char *interp)
{
	static const char *const shells[] = {
		"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish",
		"csh", "tcsh",
	};
	const char *base = strrchr(interp, '/');
	size_t i;

	base = base ? base + 1 : interp;
	for (i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
		if (strcmp(base, shells[i]) == 0)
			return true;
	return false;
}

/* Reads up to SIZE-1 bytes of the regular file PATH into BUF; returns the length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	struct stat st;
	char err[128];
	ssize_t n;
	int fd = loader_open_regular(path, &st, err, sizeof(err));

	if (fd < 0)
		return -1;
	n = pread(fd, buf, size - 1, 0);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The first word of TEXT (a version file: words, # comments) into OUT. */
static bool first_version(const char *text, char *out, size_t size)
{
	const char *p = text;
	size_t len;

	while (*p) {
		p += strspn(p, " \t\r\n");
		if (*p == '#') {
			p += strcspn(p, "\n");
			continue;
		}
		len = strcspn(p, " \t\r\n");
		if (!len)
			break;
		snprintf(out, size, "%.*s", (int)len, p);
		return true;
	}
	return false;
}

/*
 * The version pyenv would choose, as pyenv-version-name does: PYENV_VERSION,
 * else the nearest .python-version from PYENV_DIR (or the current
 * directory) upward, else ROOT/version, else "system". SRC says where from.
 */
static void pyenv_version(const char *root, char *out, size_t size, char *src, size_t src_size)
{
	const char *env = getenv("PYENV_VERSION"), *start = getenv("PYENV_DIR");
	char dir[PATH_MAX], file[PATH_MAX + 32], text[1024], *slash;

	if (env && *env) {
		snprintf(out, size, "%.*s", (int)strcspn(env, ":"), env);
		snprintf(src, src_size, "PYENV_VERSION");
		return;
	}
	if (!(start && *start && realpath(start, dir)) && !getcwd(dir, sizeof(dir)))
		dir[0] = '\0';
	while (dir[0]) {
		snprintf(file, sizeof(file), "%s/.python-version", strcmp(dir, "/") ? dir : "");
		if (read_small(file, text, sizeof(text)) >= 0 && first_version(text, out, size)) {
			snprintf(src, src_size, "%s", file);
			return;
		}
		slash = strrchr(dir, '/');
		if (!slash || slash == dir) {
			if (strcmp(dir, "/") == 0)
				break;
			snprintf(dir, sizeof(dir), "/");
		} else {
			*slash = '\0';
		}
	}
	snprintf(file, sizeof(file), "%s/version", root);
	if (read_small(file, text, sizeof(text)) >= 0 && first_version(text, out, size)) {
		snprintf(src, src_size, "%s", file);
		return;
	}
	snprintf(out, size, "system");
	snprintf(src, src_size, "the default (no version file)");
}

int loader_pyenv_resolve(const char *path, char *out, size_t size, char *how, size_t how_size)
{
	char text[PYENV_SHIM_MAX], root[PATH_MAX], shims[PATH_MAX], version[256], src[PATH_MAX + 64];
	char candidate_path[PATH_MAX * 2];
	const char *prog, *p, *slash;
	size_t len;

	if (read_small(path, text, sizeof(text)) < 0 || strncmp(text, "#!", 2) != 0 ||
	    !strstr(text, "pyenv") || !realpath(path, shims))
		return -EINVAL;
	/* shims: the directory that holds the script, and it must be called so. */
	slash = strrchr(shims, '/');
	if (!slash || strcmp(slash, "/") == 0)
		return -EINVAL;
	shims[slash - shims] = '\0';
	slash = strrchr(shims, '/');
	if (!slash || strcmp(slash + 1, "shims") != 0)
		return -EINVAL;
	prog = strrchr(path, '/');
	prog = prog ? prog + 1 : path;
	/* PYENV_ROOT: the environment, the shim's own export, or shims/.. */
	p = getenv("PYENV_ROOT");
	if (p && *p) {
		snprintf(root, sizeof(root), "%s", p);
	} else if ((p = strstr(text, "PYENV_ROOT=")) != NULL) {
		p += strlen("PYENV_ROOT=");
		if (*p == '"' || *p == '\'')
			p++;
		len = strcspn(p, "\"' \t\r\n");
		snprintf(root, sizeof(root), "%.*s", (int)len, p);
	} else {
		snprintf(root, sizeof(root), "%.*s", (int)(slash - shims), shims);
	}
	pyenv_version(root, version, sizeof(version), src, sizeof(src));
	if (strcmp(version, "system") == 0) {
		p = getenv("PATH");
		if (path_search_in(p ? p : "/usr/local/bin:/usr/bin:/bin", prog, shims, out, size)) {
			snprintf(how, how_size, "the system %s (version \"system\" from %s)", prog, src);
			return 0;
		}
		snprintf(how, how_size,
			 "a pyenv shim for %s: version \"system\" (from %s), but no %s in $PATH outside %s; run `pyenv which %s` and inspect what it names",
			 prog, src, prog, shims, prog);
		return -ENOENT;
	}
	snprintf(candidate_path, sizeof(candidate_path), "%s/versions/%s/bin/%s", root, version, prog);
	if (executable_file(candidate_path) && strlen(candidate_path) < size) {
		memcpy(out, candidate_path, strlen(candidate_path) + 1);
		snprintf(how, how_size, "version %s from %s", version, src);
		return 0;
	}
	snprintf(how, how_size,
		 "a pyenv shim for %s: version %s (from %s) has no %s; run `pyenv which %s` and inspect what it names",
		 prog, version, src, candidate_path, prog);
	return -ENOENT;
}
