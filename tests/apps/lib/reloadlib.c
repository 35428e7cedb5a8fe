/*
 * reloadlib: the shared library the reload program loads with
 * dlopen(RTLD_LOCAL), calls and unloads, round after round. It is linked
 * with libcudart and calls it as any library does (ordinary calls through
 * its PLT), so unloading it unloads the runtime too when nothing else
 * holds it.
 */
#define RELOAD_DIRECT
#include "reload_work.h"

int reload_lib_run(struct reload_round *r);

/* Runs one round through the runtime this library is linked with. */
__attribute__((visibility("default"))) int reload_lib_run(struct reload_round *r)
{
	return reload_work(NULL, r);
}
