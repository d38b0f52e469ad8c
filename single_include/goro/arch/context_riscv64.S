/* goro context switch for RISC-V 64 (rv64gc, LP64D: the standard psABI
 * with hardware double-precision floating point).
 *
 * This file is the single source of goro's context switch on RISC-V 64:
 * scripts/embed_asm.py copies the lines between the embed markers into
 * include/goro/detail/context_asm.hpp, and CI checks the two are in sync.
 *
 * Saved frame (sp points at offset 0; 208 bytes, a multiple of 16):
 *
 *   offset  size  contents
 *   ------  ----  ------------------------------------------------
 *        0     8  s0 (fp)
 *        8     8  s1     (a fresh context: s1 = entry function)
 *       16    80  s2 .. s11
 *       96     8  ra (resume address)
 *      104    96  fs0 .. fs11
 *      200     8  frm (the dynamic rounding mode, fcsr bits 7:5)
 *      208        end of frame
 *
 * void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg)
 *   as on x86-64 (a0 = save_sp, a1 = to_sp, a2 = arg; returns a2 in a0
 *   on the resumed side). Resumes with `ret` (jr ra): the resume address
 *   is a return address, which the return-address stack predicts.
 *   goro_v0_1_switch_ret (x86-64: the variant that resumes with `ret`)
 *   is the same code here. Only the rounding mode is switched, never the
 *   accrued exception flags (fflags, caller-saved like FPSR): frrm/fsrm
 *   touch the frm field alone. frm is written only when the resumed
 *   side's differs from the current one, still in t0: a CSR write, which
 *   some cores serialize, and goroutines rarely change it.
 *
 * goro_v0_1_switch_nofp, goro_v0_1_switch_ret_nofp: the same switch
 *   without frm (policy fp_control::shared, as on x86-64): the frame's
 *   frm slot is neither written nor read.
 *
 * goro_v0_1_start: first resume address of a fresh context; a0 already
 *   holds `arg`; s0 (fp) is zero so that frame-pointer walks stop here,
 *   and this code has no unwind info, so DWARF walks stop too; calls the
 *   entry function in s1 (it never returns: unimp traps if it does).
 *
 * goro_v0_1_async_preempt (async preemption, detail/async_preempt.hpp):
 *   never called; the SIGURG handler makes the interrupted goroutine
 *   resume here with sp at a copy of the signal frame (siginfo, then the
 *   ucontext with its fp state) taken below the interrupted sp, a0 =
 *   argument, a1 = the yield function. Compiled RISC-V code leaves no
 *   register free for a jump back, so the return to the interrupted pc
 *   goes through the kernel: rt_sigreturn (139) reads the frame at sp and
 *   restores x1-x31, pc, f0-f31, fcsr and the signal mask exactly. sp is
 *   callee-saved across the call, so it still points at the frame.
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
/* The switch; fp = 1 carries frm. */
.macro goro_v0_1_switch_body fp
    addi sp, sp, -208
    sd s0, 0(sp)
    sd s1, 8(sp)
    sd s2, 16(sp)
    sd s3, 24(sp)
    sd s4, 32(sp)
    sd s5, 40(sp)
    sd s6, 48(sp)
    sd s7, 56(sp)
    sd s8, 64(sp)
    sd s9, 72(sp)
    sd s10, 80(sp)
    sd s11, 88(sp)
    sd ra, 96(sp)
    fsd fs0, 104(sp)
    fsd fs1, 112(sp)
    fsd fs2, 120(sp)
    fsd fs3, 128(sp)
    fsd fs4, 136(sp)
    fsd fs5, 144(sp)
    fsd fs6, 152(sp)
    fsd fs7, 160(sp)
    fsd fs8, 168(sp)
    fsd fs9, 176(sp)
    fsd fs10, 184(sp)
    fsd fs11, 192(sp)
.if \fp
    frrm t0
    sd t0, 200(sp)
.endif
    sd sp, 0(a0)
    mv sp, a1
    ld s0, 0(sp)
    ld s1, 8(sp)
    ld s2, 16(sp)
    ld s3, 24(sp)
    ld s4, 32(sp)
    ld s5, 40(sp)
    ld s6, 48(sp)
    ld s7, 56(sp)
    ld s8, 64(sp)
    ld s9, 72(sp)
    ld s10, 80(sp)
    ld s11, 88(sp)
    ld ra, 96(sp)
    fld fs0, 104(sp)
    fld fs1, 112(sp)
    fld fs2, 120(sp)
    fld fs3, 128(sp)
    fld fs4, 136(sp)
    fld fs5, 144(sp)
    fld fs6, 152(sp)
    fld fs7, 160(sp)
    fld fs8, 168(sp)
    fld fs9, 176(sp)
    fld fs10, 184(sp)
    fld fs11, 192(sp)
.if \fp
    ld t1, 200(sp)
    beq t0, t1, 1f
    fsrm t1
1:
.endif
    addi sp, sp, 208
    mv a0, a2
    ret
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
    li s0, 0
    jalr s1
    unimp
.size goro_v0_1_start, .-goro_v0_1_start
.p2align 4
goro_v0_1_async_preempt:
    jalr a1
    li a7, 139
    ecall
    unimp
.size goro_v0_1_async_preempt, .-goro_v0_1_async_preempt
goro_v0_1_asm_end:
.popsection
.endif
/* goro:embed-end */

.section .note.GNU-stack,"",%progbits
