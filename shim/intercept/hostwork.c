/*
 * hostwork: the hooks of the program's work the pool must know of (stream
 * work that may write host memory, graphs), one generated from each row of
 * VP_HOSTWORK (entries.h). hostwork.h states the rules.
 */
#include "intercept/hostwork.h"

/* The hook of one row (entries.h says what each column is). */
#define VP_HOSTWORK_HOOK(x, name, lib, params, args, after)                                    \
	VP_API VP_RET_##lib name params                                                              \
	VP_GUARDED_BODY(name, lib, args,                                                             \
		err = VP_CALL(name, VP_NO_##lib, args);                                              \
		if (err == 0)                                                                        \
			after;                                                                       \
	)

VP_HOSTWORK(VP_HOSTWORK_HOOK, _)
