/* goro context switch for Windows x64 (the Microsoft x64 calling
 * convention, PE/COFF objects; MinGW-w64 GCC and Clang).
 *
 * This file is the single source of goro's context switch on Windows x64:
 * scripts/embed_asm.py copies the lines between the embed markers into
 * include/goro/detail/context_asm.hpp (selected by _WIN64 before the
 * System V file), and CI checks the two are in sync. It also assembles on
 * its own (x86_64-w64-mingw32-gcc -c context_win64.S).
 *
 * What differs from context_x86_64.S (System V):
 *   - arguments arrive in rcx, rdx, r8 (not rdi, rsi, rdx), and a callee
 *     gets 32 bytes of shadow space above its return address;
 *   - rdi, rsi and xmm6-xmm15 are callee-saved too;
 *   - the thread information block (gs:[0], the TEB) records the bounds
 *     of the running stack: StackBase (gs:0x08), StackLimit (gs:0x10) and
 *     DeallocationStack (gs:0x1478). The system's exception dispatcher and
 *     unwinder (RtlDispatchException, RtlUnwindEx: SEH, and through them
 *     C++ exceptions) reject any frame outside [StackLimit, StackBase), so
 *     the three fields travel with the stack: saved in the switched-out
 *     frame, loaded from the resumed one. make_context fills them for a
 *     fresh context from its stack's bounds.
 *     ExceptionList (gs:0x00) goes with them: Windows x64 itself does not
 *     use it (its SEH is table-driven), but Wine keeps its own handler
 *     frames there and calls every one whose address lies below the
 *     faulting frame's sp, so a goroutine stack placed above the thread's
 *     stack would see them run first (an exception thrown in a goroutine
 *     then ended in std::terminate under Wine). A fresh context starts
 *     with the x86 end-of-chain value, ~0: no frames.
 *   - COFF has no ELF comdat groups, .type or .hidden, and GNU as for
 *     COFF has no .pushsection/.popsection: each function has a section
 *     of its own, `.linkonce discard`, so the linker keeps one copy of it
 *     however many translation units emit it (as GCC does for inline
 *     functions), and the .ifndef guard keeps one per translation unit.
 *     One section per symbol, because GNU ld resolved the other global
 *     symbols of a shared linkonce section wrongly when it discarded a
 *     duplicate (goro_v0_1_start pointed into unrelated code). The code
 *     ends with `.text`: GCC emits top-level asm while in .text, and
 *     expects to be there after it.
 *   - no endbr64 / notrack: Windows has no indirect-branch tracking (its
 *     CET is the shadow stack, which goro does not claim either).
 *
 * Saved frame (sp points at offset 0; 272 bytes; sp is 16-byte aligned,
 * so xmm6-xmm15 are stored with movaps):
 *
 *   offset  size  contents
 *   ------  ----  ------------------------------------------------
 *        0     4  MXCSR (SSE control/status)
 *        4     2  x87 FPU control word
 *        6     2  padding
 *        8     8  TEB StackBase         (gs:0x08, the stack's top)
 *       16     8  TEB StackLimit        (gs:0x10, its lowest usable byte)
 *       24     8  TEB DeallocationStack (gs:0x1478, its allocation's base)
 *       32   160  xmm6 .. xmm15
 *      192     8  TEB ExceptionList     (gs:0x00; see below)
 *      200     8  r15
 *      208     8  r14
 *      216     8  r13
 *      224     8  r12
 *      232     8  rsi
 *      240     8  rdi
 *      248     8  rbx    (a fresh context: the entry function)
 *      256     8  rbp
 *      264     8  resume address (pushed by the caller's `call`)
 *      272        end of frame: sp after the switch resumes
 *
 * void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg)
 *   (rcx, rdx, r8) as on System V: saves the callee-saved state and the
 *   TEB's stack bounds on the current stack, stores sp into *save_sp,
 *   loads to_sp, installs its stack bounds and resumes it with `jmp`;
 *   the resumed side's switch returns arg (rax). MXCSR and the x87
 *   control word are reloaded only when their control bits differ, and
 *   the sticky MXCSR flags stay the thread's, exactly as the System V
 *   file explains.
 *
 * void* goro_v0_1_switch_ret(...)   the same, resuming with `ret`.
 *
 * goro_v0_1_switch_nofp, goro_v0_1_switch_ret_nofp: the same two without
 *   MXCSR and the x87 control word (policy fp_control::shared, as in the
 *   System V file): the frame's first 8 bytes are neither written nor read.
 *
 * goro_v0_1_start: first resume address of a fresh context (sp = the
 *   stack's top, 16-byte aligned). Pushes a null return address (the
 *   unwinder's end of the stack: its SEH unwind data says so), reserves
 *   the shadow space and calls the entry function held in rbx with the
 *   switch's arg (rax) in rcx. The entry function never returns.
 *
 * goro_v0_1_async_preempt (async preemption, os/windows/preempt.hpp):
 *   never called; sysmon, with the goroutine's thread suspended, wrote a
 *   frame below the interrupted sp S and pointed the thread's rip here:
 *
 *     S-8     interrupted rip          S-16    interrupted rflags
 *     S-24    rax, rcx, rdx, r8, r9, r10, r11 (down to S-72)
 *     S-80    rbx, rbp, rsi, rdi, r12, r13, r14, r15 (r15 at B = S-136)
 *     X       xsave/fxsave area (64-byte aligned, header zeroed)
 *     X-32    shadow space: rsp here (16-byte aligned)
 *
 *   with rbp = B, rbx = X, r12 = the yield function, r13 = its argument,
 *   r14 = 1 for xsave (x87, SSE, AVX, AVX-512: mask 0xe7) else fxsave.
 *   It clears the direction flag (the ABI's state at a call; the
 *   interrupted code may have set it, and popfq restores it), saves the
 *   vector state, calls r12(r13) (which switches away; the
 *   goroutine resumes on the same thread), restores the vector state,
 *   pops the registers and flags, and returns to the interrupted rip with
 *   rsp = S. Its unwind data declares the frame as if a prologue had
 *   pushed it (rbp the frame register), so RtlVirtualUnwind walks from
 *   here into the interrupted function.
 *
 * Bounds: every function here has a .pdata entry (switch and switch_ret
 *   one with no unwind codes, which the system unwinder treats as it
 *   treats a function without one); async preemption reads them from the
 *   module's exception directory to never preempt inside this code. A
 *   function's symbol must stay at the start of its section: GNU ld
 *   resolved a call to a linkonce symbol placed after other bytes of its
 *   section (a length word tried there) to the wrong address.
 *
 * goro_v0_1_asm_end: kept for the names detail/async_preempt.hpp uses on
 *   ELF; the sections above are placed by the linker one by one, so
 *   [goro_v0_1_switch, goro_v0_1_asm_end) is no range of goro's code here.
 */

