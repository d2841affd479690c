"""A scheduled HLO module (`Compiled.as_text()` of XLA:GPU), read into its computations and their
instructions in schedule order: name, opcode, result shape, operands."""

from __future__ import annotations

import dataclasses
import math
import re

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTR = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_ARRAY = re.compile(
    r"\b(pred|s4|u4|s8|u8|s16|u16|s32|u32|s64|u64|f16|bf16|f32|f64|c64|c128|f8\w*)\[([\d,]*)\]"
)
_BITS = {
    "pred": 8,
    "s4": 4,
    "u4": 4,
    "f16": 16,
    "bf16": 16,
    "s16": 16,
    "u16": 16,
    "f32": 32,
    "s32": 32,
    "u32": 32,
    "f64": 64,
    "s64": 64,
    "u64": 64,
    "c64": 64,
    "c128": 128,
    "s8": 8,
    "u8": 8,
}
# XLA's PrimitiveType numbers (xla_data.proto), for the target's per-type matrix rates.
PRIMITIVE = {"f16": 10, "f32": 11, "f64": 12, "bf16": 16, "s8": 2, "f8e5m2": 19, "f8e4m3fn": 20}


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: str
    operands: tuple[str, ...]
    attrs: str

    @property
    def bytes(self) -> int:
        return shape_bytes(self.shape)

    @property
    def elements(self) -> int:
        return sum(n for _, n in arrays(self.shape))

    @property
    def dtype(self) -> str | None:
        found = _ARRAY.search(self.shape)
        return found.group(1) if found else None


@dataclasses.dataclass
class Computation:
    name: str
    entry: bool
    instructions: list[Instruction]

    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}


@dataclasses.dataclass
class Module:
    name: str | None
    fingerprint: str | None
    computations: dict[str, Computation]

    @property
    def entry(self) -> Computation | None:
        return next((c for c in self.computations.values() if c.entry), None)

    def shapes(self) -> dict[str, Instruction]:
        return {i.name: i for c in self.computations.values() for i in c.instructions}


def arrays(shape: str) -> list[tuple[str, int]]:
    return [(m[1], math.prod(int(d) for d in m[2].split(",") if d)) for m in _ARRAY.finditer(shape)]


def shape_bytes(shape: str) -> int:
    return sum(n * _BITS.get(t, 8) // 8 for t, n in arrays(shape))


def _balanced(text: str, start: int) -> int:
    """The index just past the parenthesis group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def parse_instruction(name: str, rest: str) -> Instruction | None:
    rest = rest.strip()
    if rest.startswith("("):
        end = _balanced(rest, 0)
    else:
        end = rest.find(" ")
        if end < 0:
            return None
    shape, tail = rest[:end], rest[end:].lstrip()
    m = re.match(r"([\w\-]+)\(", tail)
    if not m:
        return None
    close = _balanced(tail, m.end() - 1)
    operands = tuple(re.findall(r"%([\w.\-]+)", tail[m.end() : close - 1]))
    return Instruction(name, m.group(1), shape, operands, tail[close:])


def parse(text: str) -> Module:
    head = re.search(r"^HloModule\s+([\w.\-]+)", text, re.M)
    fp = re.search(r'fingerprint_before_lhs="([0-9a-f]+)"', text)
    comps: dict[str, Computation] = {}
    cur: Computation | None = None
    for line in text.splitlines():
        if cur is None:
            m = _HEADER.match(line)
            if m and not line.startswith((" ", "HloModule")):
                cur = comps[m.group(2)] = Computation(m.group(2), bool(m.group(1)), [])
            continue
        if line.startswith("}"):
            cur = None
            continue
        im = _INSTR.match(line)
        if im:
            ins = parse_instruction(im.group(1), im.group(2))
            if ins is not None:
                cur.instructions.append(ins)
    return Module(head.group(1) if head else None, fp.group(1) if fp else None, comps)
