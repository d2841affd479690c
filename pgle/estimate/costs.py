"""Costs per instruction (microseconds, XLA's cycles on GPU) for the replay and the `pgle` arm's
profile: derived from the scheduled module and the target (a roofline: the time to move the
bytes or do the flops, whichever is longer), a user's profile on top, then `--what-if` rules."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from collections.abc import Iterable, Mapping, Sequence

from pgle.errors import BadInput
from pgle.estimate import kinds
from pgle.estimate.targets import Target
from pgle.profiles import files
from pgle.xla.hlo_text import Instruction, Module

COLLECTIVE_BASE_US = 5.0  # a collective's fixed cost (NCCL launch and sync, order of magnitude)
KERNEL_BASE_US = 2.0  # a kernel launch
# The bytes a collective moves over each device's links, per byte of its result (ring
# algorithms on n devices): all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
_TRAFFIC = {"all-reduce": 2.0, "all-gather": 1.0, "reduce-scatter": 1.0}
# XLA's PrimitiveType numbers (xla_data.proto), for the target's per-type matrix rates.
PRIMITIVE = {"f16": 10, "f32": 11, "f64": 12, "bf16": 16, "s8": 2, "f8e5m2": 19, "f8e4m3fn": 20}


def _is_dot(ins: Instruction, module: Module) -> bool:
    if ins.opcode in ("dot", "convolution"):
        return True
    if ins.opcode == "custom-call" and ("cublas" in ins.attrs or "gemm" in ins.attrs):
        return True
    if ins.opcode == "fusion":
        called = ins.attribute("calls")
        comp = module.computations.get(called) if called else None
        return bool(comp and any(i.opcode in ("dot", "convolution") for i in comp.instructions))
    return False


def derive(module: Module, target: Target, devices: int) -> dict[str, float]:
    """A cost for every instruction of the module's non-fusion computations (dones excepted:
    XLA prices a done by its start)."""
    shapes = module.shapes()
    out: dict[str, float] = {}
    called = {i.attribute("calls") for c in module.computations.values() for i in c.instructions}
    for comp in module.computations.values():
        if comp.name in called:
            continue  # a fusion's body: priced as its fusion
        for ins in comp.instructions:
            if ins.opcode.endswith("-done") or ins.opcode in ("send-done", "recv-done"):
                continue
            kind = kinds.kind_of(ins)
            if kind == kinds.OTHER:
                out[ins.name] = 0.0
            elif kind == kinds.COLLECTIVE:
                size = max((shapes[o].bytes for o in ins.operands if o in shapes), default=0)
                size = max(size, ins.bytes)
                fam = kinds.family(ins) or ""
                share = (devices - 1) / devices if devices > 1 else 0.0
                moved = size * _TRAFFIC.get(fam, 1.0) * share
                out[ins.name] = COLLECTIVE_BASE_US + moved / target.link_bandwidth * 1e6
            elif kind == kinds.HOST_COPY:
                out[ins.name] = KERNEL_BASE_US + ins.bytes / target.pcie_bandwidth * 1e6
            else:
                moved = ins.bytes + sum(shapes[o].bytes for o in ins.operands if o in shapes)
                seconds = moved / target.memory_bandwidth
                if _is_dot(ins, module):
                    seconds = max(seconds, _dot_flops(ins, shapes) / _peak(ins, target))
                out[ins.name] = KERNEL_BASE_US + seconds * 1e6
    return out


def _peak(ins: Instruction, target: Target) -> float:
    return target.peak_flops(PRIMITIVE.get(ins.dtype or "f32", 11))


def _dot_flops(ins: Instruction, shapes: Mapping[str, Instruction]) -> float:
    """2*M*N*K from the element counts alone: |A|*|B|/|C| = K^2 for C[M,N] = A[M,K] @ B[K,N]."""
    ops = [shapes[o].elements for o in ins.operands if o in shapes and shapes[o].elements > 1]
    out = ins.elements
    if len(ops) < 2 or out <= 0:
        return 0.0
    a, b = sorted(ops)[-2:]
    return 2.0 * out * math.sqrt(a * b / out)


def from_profile(path: str) -> dict[str, float]:
    """A profile's costs by bare instruction name (the mean of duplicates)."""
    profile = files.read_profile(path)
    sums: dict[str, list[float]] = {}
    for name, cost in profile.costs:
        sums.setdefault(files.split_qualified(name)[1], []).append(float(cost))
    return {n: sum(v) / len(v) for n, v in sums.items()}


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """`PATTERN=xF` scales, `PATTERN=N` or `PATTERN=Nus` sets. PATTERN: a kind (collective,
    host_copy, compute, other), a collective family (all-gather, all-reduce, ...) or an
    instruction-name pattern (`all-gather*`, `fusion.1?`)."""

    pattern: str
    scale: float | None
    value: float | None
    text: str

    def matches(self, ins: Instruction) -> bool:
        if self.pattern in kinds.KINDS:
            return kinds.kind_of(ins) == self.pattern
        fam = kinds.family(ins)
        if fam is not None and fam == self.pattern:
            return True
        return fnmatch.fnmatchcase(ins.name, self.pattern)

    def apply(self, cost: float) -> float:
        return cost * self.scale if self.scale is not None else float(self.value or 0.0)


_WHAT_IF = re.compile(r"^(?P<pat>[^=\s]+)=(?:x(?P<scale>[0-9.eE+-]+)|(?P<val>[0-9.eE+-]+)(?:us)?)$")


def parse_what_if(text: str) -> WhatIf:
    m = _WHAT_IF.match(text.strip())
    try:
        scale = float(m["scale"]) if m and m["scale"] else None
        value = float(m["val"]) if m and m["val"] else None
    except ValueError:
        m = None
    if (
        not m
        or (scale is not None and (scale < 0 or not math.isfinite(scale)))
        or (value is not None and (value < 0 or not math.isfinite(value)))
    ):
        raise BadInput(
            f"--what-if {text!r}: write PATTERN=xFACTOR or PATTERN=MICROSECONDS, e.g. "
            "'all-gather*=x2', 'collective=x0.01', 'fusion.3=12us' (PATTERN: a kind, a "
            "collective such as all-reduce, or an instruction-name pattern)."
        )
    return WhatIf(m["pat"], scale, value, text.strip())


def apply_what_if(
    costs: Mapping[str, float], instructions: Iterable[Instruction], rules: Sequence[WhatIf]
) -> dict[str, float]:
    out = dict(costs)
    if not rules:
        return out
    for ins in instructions:
        if ins.name not in out:
            continue
        for rule in rules:
            if rule.matches(ins):
                out[ins.name] = rule.apply(out[ins.name])
    return out


def profile_text(costs: Mapping[str, float]) -> bytes:
    return files.encode_profile(files.Profile(costs=sorted(costs.items())), files.TEXT)
