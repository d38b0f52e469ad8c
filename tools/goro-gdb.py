# goro's gdb extension: goroutines in a live process or a core file.
#
#   (gdb) source tools/goro-gdb.py     (or let gdb auto-load it: programs
#                                        built with goro carry it in their
#                                        .debug_gdb_scripts section)
#   (gdb) info goroutines              id, state, wait reason, innermost user frame
#   (gdb) goroutine 7 bt               goroutine 7's backtrace (any bt options)
#   (gdb) goroutine 7 bt full
#   (gdb) goroutine all bt             every goroutine's backtrace
#
# The goroutines are found through the runtime's debugger anchor, the global
# symbol goro_v0_1_debug (include/goro/detail/debug_info.hpp): the G
# record's layout and every block of G records; no debug information for
# goro's own types is needed (the program's frames need -g for file:line).
#
# A parked goroutine's registers are in the switch frame at its saved stack
# pointer (include/goro/detail/context.hpp). The backtrace comes from a
# Python unwinder that claims the selected thread's innermost frame and says
# that its caller is the goroutine's resume point, with the goroutine's
# saved stack pointer and callee-saved registers; gdb's own DWARF unwinder
# does the rest. No register of the process is written, so this works the
# same on a live process and on a core file. A running goroutine's
# backtrace is that of the thread whose stack pointer lies in its stack.
#
# gdb 9 or newer (Python unwinders with PendingFrame.level()).

import struct

import gdb
from gdb.unwinder import Unwinder

_MAGIC = 0x676F726F
_STATUS = {0: "idle", 1: "runnable", 2: "running", 3: "waiting", 4: "dead"}
# Callee-saved registers in the switch frame: (gdb name, offset), the
# resume address's offset, and the frame's size (see arch/*.S).
_X86_64 = {
    "regs": [("r15", 8), ("r14", 16), ("r13", 24), ("r12", 32), ("rbx", 40), ("rbp", 48)],
    "resume": 56,
    "pc": "rip",
    "sp": "rsp",
    "extra_pc": [],
}
_AARCH64 = {
    "regs": [("x%d" % (19 + i), 8 * i) for i in range(11)],  # x19-x29
    "resume": 88,
    "pc": "pc",
    "sp": "sp",
    "extra_pc": ["x30"],  # the link register holds the resume address too
}
_RISCV64 = {
    # s0 is x8, which gdb names fp; s1-s11 (see arch/context_riscv64.S)
    "regs": [("fp", 0)] + [("s%d" % i, 8 * i) for i in range(1, 12)],
    "resume": 96,
    "pc": "pc",
    "sp": "sp",
    "extra_pc": ["ra"],  # the return address register holds the resume address too
}
# Frames of the runtime and the standard library, skipped when looking for
# a goroutine's innermost user frame.
_RUNTIME_PREFIXES = ("goro::", "goro_v0_1_", "std::", "__", "void goro::", "void std::")
_SYSTEM_LIBS = ("/libc.so", "/libc-", "/libstdc++.so", "/libgcc_s.so", "/libpthread", "/ld-linux", "/libm.so")
_BOTTOM = "goro_v0_1_start"  # a goroutine's entry: the bottom of its stack


class GoroError(Exception):
    pass


def _read(addr, size):
    return gdb.selected_inferior().read_memory(addr, size).tobytes()


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _cstring(addr, limit=256):
    data = _read(addr, limit)
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _arch():
    name = gdb.selected_inferior().architecture().name() if hasattr(
        gdb.selected_inferior(), "architecture") else gdb.newest_frame().architecture().name()
    if "x86-64" in name:
        return _X86_64
    if "aarch64" in name:
        return _AARCH64
    if "riscv:rv64" in name:
        return _RISCV64
    raise GoroError("goro: unsupported architecture %s (x86-64, AArch64 and RISC-V 64 are supported)" % name)


