/*
 * config_names: the warning, once per job, about VRAMPOOL_* names that
 * vrampool does not read (a misspelled VRAMPOOL_LAYUOT), with the closest
 * known name. Known: the library's variables (config.h), CONFIG_WARNED,
 * and the project's own names (VRAMPOOL_BIN, VRAMPOOL_PYENV,
 * VRAMPOOL_CLIENTS_PYENV, VRAMPOOL_TEST_SECURE). Never fatal; the shim
 * calls config_warn_job from its constructor, `vrampool run`
 * config_warn_names before it starts the program (and sets CONFIG_WARNED
 * for it).
 */
#ifndef VRAMPOOL_CONFIG_NAMES_H
#define VRAMPOOL_CONFIG_NAMES_H

#include "core/config.h"

/*
 * The known VRAMPOOL_* name closest to name (edit distance, a swap of two
 * neighbours counting 1), or NULL when none is close enough to suggest.
 */
const char *config_closest_name(const char *name);

/*
 * Warns, in one stderr line, about each VRAMPOOL_* name in env (a
 * NULL-terminated list of "NAME=value", as environ) that vrampool does
 * not read, with the closest known name where one is near:
 *   vrampool: unknown variable VRAMPOOL_LAYUOT (did you mean VRAMPOOL_LAYOUT?): not read by vrampool, ignored
 * Known: the library's variables, CONFIG_WARNED and the project's own
 * (VRAMPOOL_BIN, VRAMPOOL_PYENV, ...). Prints nothing when env holds
 * CONFIG_WARNED. Never fatal. Returns the number of unknown names warned about.
 */
int config_warn_names(char *const *env);

/*
 * The shim's once-per-job warnings, after config_load_secure filled c:
 * config_warn_names over this process's environment; when this process
 * warned about anything (unknown names, cosmetic values), sets
 * CONFIG_WARNED=1 in its environment so that the processes it starts
 * (DataLoader workers) stay silent. Call from the constructor, while the
 * process has one thread (setenv).
 */
void config_warn_job(const struct config *c);

#endif
