/*
 * alloc: the allocation hooks, one generated from each row of
 * VP_ALLOCATORS (entries.h). alloc.h states the rules.
 */
#include <stdint.h>

#include "intercept/alloc.h"

/* A runtime row's callback: clears the runtime's last error. */
static void vp_clear_runtime_error(void)
{
	if (VP_GET(cudaGetLastError))
		VP_R(cudaGetLastError)();
}

/* What a hook's library says: its out-of-memory code, its error callback (its type: table.h). */
#define VP_OOM_RT cudaErrorMemoryAllocation
#define VP_OOM_DRV CUDA_ERROR_OUT_OF_MEMORY
#define VP_CLEAR_RT vp_clear_runtime_error
#define VP_CLEAR_DRV NULL

/* The hook of one row (entries.h says what each column is). */
#define VP_ALLOC_HOOK(x, name, lib, params, args, need_expr, dev_expr)                              \
	VP_API VP_RET_##lib name params                                                              \
	VP_GUARDED_BODY(name, lib, args,                                                             \
		struct alloc_call a = { .oom = VP_OOM_##lib, .dev = (dev_expr),                      \
					.need = (need_expr), .clear_error = VP_CLEAR_##lib };        \
                                                                                                     \
		calls_alloc_begin(&a);                                                               \
		do                                                                                   \
			err = VP_CALL(name, VP_NO_##lib, args);                                      \
		while (calls_alloc_again(&a, (int)err));                                             \
	)

VP_ALLOCATORS(VP_ALLOC_HOOK, _)