class Goroutine:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _anchor():
    try:
        addr = int(gdb.parse_and_eval("(unsigned long)&goro_v0_1_debug"))
    except gdb.error:
        raise GoroError("goro: no goroutine runtime in this program (symbol goro_v0_1_debug not found)")
    head = _read(addr, 72)
    fields = struct.unpack("<14I", head[:56])
    if fields[0] != _MAGIC:
        raise GoroError("goro: goro_v0_1_debug has a bad magic number")
    if fields[1] != 1:
        raise GoroError("goro: debugger anchor version %d; this script knows version 1" % fields[1])
    names_ptr, blocks = struct.unpack("<QQ", head[56:72])
    keys = ("magic", "version", "g_size", "off_sp", "off_status", "off_id", "off_waiting_on",
            "off_wait_since", "off_created_pc", "off_stack_lo", "off_stack_size", "off_is_main",
            "frame_size", "n_wait_reasons")
    a = dict(zip(keys, fields))
    a["wait_reasons"] = [_cstring(_u64(names_ptr + 8 * i)) for i in range(a["n_wait_reasons"])]
    a["blocks"] = blocks
    return a


def goroutines():
    """Every live goroutine of every runtime, sorted by id."""
    a = _anchor()
    out = []
    block = a["blocks"]
    seen = 0
    while block:
        seen += 1
        if seen > 1 << 20:
            raise GoroError("goro: the list of G blocks does not end (memory corrupted?)")
        nxt, gs, count, runtime = struct.unpack("<QQQQ", _read(block, 32))
        data = _read(gs, count * a["g_size"])
        for i in range(count):
            base = i * a["g_size"]

            def field(off, fmt, base=base):
                return struct.unpack_from(fmt, data, base + off)[0]

            status = _STATUS.get(field(a["off_status"], "<I"), "?")
            if status in ("idle", "dead"):
                continue
            why = field(a["off_waiting_on"], "<B")
            reason = a["wait_reasons"][why] if why < len(a["wait_reasons"]) else "waiting"
            if status == "waiting" and not reason:
                reason = "waiting"
            out.append(Goroutine(
                id=field(a["off_id"], "<Q"), status=status, reason=reason, addr=gs + base,
                sp=field(a["off_sp"], "<Q"), created_pc=field(a["off_created_pc"], "<Q"),
                stack_lo=field(a["off_stack_lo"], "<Q"), stack_size=field(a["off_stack_size"], "<Q"),
                is_main=bool(field(a["off_is_main"], "<B")), runtime=runtime,
                frame_size=a["frame_size"]))
        block = nxt
    out.sort(key=lambda g: g.id)
    return out


def _thread_of(g):
    """The gdb thread running goroutine g (its stack pointer lies in g's stack), or None."""
    if not g.stack_lo:
        return None
    lo, hi = g.stack_lo, g.stack_lo + g.stack_size
    for t in gdb.selected_inferior().threads():
        try:
            sp = int(_frame0_sp(t))
        except gdb.error:
            continue
        if lo <= sp < hi:
            return t
    return None


def _frame0_sp(thread):
    cur = gdb.selected_thread()
    try:
        thread.switch()
        return gdb.parse_and_eval("(unsigned long)$sp")
    finally:
        cur.switch()


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class _GoroutineUnwinder(Unwinder):
    """While `target` is set: the innermost frame's caller is the goroutine's
    resume point (the first frame sniffed after the cache is flushed)."""

    def __init__(self):
        super().__init__("goro-goroutine")
        self.target = None
        self.claimed = None

    def __call__(self, pending):
        g = self.target
        if g is None:
            return None
        pc = int(pending.read_register(self.arch["pc"]))
        sp = int(pending.read_register(self.arch["sp"]))
        if self.claimed is None:
            self.claimed = (sp, pc)
        elif self.claimed != (sp, pc):
            return None
        arch = self.arch
        ptr_t = gdb.lookup_type("unsigned long")
        frame = _read(g.sp, g.frame_size)
        # The frame id's stack address: the switch frame itself, inner to
        # the goroutine's frames (gdb stops at a caller "inner" to its callee).
        info = pending.create_unwind_info(_FrameId(gdb.Value(g.sp).cast(ptr_t), gdb.Value(pc).cast(ptr_t)))
        resume = struct.unpack_from("<Q", frame, arch["resume"])[0]
        pc_t = pending.read_register(arch["pc"]).type
        sp_t = pending.read_register(arch["sp"]).type
        info.add_saved_register(arch["pc"], gdb.Value(resume).cast(pc_t))
        info.add_saved_register(arch["sp"], gdb.Value(g.sp + g.frame_size).cast(sp_t))
        for name in arch["extra_pc"]:
            info.add_saved_register(name, gdb.Value(resume).cast(pending.read_register(name).type))
        for name, off in arch["regs"]:
            val = struct.unpack_from("<Q", frame, off)[0]
            info.add_saved_register(name, gdb.Value(val).cast(pending.read_register(name).type))
        return info


