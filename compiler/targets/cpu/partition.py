"""Splitting the emitter's LLVM module into partitions that LLVM compiles in parallel.

LLVM's O3 pipeline and code generator run one module on one core. The cpu target therefore
cuts the module text (`LLVMEmitter`'s output, which stays the one text `m.ir("llvm")` prints)
into a few modules, compiles each in its own thread (llvmlite's calls go through ctypes, which
releases the GIL) and loads every object into one MCJIT engine, which links them.

A partition holds whole *groups*: a function with external linkage plus the internal
functions it reaches (an outlined loop's alwaysinline body, the micro-kernels it calls).
Groups that share an internal function (two conv kernels calling one micro-kernel) or a
writable internal global stay together, so every internal symbol keeps all its users in
one module, as before: LLVM's interprocedural passes see exactly what they saw in the whole
module. Internal *constants* and `external` declarations are copied into each partition that reads them (their address
is never compared). Other globals (a writable one, or one with external linkage defined here) are held by one
partition like a shared function. A function defined in another partition is declared.

The text is llvmlite's printing: a header, one line per global (`@"name" = ...`), one line
per declaration, definitions from `define` to a line `}`, and metadata lines (`!...`).
"""

from __future__ import annotations

import re

_REF = re.compile(r'@("(?:[^"\\]|\\.)*"|[-A-Za-z$._][-A-Za-z$._0-9]*)')
_DEFINE_HEAD = re.compile(r'define\s+(?:(internal|private)\s+)?')


def _name(token: str) -> str:
    return token[1:-1] if token.startswith('"') else token


class _Module:
    """The module text cut into its top-level items."""

    def __init__(self, text: str):
        self.header: list[str] = []  # ModuleID, triple, data layout, attributes, metadata
        self.globals: dict[str, str] = {}  # name -> its line
        self.declares: dict[str, str] = {}
        self.defines: dict[str, str] = {}  # name -> definition text, in module order
        lines = text.split("\n")
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            if line.startswith("define"):
                j = i
                while j < n and lines[j] != "}":
                    j += 1
                self.defines[self._first_ref(line)] = "\n".join(lines[i:j + 1])
                i = j + 1
                continue
            if line.startswith("@"):
                self.globals[self._first_ref(line)] = line
            elif line.startswith("declare"):
                self.declares[self._first_ref(line)] = line
            elif line.strip():
                self.header.append(line)
            i += 1

    @staticmethod
    def _first_ref(line: str) -> str:
        m = _REF.search(line)
        if m is None:
            raise ValueError(f"no symbol in LLVM IR line: {line[:80]}")
        return _name(m.group(1))

    def internal(self, name: str) -> bool:
        if name in self.defines:
            return _DEFINE_HEAD.match(self.defines[name]).group(1) is not None
        line = self.globals.get(name)
        return line is not None and re.match(r'@\S+\s*=\s*(internal|private)\b', line) is not None

    def copyable_global(self, name: str) -> bool:
        """A global each partition may hold a copy of: an internal constant, or one declared
        `external` (defined elsewhere: the weights bound with llvm.add_symbol)."""
        line = self.globals[name]
        m = re.match(r'@\S+\s*=\s*((?:[\w()]+\s+)*?)(constant|global)\b', line)
        if m is None:
            return False
        words = m.group(1).split()
        return "external" in words or (
            m.group(2) == "constant" and ("internal" in words or "private" in words))


def refs(text: str) -> set[str]:
    """The symbols a piece of LLVM IR names."""
    return {_name(t) for t in _REF.findall(text)}


def declaration(definition: str) -> str:
    """`declare` for a function definition: its signature, without linkage, body or function
    attributes."""
    head = definition.split("\n", 1)[0]
    m = re.match(r'define\s+(?:(?:internal|private)\s+)?(.*?@(?:"(?:[^"\\]|\\.)*"|\S+?)\(.*\))',
                 head)
    if m is None:
        raise ValueError(f"cannot read the signature of: {head[:80]}")
    return "declare " + m.group(1)


def split_module(text: str, parts: int) -> list[str]:
    """`text` as at most `parts` module texts that together define every function of it,
    balanced by size. One part (the text unchanged) when there is nothing to split."""
    if parts <= 1:
        return [text]
    mod = _Module(text)
    names = list(mod.defines)
    uses = {f: refs(body) - {f} for f, body in mod.defines.items()}
    # union-find over definitions: an internal function or writable internal global joins
    # every definition that names it
    parent = {f: f for f in names}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[str, str] = {}  # shared internal symbol -> a definition using it
    for f in names:
        for r in uses[f]:
            shared = (r in mod.defines and mod.internal(r)) or (
                r in mod.globals and not mod.copyable_global(r))
            if not shared:
                continue
            if r in mod.defines:
                parent[find(r)] = find(f)
            elif r in owner:
                parent[find(owner[r])] = find(f)
            else:
                owner[r] = f
    groups: dict[str, list[str]] = {}
    for f in names:
        groups.setdefault(find(f), []).append(f)
    if len(groups) < 2:
        return [text]
    # largest first onto the lightest bin (a group keeps module order inside)
    bins: list[tuple[int, list[str]]] = [(0, []) for _ in range(min(parts, len(groups)))]
    for members in sorted(groups.values(), key=lambda g: -sum(len(mod.defines[f]) for f in g)):
        k = min(range(len(bins)), key=lambda i: bins[i][0])
        size, held = bins[k]
        bins[k] = (size + sum(len(mod.defines[f]) for f in members), held + members)
    order = {f: i for i, f in enumerate(names)}
    return [_part_text(mod, sorted(held, key=order.__getitem__), uses) for _, held in bins if held]


def _part_text(mod: _Module, defined: list[str], uses: dict[str, set[str]]) -> str:
    here = set(defined)
    used: set[str] = set()
    for f in defined:
        used |= uses[f]
    todo = [g for g in used if g in mod.globals]
    while todo:  # globals whose initializers name other globals
        for r in refs(mod.globals[todo.pop()].split("=", 1)[1]):
            if r not in used:
                used.add(r)
                if r in mod.globals:
                    todo.append(r)
    out = list(mod.header)
    out += [line for name, line in mod.globals.items() if name in used]
    for name in sorted(used - here):
        if name in mod.defines:
            out.append(declaration(mod.defines[name]))
        elif name in mod.declares:
            out.append(mod.declares[name])
    out += [mod.defines[f] for f in defined]
    return "\n".join(out) + "\n"


__all__ = ["declaration", "refs", "split_module"]
