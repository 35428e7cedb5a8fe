/*
 * life: the constructor, the fork handler and the exit report's
 * installation. life.h states the rules.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/config.h"
#include "core/config_names.h"
#include "intercept/dlsym.h"
#include "intercept/life.h"
#include "pool/calls.h"
#include "report/report.h"

static struct config vp_config;

/* The environment for config_load_secure (paths come through config_secure_getenv). */
static const char *vp_getenv(const char *name)
{
	return getenv(name);
}

static void vp_atfork_child(void)
{
	vp_inside = 0;
	calls_atfork_child();
	report_atfork_child();
}

__attribute__((constructor(101))) static void vp_init(void)
{
	int saved = errno;

	vp_dl_init_real();
	config_load_secure(&vp_config, vp_getenv, config_secure_getenv);
	config_warn_job(&vp_config);   /* unknown VRAMPOOL_* names, once per job (issue 19) */
	calls_setup(&vp_config);
	report_setup(&vp_config);      /* also sets up the what-if curve */
	pthread_atfork(NULL, NULL, vp_atfork_child);
	atexit(report_exit);
	/* a program linked against CUDA is a CUDA user from its start (life.h) */
	if (vp_cuda_loaded())
		vp_mark_cuda();
	errno = saved;
}
