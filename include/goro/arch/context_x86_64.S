/* goro context switch for x86-64 (System V ABI).
 *
 * This file is the single source of goro's context switch on x86-64:
 * scripts/embed_asm.py copies the lines between the embed markers into
 * include/goro/detail/context_asm.hpp, and CI checks the two are in sync.
 * It also assembles on its own (gcc -c context_x86_64.S).
 *
 * Saved frame (the stack of the goroutine being switched out; sp points
 * at offset 0, the frame grows towards lower addresses):
 *
 *   offset  size  contents
 *   ------  ----  ------------------------------------------------
 *        0     4  MXCSR (SSE control/status)
 *        4     2  x87 FPU control word
 *        6     2  padding
 *        8     8  r15
 *       16     8  r14
 *       24     8  r13
 *       32     8  r12
 *       40     8  rbx    (a fresh context: the entry function)
 *       48     8  rbp
 *       56     8  resume address (pushed by the caller's `call`)
 *       64        end of frame: sp after the switch resumes
 *
 * void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg)
 *   saves the callee-saved state on the current stack, stores the stack
 *   pointer into *save_sp, loads to_sp and resumes that context; the
 *   resumed side sees `arg` as the return value of its own switch call
 *   (or, for a fresh context, as the entry function's argument).
 *   It resumes with `jmp` rather than `ret`: a `ret` to a different
 *   stack mispredicts the return stack buffer on every switch.
 *   `notrack` keeps the indirect jump valid under CET indirect-branch
 *   tracking (a resume address is not an endbr64 landing pad).
 *   MXCSR and the x87 control word are reloaded only when the resumed
 *   side's control bits differ from the current ones: MXCSR bits 6-15
 *   (DAZ, exception masks, rounding, FZ) and the whole x87 control word.
 *   MXCSR bits 0-5, the sticky exception flags, are caller-saved in the
 *   ABI and never change here: the resumed side sees the thread's flags,
 *   also when its control bits are reloaded (label 2 merges them). An
 *   ldmxcsr that changes the flags makes the next stmxcsr cost ~55 ns
 *   on the x86-64 machines this was measured on (changing only control
 *   bits, or nothing, ~1-2 ns), and flags differ all the time: one
 *   inexact operation sets the precision flag, a fresh context has it
 *   clear.
 *
 * void* goro_v0_1_switch_ret(void** save_sp, void* to_sp, void* arg)
 *   the same switch, resuming with `ret`: for switches between contexts
 *   suspended at the same call site (yield's direct switch), where the
 *   return stack buffer predicts the `ret`, and a `jmp` would leave the
 *   call's entry on it (the next `ret` of the resumed side mispredicts).
 *
 * void* goro_v0_1_switch_nofp(...), goro_v0_1_switch_ret_nofp(...)
 *   the same two switches without the FP control words (policy
 *   fp_control::shared, docs/policies.md): MXCSR and the x87 control word
 *   stay as they are, and the frame's first 8 bytes are neither written
 *   nor read. The frame layout is the same, so a fresh context works with
 *   either; a context must be resumed by the kind that suspended it (one
 *   runtime uses one kind throughout). Reading MXCSR (`stmxcsr`) alone
 *   costs ~3.5 ns on some CPUs (AMD EPYC, benchmarks/README.md).
 *
 * goro_v0_1_start: first resume address of a fresh context. The switch
 *   left `arg` in rax; call the entry function held in rbx with it. The
 *   entry function never returns.
 *
 * goro_v0_1_async_preempt (async preemption, detail/async_preempt.hpp):
 *   never called; the SIGURG handler makes the interrupted goroutine
 *   resume here. It copied the whole signal frame (ucontext and xsave
 *   area) below the interrupted stack pointer's red zone and left rsp
 *   pointing at that ucontext copy (16-byte aligned), rax = the yield
 *   function, rdi = its argument. Every register may be clobbered: the
 *   copy holds the interrupted state, and rt_sigreturn (syscall 15, which
 *   reads the frame at rsp - 8, the unused `pretcode` slot) restores all
 *   of it (flags, vector state, signal mask) and resumes the interrupted
 *   instruction. rbx is callee-saved, so it keeps the frame address
 *   across the call (also across the switch the call makes).
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
/* The four switches: fp = 1 carries the FP control words, ret = 1
 * resumes with `ret` instead of `jmp`. */
.macro goro_v0_1_switch_body fp, ret
    endbr64
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
.if \fp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movl (%rsp), %r8d
    movzwl 4(%rsp), %r9d
.endif
    movq %rsp, (%rdi)
    movq %rsi, %rsp
.if \fp
    movl (%rsp), %r10d
    xorl %r8d, %r10d
    xorw 4(%rsp), %r9w
    andl $-64, %r10d
    orl %r9d, %r10d
    jne 2f
1:
.endif
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
.if \ret
    movq %rdx, %rax
    ret
.else
    popq %rcx
    movq %rdx, %rax
    notrack jmpq *%rcx
.endif
.if \fp
2:
    andl $63, %r8d
    movl (%rsp), %r10d
    andl $-64, %r10d
    orl %r10d, %r8d
    movl %r8d, (%rsp)
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    jmp 1b
.endif
.endm
.p2align 4
goro_v0_1_switch:
    goro_v0_1_switch_body 1, 0
.size goro_v0_1_switch, .-goro_v0_1_switch
.p2align 4
goro_v0_1_switch_ret:
    goro_v0_1_switch_body 1, 1
.size goro_v0_1_switch_ret, .-goro_v0_1_switch_ret
.p2align 4
goro_v0_1_switch_nofp:
    goro_v0_1_switch_body 0, 0
.size goro_v0_1_switch_nofp, .-goro_v0_1_switch_nofp
.p2align 4
goro_v0_1_switch_ret_nofp:
    goro_v0_1_switch_body 0, 1
.size goro_v0_1_switch_ret_nofp, .-goro_v0_1_switch_ret_nofp
.purgem goro_v0_1_switch_body
.purgem goro_v0_1_function
.p2align 4
goro_v0_1_start:
    endbr64
    xorl %ebp, %ebp
    movq %rax, %rdi
    callq *%rbx
    ud2
.size goro_v0_1_start, .-goro_v0_1_start
.p2align 4
goro_v0_1_async_preempt:
    endbr64
    movq %rsp, %rbx
    callq *%rax
    movq %rbx, %rsp
    movl $15, %eax
    syscall
    ud2
.size goro_v0_1_async_preempt, .-goro_v0_1_async_preempt
goro_v0_1_asm_end:
.popsection
.endif
/* goro:embed-end */

#if defined(__CET__)
/* Mark the object as compatible with indirect branch tracking only; the
 * switch does not maintain a shadow stack, so SHSTK is not claimed. */
    .pushsection .note.gnu.property,"a"
    .p2align 3
    .long 4
    .long 16
    .long 5
    .asciz "GNU"
    .long 0xc0000002
    .long 4
    .long 1
    .p2align 3
    .popsection
#endif
.section .note.GNU-stack,"",%progbits