_unwinder = _GoroutineUnwinder()
gdb.unwinder.register_unwinder(None, _unwinder, replace=True)


class _Switched:
    """Context: gdb's frames show goroutine g's stack (parked g), or the
    thread running it (running g)."""

    def __init__(self, g):
        self.g = g
        self.thread = None
        self.prev_thread = None

    def __enter__(self):
        g = self.g
        if g.status == "running":
            self.thread = _thread_of(g)
            if self.thread is None:
                raise GoroError("goroutine %d is running, on no thread gdb knows" % g.id)
            self.prev_thread = gdb.selected_thread()
            self.thread.switch()
            return self
        if not g.sp:
            raise GoroError("goroutine %d has no saved context yet" % g.id)
        _unwinder.arch = _arch()
        _unwinder.target = g
        _unwinder.claimed = None
        gdb.invalidate_cached_frames()
        return self

    def __exit__(self, *exc):
        if self.prev_thread is not None:
            self.prev_thread.switch()
        _unwinder.target = None
        _unwinder.claimed = None
        gdb.invalidate_cached_frames()
        return False

    def first_level(self):
        """The level of the goroutine's innermost frame in gdb's frame list."""
        if self.thread is not None:
            return 0
        f = gdb.newest_frame()
        level = 0
        want_sp = self.g.sp + self.g.frame_size
        while f is not None and level < 64:
            older = f.older()
            if older is None:
                break
            if _frame_sp(older) == want_sp and f.unwind_stop_reason() == gdb.FRAME_UNWIND_NO_REASON \
                    and (_unwinder.claimed is not None and int(f.pc()) == _unwinder.claimed[1]):
                return level + 1
            f = older
            level += 1
        raise GoroError("goro: could not unwind goroutine %d" % self.g.id)


def _frame_sp(f):
    try:
        return int(f.read_register(_unwinder.arch["sp"]))
    except (gdb.error, AttributeError):
        return None


def _describe(f):
    name = f.name() or "??"
    sal = f.find_sal()
    where = ""
    if sal is not None and sal.symtab is not None:
        where = " at %s:%d" % (sal.symtab.filename, sal.line)
    return "%s%s" % (name, where)


def _is_runtime(f):
    name = f.name()
    if name is None or name.startswith(_RUNTIME_PREFIXES):
        return True
    lib = gdb.solib_name(f.pc())  # None: the program itself
    return lib is not None and any(s in lib for s in _SYSTEM_LIBS)


def user_frame(g):
    """'function at file:line' of goroutine g's innermost frame outside goro and std."""
    with _Switched(g) as sw:
        f = gdb.newest_frame()
        for _ in range(sw.first_level()):
            f = f.older()
        first = None
        for _ in range(64):
            if f is None:
                break
            name = f.name()
            if name == _BOTTOM:
                break
            if first is None:
                first = f
            if not _is_runtime(f):
                return _describe(f)
            f = f.older()
        return _describe(first) if first is not None else "??"


def _created_by(g):
    """The function that called go() (the one go() was inlined into), with
    file:line when the pc's line lies in that function's file."""
    if not g.created_pc:
        return None
    pc = g.created_pc
    fn = None
    try:
        block = gdb.block_for_pc(pc)
        while block is not None and not block.is_static and not block.is_global:
            if block.function is not None:
                fn = block.function  # the outermost wins: go() itself is inlined
            block = block.superblock
    except RuntimeError:
        fn = None
    if fn is None:
        text = gdb.execute("info symbol %#x" % pc, to_string=True).strip()
        return text.split(" in section ")[0] if not text.startswith("No symbol") else "%#x" % pc
    name = fn.print_name
    sal = gdb.find_pc_line(pc)
    if sal.symtab is not None and fn.symtab is not None and sal.symtab.filename == fn.symtab.filename:
        name += " at %s:%d" % (sal.symtab.filename, sal.line)
    return name


