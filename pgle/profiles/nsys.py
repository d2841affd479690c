"""Nsight Systems data -> per-module PGLE profiles (the rules of NVIDIA nsys-jax's `pgle_costs`).

Input is the *projected* NVTX trace: every NVTX push/pop range that XLA's runtime opens on a CPU
thread (`TSL:XlaModule:#hlo_module=<name>,program_id=<id>#` around one module execution,
`TSL:Thunk:#[name=...,]hlo_op=<instruction>#` around one thunk), with the time span of the GPU
work (kernels, memcpy, memset) launched inside it. nsys-jax archives hold that trace already
(`nvtx_gpu_proj_trace/trace.parquet`, made by nsys's `nvtx_gpu_proj_trace` recipe); for a SQLite
export pgle projects it itself (`pgle.profiles.nsys_sqlite`).

The rules, ported from nsys-jax (JAX-Toolbox commit bcbbfa57, `nsys_jax/data_loaders.py`,
`analysis.py`, `analyses/pgle_costs.py`) and checked against it on a real archive (tests):
- NCCL ranges are dropped (their children move up one level); only the innermost Thunk range of
  a nest counts, attributed to its closest XlaModule ancestor; thunks that start before the first
  module range are edge effects and dropped; a module's last execution is dropped when it launched
  fewer GPU operations than mean - std of the earlier ones (the profile stopped mid-module).
- Each module execution gets an index per (device, module); the steady state drops the first
  execution of modules whose compilation was profiled, plus one more when the profile has any
  communication (skews between processes). `skip` overrides that with a fixed count.
- Default statistic (`min-compute-max-comm`): the slowest execution of a communication
  instruction (collectives and host offloading copies, classified from the HLO as nsys-jax does)
  and the fastest of everything else. The duration is the projected GPU span of the thunk,
  overlap with other thunks included (nsys-jax re-adds the hidden part before taking the stat).
  Any other `--stat` (median, mean, min, max, pNN) applies to every instruction.
- The name written is `OpMetadata.scheduling_name` from the module's after-optimizations HLO
  dump, or the instruction name when that field is empty or the dump predates it (nsys-jax
  itself fails on such dumps).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from pgle.errors import ProfileError
from pgle.profiles.files import Profile

MIN_COMPUTE_MAX_COMM = "min-compute-max-comm"

MODULE_RE = re.compile(
    r"^(?:TSL:)?XlaModule:#(?:prefix=(.*?),|)hlo_module=([a-z0-9._-]+)(?:,program_id=(\d+)|)#$"
)
THUNK_RE = re.compile(r"^(?:TSL:)?Thunk:#(?:name=.*?,|)hlo_op=([a-z0-9._-]+)#$")
LAUNCHER_RE = re.compile(
    r"^XlaLauncher:#global=(\d+),local=(\d+),process=(\d+),(?:partition|slice)=(\d+)#$"
)


@dataclasses.dataclass
class Range:
    """One projected NVTX range (times in ns; `parent` is another Range's `rid` or None)."""

    rid: int
    name: str
    start: int
    duration: int
    pid: int
    tid: int
    parent: int | None
    gpu_ops: int | None = None


@dataclasses.dataclass
class HloInstruction:
    scheduling_name: str
    communication: bool


@dataclasses.dataclass
class HloModule:
    name: str
    program_id: int
    fingerprint: str
    instructions: dict[str, HloInstruction]


@dataclasses.dataclass
class ModuleCosts:
    """One module of the profile, what the report shows per row."""

    name: str
    fingerprint: str | None
    executions: int
    steady_executions: int
    instructions: int
    status: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class NsysConversion:
    profiles: dict[str, Profile]
    modules: list[ModuleCosts]
    warnings: list[str]
    stat: str
    thunks_used: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "stat": self.stat,
            "thunks_used": self.thunks_used,
            "modules": [m.to_dict() for m in self.modules],
        }


def parse_nsys_stat(stat: str | None) -> str:
    if stat is None or str(stat).strip().lower() == MIN_COMPUTE_MAX_COMM:
        return MIN_COMPUTE_MAX_COMM
    from pgle.profiles.convert import parse_stat

    return parse_stat(stat)