/* goro:embed-begin */
.ifndef goro_v0_1_switch
/* The four switches: fp = 1 carries the FP control words, ret = 1
 * resumes with `ret` instead of `jmp`. */
.macro goro_v0_1_switch_body fp, ret
    pushq %rbp
    pushq %rbx
    pushq %rdi
    pushq %rsi
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $200, %rsp
    movaps %xmm6, 32(%rsp)
    movaps %xmm7, 48(%rsp)
    movaps %xmm8, 64(%rsp)
    movaps %xmm9, 80(%rsp)
    movaps %xmm10, 96(%rsp)
    movaps %xmm11, 112(%rsp)
    movaps %xmm12, 128(%rsp)
    movaps %xmm13, 144(%rsp)
    movaps %xmm14, 160(%rsp)
    movaps %xmm15, 176(%rsp)
    movq %gs:0x08, %r10
    movq %r10, 8(%rsp)
    movq %gs:0x10, %r10
    movq %r10, 16(%rsp)
    movq %gs:0x1478, %r10
    movq %r10, 24(%rsp)
    movq %gs:0x00, %r10
    movq %r10, 192(%rsp)
.if \fp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movl (%rsp), %r9d
    movzwl 4(%rsp), %r11d
.endif
    movq %rsp, (%rcx)
    movq %rdx, %rsp
    movq 8(%rsp), %r10
    movq %r10, %gs:0x08
    movq 16(%rsp), %r10
    movq %r10, %gs:0x10
    movq 24(%rsp), %r10
    movq %r10, %gs:0x1478
    movq 192(%rsp), %r10
    movq %r10, %gs:0x00
.if \fp
    movl (%rsp), %r10d
    xorl %r9d, %r10d
    xorw 4(%rsp), %r11w
    andl $-64, %r10d
    orl %r11d, %r10d
    jne 2f
