/*
 * gather_ptx.S: the gather kernel's PTX (build/shim/gather.ptx, made from
 * shim/gather.cu at make time) as the NUL-terminated string
 * vrampool_gather_ptx, hidden: libvrampool.so still exports only the
 * interposed symbols. The assembler finds gather.ptx through -Wa,-I.
 */
	.section .rodata
	.globl	vrampool_gather_ptx
	.hidden	vrampool_gather_ptx
	.type	vrampool_gather_ptx, @object
	.balign	16
vrampool_gather_ptx:
	.incbin	"gather.ptx"
	.byte	0
	.size	vrampool_gather_ptx, . - vrampool_gather_ptx

	.section .note.GNU-stack, "", @progbits