def _std_cut(values: list[int]) -> float:
    # np.mean - np.std (population) of the earlier executions; nan (never true) for none.
    if not values:
        return math.nan
    mean = sum(values) / len(values)
    return mean - math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def per_module_costs(
    ranges: list[Range],
    *,
    devices: dict[tuple[int, int], int],
    module_lookup: Callable[[int, str], HloModule | None],
    compiled: set[str],
    stat: str | None = None,
    skip: int | None = None,
) -> NsysConversion:
    """The projected ranges of one process -> `{fingerprint: Profile}` (see the module
    docstring)."""
    stat = parse_nsys_stat(stat)
    warnings: list[str] = []
    by_id = {r.rid: r for r in ranges}
    # NCCL ranges go; their children move up to the NCCL range's parent.
    nccl = {r.rid for r in ranges if r.name.startswith(("NCCL:", "nccl"))}
    for r in ranges:
        if r.parent in nccl:
            r.parent = by_id[r.parent].parent
    for rid in nccl:
        del by_id[rid]
    is_thunk = {
        rid
        for rid, r in by_id.items()
        if THUNK_RE.match(r.name) or r.name.startswith(("TSL:Thunk:#", "Thunk:#"))
    }
    is_module = {
        rid for rid, r in by_id.items() if r.name.startswith(("TSL:XlaModule:", "XlaModule:"))
    }
    if not is_module:
        raise ProfileError(
            "the Nsight trace has no XlaModule ranges, so no XLA module ran while it "
            "was recorded (or XLA's NVTX annotations were off).",
            hint="Profile with nsys's NVTX tracing on (-t cuda,nvtx) while the jitted steps run.",
        )
    first_module = min(by_id[m].start for m in is_module)
    thunks = [rid for rid in sorted(is_thunk) if by_id[rid].start >= first_module]
    # Innermost thunk of a nest, attributed to its closest XlaModule ancestor.
    module_of: dict[int, int] = {}
    has_child_thunk: set[int] = set()
    for rid in thunks:
        p = by_id[rid].parent
        while p is not None and p in by_id and p not in is_module:
            if p in is_thunk:
                has_child_thunk.add(p)
            p = by_id[p].parent
        if p is not None and p in is_module:
            module_of[rid] = p
    thunks = [rid for rid in thunks if rid in module_of and rid not in has_child_thunk]
    mod_ids = sorted({module_of[t] for t in thunks})
    # Drop a last module execution that looks cut short by the end of the profile.
    dropped_modules: set[int] = set()
    if all(by_id[m].gpu_ops is not None for m in mod_ids):
        by_name: dict[str, list[int]] = {}
        for m in mod_ids:
            by_name.setdefault(by_id[m].name, []).append(m)
        for name, ms in by_name.items():
            # every gpu_ops is set (checked above)
            counts = [n for m in ms if (n := by_id[m].gpu_ops) is not None]
            if counts[-1] < _std_cut(counts[:-1]):
                dropped_modules.add(ms[-1])
                warnings.append(
                    f"dropped the last execution of {name}: {counts[-1]} GPU operations against "
                    f"{sum(counts[:-1]) / len(counts[:-1]):.1f} before (profile ended inside it)."
                )
    mod_ids = [m for m in mod_ids if m not in dropped_modules]
    thunks = [t for t in thunks if module_of[t] not in dropped_modules]

    # Module identity: program id + name -> fingerprint through the HLO dump.
    module_info: dict[int, HloModule | None] = {}
    names: dict[int, str] = {}
    unresolved: dict[str, str] = {}
    for m in mod_ids:
        match = MODULE_RE.match(by_id[m].name)
        if not match or match.group(3) is None:
            module_info[m] = None  # autotuning executions carry no program id
            names[m] = match.group(2) if match else by_id[m].name
            continue
        names[m] = match.group(2)
        info = module_lookup(int(match.group(3)), match.group(2))
        module_info[m] = info
        if info is None:
            unresolved[f"{match.group(2)}({match.group(3)})"] = match.group(2)

    zeroth = min(devices.values()) if devices else 0

    def device(r: Range) -> int:
        return devices.get((r.pid, r.tid), zeroth)

    key_of = {
        m: (info.fingerprint if (info := module_info[m]) else f"?{names[m]}") for m in mod_ids
    }
    execution: dict[int, int] = {}
    counters: dict[tuple[int, str], int] = {}
    for m in mod_ids:
        k = (device(by_id[m]), key_of[m])
        execution[m] = counters.get(k, 0)
        counters[k] = execution[m] + 1

    def inst(t: int) -> tuple[HloModule | None, str, HloInstruction | None]:
        info = module_info[module_of[t]]
        match = THUNK_RE.match(by_id[t].name)
        op = match.group(1) if match else by_id[t].name
        return info, op, (info.instructions.get(op) if info else None)

    any_comm = any((i := inst(t)[2]) is not None and i.communication for t in thunks)
    if skip is None:
        threshold = {
            m: (1 if key_of[m] in compiled else 0) + (1 if any_comm else 0) for m in mod_ids
        }
    else:
        threshold = {m: skip for m in mod_ids}
    steady = [t for t in thunks if execution[module_of[t]] >= threshold[module_of[t]]]
    if thunks and not steady:
        warnings.append(
            "the warm-up rule left no steady-state execution, so every execution counts; "
            "profile more steps."
        )
        steady = thunks

    durations: dict[str, dict[str, list[int]]] = {}
    comm: dict[tuple[str, str], bool] = {}
    missing_ops: dict[str, set[str]] = {}
    for t in steady:
        info, op, hinst = inst(t)
        if info is None:
            continue
        if hinst is None:
            missing_ops.setdefault(info.fingerprint, set()).add(op)
            continue
        durations.setdefault(info.fingerprint, {}).setdefault(op, []).append(by_id[t].duration)
        comm[(info.fingerprint, op)] = hinst.communication
    for fp, unknown in missing_ops.items():
        warnings.append(
            f"module {fp}: {len(unknown)} thunk names are not instructions of its HLO dump "
            f"(such as {sorted(unknown)[0]}); they were left out."
        )
    for label in sorted(unresolved):
        warnings.append(
            f"module {label} has no after-optimizations HLO dump in the input, so its "
            "fingerprint is unknown and it gets no profile."
        )

    from pgle.profiles.convert import apply_stat

    profiles: dict[str, Profile] = {}
    infos = {i.fingerprint: i for i in module_info.values() if i is not None}
    for fp, by_op in durations.items():
        costs = []
        for op in sorted(by_op):  # nsys-jax writes in groupby (sorted) order
            values = by_op[op]
            ns: float
            if stat == MIN_COMPUTE_MAX_COMM:
                ns = max(values) if comm[(fp, op)] else min(values)
            else:
                ns = apply_stat([float(v) for v in values], stat)
            costs.append((infos[fp].instructions[op].scheduling_name or op, ns / 1000.0))
        profiles[fp] = Profile(costs=costs)

    rows: dict[str, ModuleCosts] = {}
    for m in mod_ids:
        info = module_info[m]
        key = key_of[m]
        row = rows.get(key)
        if row is None:
            status = (
                "written"
                if info and info.fingerprint in profiles
                else "autotuning (no program id)"
                if (named := MODULE_RE.match(by_id[m].name)) and named.group(3) is None
                else "no HLO dump"
                if info is None
                else "no steady-state thunks"
            )
            row = rows[key] = ModuleCosts(
                name=names[m],
                fingerprint=info.fingerprint if info else None,
                executions=0,
                steady_executions=0,
                instructions=len(profiles[info.fingerprint].costs)
                if info and info.fingerprint in profiles
                else 0,
                status=status,
            )
        row.executions += 1
        row.steady_executions += execution[m] >= threshold[m]
    return NsysConversion(
        profiles=profiles,
        modules=sorted(rows.values(), key=lambda r: r.name),
        warnings=warnings,
        stat=stat,
        thunks_used=len(steady),
    )