1:
.endif
    movaps 32(%rsp), %xmm6
    movaps 48(%rsp), %xmm7
    movaps 64(%rsp), %xmm8
    movaps 80(%rsp), %xmm9
    movaps 96(%rsp), %xmm10
    movaps 112(%rsp), %xmm11
    movaps 128(%rsp), %xmm12
    movaps 144(%rsp), %xmm13
    movaps 160(%rsp), %xmm14
    movaps 176(%rsp), %xmm15
    addq $200, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rsi
    popq %rdi
    popq %rbx
    popq %rbp
.if \ret
    movq %r8, %rax
    ret
.else
    popq %rcx
    movq %r8, %rax
    jmpq *%rcx
.endif
.if \fp
2:
    andl $63, %r9d
    movl (%rsp), %r10d
    andl $-64, %r10d
    orl %r10d, %r9d
    movl %r9d, (%rsp)
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    jmp 1b
.endif
.endm
.section .text$goro_v0_1_switch,"xr"
.linkonce discard
.globl goro_v0_1_switch
.def goro_v0_1_switch; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_switch
goro_v0_1_switch:
    .seh_endprologue
    goro_v0_1_switch_body 1, 0
.seh_endproc
.section .text$goro_v0_1_switch_ret,"xr"
.linkonce discard
.globl goro_v0_1_switch_ret
.def goro_v0_1_switch_ret; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_switch_ret
goro_v0_1_switch_ret:
    .seh_endprologue
    goro_v0_1_switch_body 1, 1
.seh_endproc
.section .text$goro_v0_1_switch_nofp,"xr"
.linkonce discard
.globl goro_v0_1_switch_nofp
.def goro_v0_1_switch_nofp; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_switch_nofp
goro_v0_1_switch_nofp:
    .seh_endprologue
    goro_v0_1_switch_body 0, 0
.seh_endproc
.section .text$goro_v0_1_switch_ret_nofp,"xr"
.linkonce discard
.globl goro_v0_1_switch_ret_nofp
.def goro_v0_1_switch_ret_nofp; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_switch_ret_nofp
goro_v0_1_switch_ret_nofp:
    .seh_endprologue
    goro_v0_1_switch_body 0, 1
.seh_endproc
.purgem goro_v0_1_switch_body
.section .text$goro_v0_1_start,"xr"
.linkonce discard
.globl goro_v0_1_start
.def goro_v0_1_start; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_start
goro_v0_1_start:
    pushq $0
    subq $40, %rsp
    .seh_stackalloc 40
    .seh_endprologue
    xorl %ebp, %ebp
    movq %rax, %rcx
    callq *%rbx
    ud2
.seh_endproc
.section .text$goro_v0_1_async_preempt,"xr"
.linkonce discard
.globl goro_v0_1_async_preempt
.def goro_v0_1_async_preempt; .scl 2; .type 32; .endef
.p2align 4
.seh_proc goro_v0_1_async_preempt
goro_v0_1_async_preempt:
    .seh_stackalloc 64
    .seh_pushreg %rbx
    .seh_pushreg %rbp
    .seh_pushreg %rsi
    .seh_pushreg %rdi
    .seh_pushreg %r12
    .seh_pushreg %r13
    .seh_pushreg %r14
    .seh_pushreg %r15
    .seh_setframe %rbp, 0
    .seh_endprologue
    cld
    testq %r14, %r14
    jz 1f
    movl $0xe7, %eax
    xorl %edx, %edx
    xsave64 (%rbx)
    jmp 2f
1:
    fxsave64 (%rbx)
2:
    movq %r13, %rcx
    callq *%r12
    testq %r14, %r14
    jz 3f
    movl $0xe7, %eax
    xorl %edx, %edx
    xrstor64 (%rbx)
    jmp 4f
3:
    fxrstor64 (%rbx)
4:
    movq %rbp, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rdi
    popq %rsi
    popq %rbp
    popq %rbx
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdx
    popq %rcx
    popq %rax
    popfq
    ret
.seh_endproc
.section .text$goro_v0_1_asm_end,"xr"
.linkonce discard
.globl goro_v0_1_asm_end
goro_v0_1_asm_end:
    ud2
.text
.endif
/* goro:embed-end */
