/* goro context switch for AArch64 (AAPCS64).
 *
 * This file is the single source of goro's context switch on AArch64:
 * scripts/embed_asm.py copies the lines between the embed markers into
 * include/goro/detail/context_asm.hpp, and CI checks the two are in sync.
 *
 * Saved frame (sp points at offset 0; 176 bytes, a multiple of 16):
 *
 *   offset  size  contents
 *   ------  ----  ------------------------------------------------
 *        0    16  x19, x20   (a fresh context: x19 = entry function)
 *       16    16  x21, x22
 *       32    16  x23, x24
 *       48    16  x25, x26
 *       64    16  x27, x28
 *       80    16  x29 (fp), x30 (lr = resume address)
 *       96    16  d8, d9
 *      112    16  d10, d11
 *      128    16  d12, d13
 *      144    16  d14, d15
 *      160     8  FPCR
 *      168     8  padding
 *      176        end of frame
 *
 * void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg)
 *   as on x86-64. AArch64 resumes with `ret x30`: resume addresses are
 *   not BTI landing pads, so a `br` there would fault on BTI-guarded
 *   pages, while `ret` is exempt from BTI checks.
 *   goro_v0_1_switch_ret (x86-64: the variant that resumes with `ret`)
 *   is the same code here. FPCR (control only: the flags are in FPSR,
 *   which is caller-saved) is written only when the resumed side's
 *   differs from the current one, still in x9: it is a system-register
 *   write, which some cores serialize, and goroutines rarely change it.
 *
 * goro_v0_1_switch_nofp, goro_v0_1_switch_ret_nofp: the same switch
 *   without FPCR (policy fp_control::shared, as on x86-64): the frame's
 *   FPCR slot is neither written nor read.
 *
 * goro_v0_1_start: first resume address of a fresh context; x0 already
 *   holds `arg`; call the entry function in x19 (it never returns).
 *
 * goro_v0_1_async_preempt (async preemption, detail/async_preempt.hpp):
 *   never called; the SIGURG handler makes the interrupted goroutine
 *   resume here with sp at a copy of the whole signal frame (siginfo,
 *   then the ucontext with its fpsimd record) taken below the interrupted
 *   sp, x0 = argument, x1 = the yield function. AArch64 has no register
 *   that compiled code leaves free (Go reserves R27 for its pushCall
 *   return), so the return to the interrupted pc goes through the kernel:
 *   rt_sigreturn (139) reads the frame at sp and restores x0-x30, sp, pc,
 *   NZCV, q0-q31, FPSR/FPCR and the signal mask exactly. sp is preserved
 *   across the call, so it still points at the frame.
 *
 * goro_v0_1_asm_end: end of goro's code here; [goro_v0_1_switch,
 *   goro_v0_1_asm_end) is never preempted asynchronously.
 */

/* goro:embed-begin */
.ifndef goro_v0_1_switch
.pushsection .text.goro_v0_1_switch,"axG",%progbits,goro_v0_1_switch,comdat
.macro goro_v0_1_function name
.weak \name
.hidden \name
.type \name,%function
.endm
goro_v0_1_function goro_v0_1_switch
goro_v0_1_function goro_v0_1_switch_ret
goro_v0_1_function goro_v0_1_switch_nofp
goro_v0_1_function goro_v0_1_switch_ret_nofp
goro_v0_1_function goro_v0_1_start
goro_v0_1_function goro_v0_1_async_preempt
.weak goro_v0_1_asm_end
.hidden goro_v0_1_asm_end
/* The switch; fp = 1 carries FPCR. */
.macro goro_v0_1_switch_body fp
    hint #34
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
.if \fp
    mrs x9, fpcr
    str x9, [sp, #160]
.endif
    mov x11, sp
    str x11, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
.if \fp
    ldr x10, [sp, #160]
    cmp x9, x10
    b.eq 1f
    msr fpcr, x10
1:
.endif
    add sp, sp, #176
    mov x0, x2
    ret x30
.endm
.p2align 4
goro_v0_1_switch:
goro_v0_1_switch_ret:
    goro_v0_1_switch_body 1
.size goro_v0_1_switch, .-goro_v0_1_switch
.size goro_v0_1_switch_ret, .-goro_v0_1_switch_ret
.p2align 4
goro_v0_1_switch_nofp:
goro_v0_1_switch_ret_nofp:
    goro_v0_1_switch_body 0
.size goro_v0_1_switch_nofp, .-goro_v0_1_switch_nofp
.size goro_v0_1_switch_ret_nofp, .-goro_v0_1_switch_ret_nofp
.purgem goro_v0_1_switch_body
.purgem goro_v0_1_function
.p2align 4
goro_v0_1_start:
    hint #34
    mov x29, #0
    blr x19
    brk #0
.size goro_v0_1_start, .-goro_v0_1_start
.p2align 4
goro_v0_1_async_preempt:
    hint #34
    blr x1
    mov x8, #139
    svc #0
    brk #0
.size goro_v0_1_async_preempt, .-goro_v0_1_async_preempt
goro_v0_1_asm_end:
.popsection
.endif
/* goro:embed-end */

#if defined(__ARM_FEATURE_BTI_DEFAULT)
/* GNU property note: BTI compatible (every indirect-call target above
 * starts with `bti c`, encoded as hint #34). PAC is not claimed. */
    .pushsection .note.gnu.property,"a"
    .p2align 3
    .long 4
    .long 16
    .long 5
    .asciz "GNU"
    .long 0xc0000000
    .long 4
    .long 1
    .p2align 3
    .popsection
#endif
.section .note.GNU-stack,"",%progbits