# --- HLO dumps --------------------------------------------------------------------------------

_COMM = frozenset(
    {
        "all-gather",
        "all-reduce",
        "all-to-all",
        "collective-broadcast",
        "collective-permute",
        "reduce-scatter",
    }
)
_COMM_START = frozenset({"all-gather-start", "all-reduce-start", "collective-permute-start"})
_HOST_MEMORY_SPACE = 5  # xla::Layout::kHostMemorySpace


def hlo_module_from_proto(proto: Any) -> HloModule:  # an xla.HloProto (protobuf: untyped)
    """Index an `xla.HloProto` (after optimizations): scheduling names and communication flags."""
    mod = proto.hlo_module
    fp = mod.frontend_attributes.map.get("fingerprint_before_lhs", "")
    computations = {c.id: c for c in mod.computations}
    by_id = {i.id: i for c in mod.computations for i in c.instructions}

    def host(inst: Any) -> bool:
        return bool(inst.shape.layout.memory_space == _HOST_MEMORY_SPACE)

    def offloading(inst: Any) -> bool:
        # nsys-jax counts host<->device copies for memory offloading as communication.
        ops = [by_id.get(o) for o in inst.operand_ids]
        if inst.opcode == "dynamic-slice" and ops and ops[0] is not None:
            return host(inst) != host(ops[0])
        if inst.opcode == "dynamic-update-slice" and len(ops) > 1 and None not in ops[:2]:
            return host(inst) == host(ops[0]) and host(inst) != host(ops[1])
        return False

    def wraps_comm(comp_id: int, seen: set[int]) -> bool:
        if comp_id in seen or comp_id not in computations:
            return False
        seen.add(comp_id)
        for called in computations[comp_id].instructions:
            if any(wraps_comm(c, seen) for c in called.called_computation_ids):
                return True
            if called.opcode in _COMM or offloading(called):
                return True
        return False

    instructions = {}
    for c in mod.computations:
        for i in c.instructions:
            if i.opcode in _COMM | _COMM_START:
                is_comm = True
            elif i.opcode in ("async-start", "fusion"):
                is_comm = any(wraps_comm(cid, set()) for cid in i.called_computation_ids)
            else:
                is_comm = False
            instructions[i.name] = HloInstruction(i.metadata.scheduling_name, is_comm)
    return HloModule(name=mod.name, program_id=mod.id, fingerprint=fp, instructions=instructions)