def _state_text(g):
    if g.status == "running":
        t = _thread_of(g)
        return "running" + (", thread %d" % t.num if t is not None else "")
    if g.status == "runnable":
        return "runnable"
    return g.reason


def _renumber(text, first):
    """bt output without frames above `first` and below the goroutine's
    entry, renumbered from #0."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("#"):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
        else:
            blocks.append([line])
    out = []
    for b in blocks:
        head = b[0]
        if not head.startswith("#"):
            out.extend(b)
            continue
        num, rest = head[1:].split(" ", 1)
        level = int(num)
        if level < first:
            continue
        if (" %s " % _BOTTOM) in head or head.rstrip().endswith(" " + _BOTTOM + " ()"):
            break
        out.append("#%-2d %s" % (level - first, rest.lstrip()))  # gdb's own layout
        out.extend(b[1:])
    return "\n".join(out)


def _find(gid):
    for g in goroutines():
        if g.id == gid:
            return g
    raise GoroError("goroutine %d not found (info goroutines lists them)" % gid)


def goroutine_bt(g, args=""):
    """goroutine g's backtrace, as gdb's bt prints it."""
    with _Switched(g) as sw:
        first = sw.first_level()
        # bt N counts from gdb's frame 0: add the frames above the goroutine's.
        words = [str(int(w) + first) if w.isdigit() and int(w) > 0 else w for w in args.split()]
        text = gdb.execute(" ".join(["bt"] + words), to_string=True)
        return _renumber(text, first)


class InfoGoroutines(gdb.Command):
    """List the goroutines: id, state or wait reason, innermost user frame.

Usage: info goroutines"""

    def __init__(self):
        super().__init__("info goroutines", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        try:
            gs = goroutines()
            rows = []
            for g in gs:
                try:
                    frame = user_frame(g) if g.status != "runnable" or g.sp else "(not started)"
                except (GoroError, gdb.error) as e:
                    frame = "(%s)" % e
                rows.append(("%d" % g.id, g.status, _state_text(g) if g.status != "waiting" else g.reason,
                             frame))
            w_id = max([2] + [len(r[0]) for r in rows])
            w_st = max([5] + [len(r[1]) for r in rows])
            w_wr = max([11] + [len(r[2]) for r in rows])
            gdb.write("  %-*s  %-*s  %-*s  %s\n" % (w_id, "Id", w_st, "State", w_wr, "Wait reason", "Frame"))
            for r in rows:
                gdb.write("  %-*s  %-*s  %-*s  %s\n" % (w_id, r[0], w_st, r[1], w_wr, r[2], r[3]))
        except GoroError as e:
            raise gdb.GdbError(str(e))


class GoroutineCommand(gdb.Command):
    """Run a backtrace command in a goroutine's context.

Usage: goroutine ID bt [bt options]
       goroutine all bt [bt options]
ID is a goroutine id as `info goroutines` lists it."""

    def __init__(self):
        super().__init__("goroutine", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        argv = arg.split(None, 1)
        if not argv:
            raise gdb.GdbError("usage: goroutine ID|all bt [options]")
        cmd = argv[1] if len(argv) > 1 else "bt"
        words = cmd.split(None, 1)
        if words[0] not in ("bt", "backtrace", "where"):
            raise gdb.GdbError("goroutine: only bt is supported (got %r)" % words[0])
        bt_args = words[1] if len(words) > 1 else ""
        try:
            if argv[0] == "all":
                targets = goroutines()
            else:
                try:
                    targets = [_find(int(argv[0], 0))]
                except ValueError:
                    raise gdb.GdbError("goroutine: %r is not a goroutine id" % argv[0])
            for i, g in enumerate(targets):
                if len(targets) > 1 and i:
                    gdb.write("\n")
                gdb.write("goroutine %d [%s]:\n" % (g.id, _state_text(g)))
                try:
                    gdb.write(goroutine_bt(g, bt_args) + "\n")
                except (GoroError, gdb.error) as e:
                    gdb.write("(%s)\n" % e)
                created = _created_by(g)
                if created:
                    gdb.write("created by %s\n" % created)
        except GoroError as e:
            raise gdb.GdbError(str(e))


InfoGoroutines()
GoroutineCommand()
