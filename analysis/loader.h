/*
 * loader: the search rules that decide which file a name means, as the
 * dynamic linker, the shell and pyenv apply them, for `vrampool inspect`.
 *
 *  - A DT_NEEDED name is resolved the way ld.so does: DT_RPATH of the object
 *    and of its loaders (only when the object has no DT_RUNPATH),
 *    LD_LIBRARY_PATH, DT_RUNPATH, the ld.so cache (`ldconfig -p`), the
 *    multiarch and default directories; $ORIGIN, $LIB and $PLATFORM
 *    expanded; candidates of another ELF class or machine skipped.
 *  - A command name is found through $PATH the way execvp does; a #! line
 *    names its interpreter (`/usr/bin/env [-S] prog` found through $PATH).
 *  - A pyenv shim (a shell script in PYENV_ROOT/shims) is resolved to the
 *    interpreter pyenv would run: PYENV_VERSION, else .python-version from
 *    the current directory upward, else PYENV_ROOT/version, else "system".
 *
 * Nothing here opens a file that is not a regular file for reading: every
 * open goes through loader_open_regular, which looks before it opens and
 * checks again after (O_NONBLOCK, so even a FIFO swapped in between cannot
 * block), so a FIFO or a device named by a user or planted in a search
 * directory is refused with a clear reason instead of hanging.
 */
#ifndef VRAMPOOL_LOADER_H
#define VRAMPOOL_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "elf_facts.h"

/*
 * Opens PATH for reading if it is a regular file. Returns the descriptor
 * (close-on-exec, blocking mode restored) and fills ST, or a negative errno
 * with a reason in ERR: "No such file or directory", "is a directory, not a
 * program or library", "a FIFO (named pipe), not a program or library", ...
 */
int loader_open_regular(const char *path, struct stat *st, char *err, size_t err_size);

/* The ld.so cache as `ldconfig -p` prints it, loaded on first use. */
struct loader_cache {
	struct { char *name; char *path; } *entries;
	int n;
	bool loaded;
};

/* Frees the cache's entries. */
void loader_cache_release(struct loader_cache *c);

/* A loader in the chain that led to an object: its RPATH applies below it. */
struct loader_chain {
	const char *rpath;		/* NULL when absent or overridden by RUNPATH */
	const char *origin;		/* directory of the loader, for $ORIGIN */
	const struct loader_chain *up;
};

/*
 * Resolves the DT_NEEDED NAME of the object F (whose directory is ORIGIN,
 * loaded by the chain UP) as ld.so would. Returns true with the path in
 * OUT; a candidate that exists but is not a regular file (a FIFO planted
 * in a search directory) is returned too, as ld.so would try to open it.
 */
bool loader_resolve(struct loader_cache *cache, const char *name,
		    const struct elf_facts *f, const char *origin,
		    const struct loader_chain *up, char *out, size_t size);

/* Finds NAME in $PATH the way execvp does; a NAME with a slash is itself. */
bool loader_path_search(const char *name, char *out, size_t size);

/*
 * Turns the #! line LINE (without "#!") into the interpreter's path: the
 * first word, or for `/usr/bin/env [-S] [-opts] [VAR=x] prog`, prog found
 * through $PATH. Returns false when there is none.
 */
bool loader_script_interpreter(const char *line, char *out, size_t size);

/* Whether the interpreter INTERP is a shell (sh, bash, dash, zsh, ...). */
bool loader_is_shell(const char *interp);

/*
 * Resolves the pyenv shim at PATH to the program pyenv would run. Returns
 * 0 with the program in OUT and how it was chosen in HOW ("version 3.12.1
 * from /home/u/.pyenv/version"); -ENOENT when PATH is a pyenv shim whose
 * program cannot be found (HOW says why); -EINVAL when PATH is not a pyenv
 * shim.
 */
int loader_pyenv_resolve(const char *path, char *out, size_t size, char *how, size_t how_size);

#endif
