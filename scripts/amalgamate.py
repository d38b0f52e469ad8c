#!/usr/bin/env python3
"""Generate single_include/goro.hpp (and copy the arch .S files beside it).

Starts from include/goro/goro.hpp and inlines every quoted include that
resolves to a file under include/goro, once each, in first-use order.
System includes are kept where they appear. Run with --check to fail
(exit 1) when the checked-in amalgamation is stale.

The runtime's out-of-line parts sit in `#if GORO_COMPILE_RUNTIME` blocks
(detail/config.hpp, separate compilation). Such a block is moved to the
end, into one `#if GORO_COMPILE_RUNTIME` section: were its headers
inlined where first seen, a header both parts use would land inside the
block and be missing from the translation units that leave the block out.
A block from a header included under a condition (goro.hpp leaves
goro::signal out on Windows) keeps that condition around it at the end. A
header that is included under a condition first but unconditionally
elsewhere (netpoll.hpp: by goro::net, and by the scheduler) is inlined
outside the condition, which is closed around it and reopened.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "include" / "goro"
OUT_DIR = ROOT / "single_include"
OUT = OUT_DIR / "goro.hpp"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
IF = re.compile(r'^\s*#\s*if')
ELSE = re.compile(r'^\s*#\s*(else|elif)')
ENDIF = re.compile(r'^\s*#\s*endif')
RUNTIME_BLOCK = re.compile(r'^\s*#\s*if\s+GORO_COMPILE_RUNTIME\s*$')


def unconditional_headers():
    """The headers goro.hpp reaches through includes under no condition
    (a runtime block is no condition here: its section is in every
    header-only translation unit)."""
    found, todo = set(), [SRC / "goro.hpp"]
    while todo:
        path = todo.pop().resolve()
        if path in found:
            continue
        found.add(path)
        depth = 0
        for line in path.read_text().splitlines():
            if RUNTIME_BLOCK.match(line) and depth == 0:
                continue  # its #endif is then skipped below at depth 0
            if IF.match(line):
                depth += 1
            elif ENDIF.match(line):
                depth = max(depth - 1, 0)
            m = INCLUDE.match(line)
            if m and depth == 0:
                target = path.parent / m.group(1)
                if target.exists() and SRC in target.resolve().parents:
                    todo.append(target)
    return found


UNCONDITIONAL = unconditional_headers()


def inline_lines(path, lines, seen, out, deferred, conds=()):
    """Appends `lines` of `path` to out, inlining its includes. With
    `deferred` a list, GORO_COMPILE_RUNTIME blocks go there instead (with
    the file they came from and the conditionals around it: each the lines
    of an #if and of its #elif/#else seen so far); with None they are
    inlined in place."""
    block = None  # the lines of a runtime block being collected
    depth = 0
    open_ifs = []  # this file's conditionals around the current line
    for line in lines:
        if block is not None:
            if IF.match(line):
                depth += 1
            elif ENDIF.match(line):
                depth -= 1
                if depth == 0:
                    deferred.append((path, block, tuple(conds) + tuple(tuple(c) for c in open_ifs)))
                    block = None
                    continue
            block.append(line)
            continue
        if deferred is not None and RUNTIME_BLOCK.match(line):
            block, depth = [], 1
            continue
        if IF.match(line):
            open_ifs.append([line])
        elif ELSE.match(line) and open_ifs:
            open_ifs[-1].append(line)
        elif ENDIF.match(line) and open_ifs:
            open_ifs.pop()
        m = INCLUDE.match(line)
        if m:
            target = (path.parent / m.group(1))
            if target.exists() and SRC in target.resolve().parents:
                around = tuple(conds) + tuple(tuple(c) for c in open_ifs)
                if around and target.resolve() in UNCONDITIONAL and target.resolve() not in seen:
                    out.extend("#endif" for _ in around)  # hoisted out of the conditions
                    inline(target, seen, out, deferred)
                    for c in around:
                        out.extend(c)
                else:
                    inline(target, seen, out, deferred, around)
                continue
        out.append(line)
    assert block is None, f"{path}: unterminated #if GORO_COMPILE_RUNTIME"


def inline(path, seen, out, deferred, conds=()):
    path = path.resolve()
    if path in seen:
        return
    seen.add(path)
    rel = path.relative_to(ROOT / "include")
    out.append(f"// ---- begin {rel} ----")
    lines = [l for l in path.read_text().splitlines() if l.strip() != "#pragma once"]
    inline_lines(path, lines, seen, out, deferred, conds)
    out.append(f"// ---- end {rel} ----")


def render():
    out = [
        "// goro: Go's goroutine scheduler as a header-only C++20 library.",
        "// Single-header amalgamation generated by scripts/amalgamate.py; do not edit.",
        "// The context switch's assembly sources ship beside it in goro/arch/.",
        "#pragma once",
    ]
    seen, deferred = set(), []
    inline(SRC / "goro.hpp", seen, out, deferred)
    out.append("#if GORO_COMPILE_RUNTIME  // the runtime's out-of-line parts (detail/config.hpp)")
    for path, lines, conds in deferred:
        for c in conds:
            out.extend(c)
        inline_lines(path, lines, seen, out, None, conds)
        out.extend("#endif" for _ in conds)
    out.append("#endif  // GORO_COMPILE_RUNTIME")
    return "\n".join(out) + "\n"


def main():
    text = render()
    files = {OUT: text}
    for s in sorted((SRC / "arch").glob("*.S")):
        files[OUT_DIR / "goro" / "arch" / s.name] = s.read_text()
    if "--check" in sys.argv:
        stale = [p for p, t in files.items() if not p.exists() or p.read_text() != t]
        if stale:
            for p in stale:
                print(f"goro: {p.relative_to(ROOT)} is stale; run scripts/amalgamate.py")
            return 1
        return 0
    for p, t in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