DUMP_RE = re.compile(r"^module_(\d+)\.(.+?)\.(.+)\.hlo\.pb(\.xz)?$")


class DumpIndex:
    """After-optimizations HLO dumps (`module_<id>.<name>.*after_optimizations.hlo.pb[.xz]`)."""

    def __init__(self, files: Iterable[Any]):
        self._files: dict[tuple[int, str], list[Any]] = {}
        for f in files:
            m = DUMP_RE.match(f.name)
            if m and m.group(3).endswith("after_optimizations"):
                self._files.setdefault((int(m.group(1)), m.group(2)), []).append(f)
        self._cache: dict[tuple[int, str], HloModule | None] = {}

    def __len__(self) -> int:
        return len(self._files)

    def lookup(self, program_id: int, name: str) -> HloModule | None:
        key = (program_id, name)
        if key not in self._cache:
            files = self._files.get(key, [])
            if len(files) > 1:
                raise ProfileError(
                    f"several after-optimizations dumps for module {name}({program_id}): "
                    f"{', '.join(f.name for f in files)}."
                )
            self._cache[key] = _load_dump(files[0]) if files else None
        return self._cache[key]

    def fingerprint(self, program_id: int, name: str) -> str | None:
        info = self.lookup(program_id, name)
        return info.fingerprint if info else None


def _load_dump(path: Any) -> HloModule:
    from pgle.profiles.bounded import check_regular_file, xz_bytes
    from pgle.profiles.proto import hlo_proto_class

    check_regular_file(path, "HLO dump")
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        data = xz_bytes(data, path, "HLO dump")  # bounded: a small xz may expand to gigabytes
    proto = hlo_proto_class()()
    try:
        proto.ParseFromString(data)
    except Exception:
        raise ProfileError(f"HLO dump {path} is not a valid xla.HloProto.") from None
    info = hlo_module_from_proto(proto)
    if not info.fingerprint:
        raise ProfileError(
            f"HLO dump {path} has no fingerprint_before_lhs attribute (XLA before "
            "jax 0.4.24 did not record it), so its module cannot be keyed."
        )
    return info
