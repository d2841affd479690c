"""XLA's HLO module text, read once (issue 35): `compiled.as_text()`, XLA's
`*after_optimizations.txt` dump, or the `hlo/` files pgle keeps in a run folder.

A module is its computations, each an ordered list of instructions: name, opcode, result
shape, operands, and the attribute text after the operands (`calls=`, `backend_config=`,
`metadata={...}`). A scheduled module lists a computation's instructions in schedule order.
Checked on the executed HLO of jax 0.10.2, 0.11.2 and 0.12.0.1 (XLA:GPU, tests/data/xla_gpu)
and of jax 0.10.2 on CPU. Used by the schedule change (pgle.analysis.schedule), the classifier
(pgle.xla.instruction_kinds), the verdicts and `pgle estimate`. Stdlib only.
"""

from __future__ import annotations

import dataclasses
import math
import re

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"([\w\-]+)\(")
_NAME = re.compile(r"%([\w.\-]+)")
_MODULE = re.compile(r"^HloModule\s+([\w.\-]+)", re.M)
_FINGERPRINT = re.compile(r'fingerprint_before_lhs="([0-9a-f]+)"')
# The attributes that name computations an instruction runs (fusions, async wrappers, calls,
# reductions, loops, conditionals).
_CALLED = re.compile(
    r"\b(?:calls|to_apply|body|condition|true_computation|false_computation|"
    r"branch_computations)=(\{[^}]*\}|%?[\w.\-]+)"
)
_ARRAY = re.compile(
    r"\b(pred|s4|u4|s8|u8|s16|u16|s32|u32|s64|u64|f16|bf16|f32|f64|c64|c128|f8\w*)\[([\d,]*)\]"
)
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "f16": 16, "bf16": 16, "s16": 16,
         "u16": 16, "f32": 32, "s32": 32, "u32": 32, "f64": 64, "s64": 64, "u64": 64, "c64": 64,
         "c128": 128}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: str  # the result shape's text: `f32[8,128]{1,0}`, a tuple `(f32[], s32[])`
    operands: tuple[str, ...]
    attrs: str  # the text after the operand list: `, calls=%f, metadata={...}`

    @property
    def called(self) -> tuple[str, ...]:
        """The computations it runs (`calls=`, `to_apply=`, `body=`, ...), in text order."""
        return tuple(n for v in _CALLED.findall(self.attrs) for n in re.findall(r"[\w.\-]+", v))

    def attribute(self, key: str) -> str | None:
        """A top-level attribute's value (`custom_call_target` -> `__cublas$gemm`), quotes and
        braces kept off; None where the instruction has none."""
        m = re.search(rf'(?:^|,\s*){re.escape(key)}=("[^"]*"|\{{|[^,\s]*)', self.attrs)
        if m is None:
            return None
        value = m.group(1)
        if value == "{":
            end = _balanced(self.attrs, m.end(1) - 1, "{", "}")
            return self.attrs[m.end(1) : end - 1]
        return value.strip('"').removeprefix("%")

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


@dataclasses.dataclass
class Module:
    name: str | None
    fingerprint: str | None  # fingerprint_before_lhs, where XLA printed it
    computations: dict[str, Computation]  # in text order

    @property
    def entry(self) -> Computation | None:
        return next((c for c in self.computations.values() if c.entry), None)

    def shapes(self) -> dict[str, Instruction]:
        """Every instruction of every computation by name."""
        return {i.name: i for c in self.computations.values() for i in c.instructions}


def arrays(shape: str) -> list[tuple[str, int]]:
    """(element type, element count) of every array in a shape's text."""
    return [(m[1], math.prod(int(d) for d in m[2].split(",") if d)) for m in _ARRAY.finditer(shape)]


def shape_bytes(shape: str) -> int:
    return sum(n * _BITS.get(t, 8) // 8 for t, n in arrays(shape))


def _balanced(text: str, start: int, open_: str = "(", close: str = ")") -> int:
    """The index just past the bracket group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _instruction(name: str, rest: str) -> Instruction | None:
    """One instruction from the text after its `name = `: None where it names no opcode."""
    rest = rest.strip()
    if rest.startswith("("):  # a tuple shape
        end = _balanced(rest, 0)
    else:
        end = rest.find(" ")
        if end < 0:
            return None
    shape, tail = rest[:end], rest[end:].lstrip()
    m = _OPCODE.match(tail)
    if not m:
        return None
    close = _balanced(tail, m.end() - 1)
    operands = tuple(_NAME.findall(tail, m.end(), close - 1))
    return Instruction(name, m.group(1), shape, operands, tail[close:])


def parse(text: str) -> Module:
    """The module's computations and their instructions, in text order; a text without a
    computation gives a module without one."""
    head = _MODULE.search(text)
    fp = _FINGERPRINT.search(text)
    comps: dict[str, Computation] = {}
    cur: Computation | None = None
    for line in text.splitlines():
        if cur is None:
            m = _HEADER.match(line)
            if m and not line.startswith("HloModule"):
                cur = comps[m.group(2)] = Computation(m.group(2), bool(m.group(1)), [])
            continue
        if line.startswith("}"):
            cur = None
            continue
        im = _INSTRUCTION.match(line)
        if im:
            ins = _instruction(im.group(1), im.group(2))
            if ins is not None:
                cur.instructions.append(ins)
    return Module(head.group(1) if head else None, fp.group(1) if fp else None, comps)
