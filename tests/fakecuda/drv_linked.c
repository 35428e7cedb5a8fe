/*
 * drv_linked.c: the stubs of linked.h, exported so that a program linked
 * against every entry point it might use (PyCUDA) loads; each counts its
 * call, names itself on stderr once and returns CUDA_ERROR_NOT_SUPPORTED.
 * They take no declared arguments (this file does not see cuda.h): on the
 * x86-64 System V ABI a caller's arguments are then simply left unread.
 */
#include "linked.h"

#define FC_STUB(n) \
	__attribute__((visibility("default"))) int n(void); \
	int n(void) { static int said; return fc_linked_unemulated(#n, &said); }
FC_LINKED_UNEMULATED(FC_STUB)
