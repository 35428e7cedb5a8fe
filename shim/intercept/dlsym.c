/*
 * dlsym: the dynamic-linker route. dlsym.h states the rules.
 */
#include <dlfcn.h>
#include <errno.h>

#include "core/dlreal.h"
#include "intercept/dlsym.h"
#include "intercept/procaddr.h"

/*
 * The trampolines' state: the C library's functions, and the look-ups on
 * an explicit handle they jump to (only those reach C code here, where the
 * caller no longer matters).
 */
void *vp_real_dlsym VP_HIDDEN;
void *vp_real_dlvsym VP_HIDDEN;
void *vp_dlsym_handle(void *handle, const char *name) VP_HIDDEN;
void *vp_dlvsym_handle(void *handle, const char *name, const char *version) VP_HIDDEN;

/*
 * The trampolines, once per architecture. The x86-64 and the aarch64
 * blocks are two copies of one thing, written out in each architecture's
 * assembly; inside each, dlsym and dlvsym are one thing twice, differing
 * only in the symbols they name and the argument registers they keep
 * across vp_dl_init_real. Assembly has no shared subroutine to give them
 * (a call would change the return address the real function must see),
 * so a same-shape checker pairs these runs, and that is expected.
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	cmpq $-1, %rdi\n"
	"	je 1f\n"
	"	testq %rdi, %rdi\n"
	"	je 1f\n"
	"	jmp vp_dlsym_handle\n"
	"1:	movq vp_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call vp_dl_init_real\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	movq vp_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"2:	jmp *%rax\n"
	"3:	ret\n"
	".size dlsym, .-dlsym\n"
	".globl dlvsym\n"
	".type dlvsym, @function\n"
	"dlvsym:\n"
	"	cmpq $-1, %rdi\n"
	"	je 1f\n"
	"	testq %rdi, %rdi\n"
	"	je 1f\n"
	"	jmp vp_dlvsym_handle\n"
	"1:	movq vp_real_dlvsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	pushq %rdx\n"
	"	call vp_dl_init_real\n"
	"	popq %rdx\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	movq vp_real_dlvsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"2:	jmp *%rax\n"
	"3:	ret\n"
	".size dlvsym, .-dlvsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	"dlsym:\n"
	"	cmn x0, #1\n"
	"	b.eq 1f\n"
	"	cbz x0, 1f\n"
	"	b vp_dlsym_handle\n"
	"1:	adrp x16, vp_real_dlsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlsym]\n"
	"	cbnz x16, 2f\n"
	"	stp x0, x1, [sp, #-32]!\n"
	"	stp x2, x30, [sp, #16]\n"
	"	bl vp_dl_init_real\n"
	"	ldp x2, x30, [sp, #16]\n"
	"	ldp x0, x1, [sp], #32\n"
	"	adrp x16, vp_real_dlsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlsym]\n"
	"	cbnz x16, 2f\n"
	"	mov x0, #0\n"
	"	ret\n"
	"2:	br x16\n"
	".size dlsym, .-dlsym\n"
	".globl dlvsym\n"
	".type dlvsym, %function\n"
	"dlvsym:\n"
	"	cmn x0, #1\n"
	"	b.eq 1f\n"
	"	cbz x0, 1f\n"
	"	b vp_dlvsym_handle\n"
	"1:	adrp x16, vp_real_dlvsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlvsym]\n"
	"	cbnz x16, 2f\n"
	"	stp x0, x1, [sp, #-32]!\n"
	"	stp x2, x30, [sp, #16]\n"
	"	bl vp_dl_init_real\n"
	"	ldp x2, x30, [sp, #16]\n"
	"	ldp x0, x1, [sp], #32\n"
	"	adrp x16, vp_real_dlvsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlvsym]\n"
	"	cbnz x16, 2f\n"
	"	mov x0, #0\n"
	"	ret\n"
	"2:	br x16\n"
	".size dlvsym, .-dlvsym\n");
#else
#error "dlsym trampolines exist for x86-64 and aarch64 only"
#endif

/*
 * The result of a look-up on an explicit handle, f as the C library found
 * it: the shim's wrapper when name is an interposed function found in the
 * CUDA runtime or driver and the caller is not a CUDA runtime (dlsym.h).
 * Puts errno back to saved, its value when the program called.
 */
static void *vp_dl_result(void *f, const char *name, const void *caller, int saved)
{
	void *w = NULL;

	if (f && name && !vp_is_self(f) && !vp_is_runtime_code(caller))
		w = vp_wrapper_named(name);
	if (w && vp_code_in(f, "libcuda"))      /* libcuda.so*, libcudart.so* */
		f = w;
	errno = saved;
	return f;
}

void *vp_dlsym_handle(void *handle, const char *name)
{
	int saved = errno;

	return vp_dl_result(dlreal_sym(handle, name), name, __builtin_return_address(0), saved);
}

void *vp_dlvsym_handle(void *handle, const char *name, const char *version)
{
	int saved = errno;

	return vp_dl_result(dlreal_vsym(handle, name, version), name, __builtin_return_address(0), saved);
}

/*
 * Also reached from a trampoline on a look-up on RTLD_DEFAULT or
 * RTLD_NEXT before the constructor ran (another library's constructor ran
 * first): the trampoline saves its arguments, calls this, and jumps on to
 * the real function with the caller's return address intact.
 */
void *vp_dl_init_real(void)
{
	int saved = errno;

	dlreal_init();
	vp_real_dlvsym = dlreal_dlvsym_fn();
	vp_real_dlsym = dlreal_dlsym_fn();
	errno = saved;
	return vp_real_dlsym;
}
