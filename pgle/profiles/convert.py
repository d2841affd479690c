"""pgle's own trace -> profile converter: per module, a chosen statistic, a step window.

Why not only jaxlib's `get_profiled_instructions_proto`: it pools every event of
an instruction name across all modules, devices, streams, steps and hosts into
one arithmetic mean, warm-up included (docs/xla-facts.md section 2). A train step
and an eval step that both have a `fusion.3` get one blended cost, applied to
every module. This converter reads the same `<host>.xplane.pb` files, groups
device events by module (`hlo_module` + `program_id`), keeps only events inside
the profiled step window, and applies `stat` (default median) per instruction.

Compatibility contract (tested): with `per_module=False, stat="mean"`, no
window and `qualify=False`, the output equals jaxlib's converter on the same
run folder (checked against jaxlib 0.10.2, whose logic lives in
`xla/python/xplane_to_profile_instructions.cc`): same planes (`/device:GPU:*`,
else TPU, else CUSTOM), every line but "Async XLA Ops", events carrying both
`hlo_op` and `hlo_module` (metadata stats first, event stats override), internal
host events skipped, fragments of one op merged by `scope_range_id` (else by
start timestamp) into one span per host, names qualified `<fp>::<op>` only when
the metadata plane's HLO proto has `fingerprint_before_lhs` on the ROOT
instruction of its entry computation.

Fingerprints for per-module output come from, in order: the module-level
frontend attribute `fingerprint_before_lhs` of the HLO proto in the
`/host:metadata` plane (where XLA stores it since jax 0.4.24), the ROOT
instruction attribute (older XLA), then the VLOG line `Fingerprint before LHS
for module <name>(<id>) = <hex>` in the run's log (`TF_CPP_VMODULE=gpu_hlo_schedule=1`).

Python, protobuf and numpy: no jax import, so it works in the CLI process. numpy is imported
in the functions that convert: `pgle convert` of a profile file imports this module too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pgle.errors import BadInput, ProfileError
from pgle.phrases import all_of
from pgle.profiles.files import FINGERPRINT_RE, QUALIFIER, Profile
from pgle.profiles.proto import hlo_proto_class
from pgle.profiles.xspace_file import METADATA_PLANE, TraceFile, find_xplane_files

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pgle.profiles.xspace_file import PlaneBytes

# protobuf ships no type information: parsed XSpace/HLO messages are Any here.
Message: TypeAlias = Any
# A stat integer as `_stat_int` reads it: int64 as an int, uint64 kept apart as ("u", value)
# (jaxlib's IntValue() reads only int64_value, so it sees 0 there).
StatInt: TypeAlias = "int | tuple[Literal['u'], int]"
ModuleKey: TypeAlias = tuple[str, "int | None"]  # (module name, program id)
# What a converted op's durations are keyed by: (op, module key), or jaxlib's name string.
NameKey: TypeAlias = "str | tuple[str, ModuleKey]"
Durations: TypeAlias = "dict[NameKey, list[npt.NDArray[np.float64]]]"
# (op, module, program id, scope range id) of one event, from its metadata and its own stats.
EventStats: TypeAlias = "tuple[str | None, str | None, StatInt | None, StatInt | None]"
# (stat metadata id -> code, reference names, metadata id -> its stats or None when internal)
StatSetup: TypeAlias = "tuple[dict[int, int], dict[int, str], dict[int, EventStats | None]]"

# tsl/profiler/utils/xplane_schema.h
TASK_ENV_PLANE = "Task Environment"
ASYNC_OPS_LINE = "Async XLA Ops"
FINGERPRINT_ATTR = "fingerprint_before_lhs"
# tsl IsInternalEvent(): host events jaxlib's converter never counts.
INTERNAL_EVENTS = frozenset(
    {
        "MemoryAllocation",
        "MemoryDeallocation",
        "PrefetchProduce",
        "PrefetchConsume",
        "ParallelInterleaveProduce",
        "ParallelInterleaveConsume",
        "ParallelInterleaveInitializedInput",
        "ParallelMapProduce",
        "ParallelMapConsume",
        "MapAndBatchProduce",
        "MapAndBatchConsume",
        "ParseExampleProduce",
        "ParseExampleConsume",
    }
)
FINGERPRINT_LOG_RE = re.compile(
    r"Fingerprint before LHS for module (?P<name>.+?)\((?P<id>-?\d+)\) = (?P<fp>[0-9a-fA-F]+)\s*$"
)
STATS = ("median", "mean", "min", "max")
# Timestamps below this are relative to the profile start (TSL normalizes them on export).
_ABSOLUTE_NS = 10**17


def parse_stat(stat: str) -> str:
    """Validate `--stat`: median | mean | min | max | p<0-100> (jaxlib's percentile index rule)."""
    s = str(stat).strip().lower()
    if s in STATS:
        return s
    m = re.fullmatch(r"p(\d{1,3})", s)
    if m and 0 <= int(m.group(1)) <= 100:
        return f"p{int(m.group(1))}"
    raise BadInput(
        f"unknown statistic '{stat}'.",
        hint="Use median, mean, min, max or pNN (a percentile from p0 to p100).",
    )


def apply_stat(values: list[float], stat: str) -> float:
    if stat == "mean":
        # Left-to-right double sum, like std::accumulate in jaxlib: same order, same bits.
        total = 0.0
        for v in values:
            total += v
        return total / len(values)
    if stat == "min":
        return min(values)
    if stat == "max":
        return max(values)
    ordered = sorted(values)
    n = len(ordered)
    if stat == "median":
        mid = n // 2
        return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    p = int(stat[1:])
    return ordered[int(p / 100.0 * (n - 1))]


def stat_of_chunks(chunks: list[npt.NDArray[np.float64]], stat: str) -> float:
    """`apply_stat` over the concatenated numpy chunks, bit for bit: the mean is a left-to-right
    sum (np.cumsum is sequential, unlike np.sum's pairwise sum), the median and percentiles
    pick the same order statistics `sorted()` would."""
    import numpy as np

    v = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    n = int(v.size)
    if stat == "mean":
        return float(np.cumsum(v)[-1]) / n
    if stat == "min":
        return float(v.min())
    if stat == "max":
        return float(v.max())
    if stat == "median":
        mid = n // 2
        if n % 2:
            return float(np.partition(v, mid)[mid])
        part = np.partition(v, [mid - 1, mid])
        return (float(part[mid - 1]) + float(part[mid])) / 2
    i = int(int(stat[1:]) / 100.0 * (n - 1))
    return float(np.partition(v, i)[i])


@dataclasses.dataclass
class ModuleSummary:
    """One HLO module seen in the trace (a row of the per-module report)."""

    name: str
    program_id: int | None
    fingerprint: str | None
    fingerprint_source: str | None  # 'hlo-module' | 'hlo-root' | 'log' | None
    instruction_count: int = 0
    event_count: int = 0

    @property
    def label(self) -> str:
        return self.name if self.program_id is None else f"{self.name}({self.program_id})"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["module"] = self.label
        return d


@dataclasses.dataclass
class TraceConversion:
    """Everything the converter learned; `profiles` is what gets written."""

    profiles: dict[str, Profile]  # fingerprint -> profile (per module) or {'': profile}
    modules: list[ModuleSummary]
    xplane_files: list[str]
    device_planes: int
    events_used: int
    events_outside_window: int
    stat: str
    warnings: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stat": self.stat,
            "xplane_files": self.xplane_files,
            "device_planes": self.device_planes,
            "events_used": self.events_used,
            "events_outside_window": self.events_outside_window,
            "modules": [m.to_dict() for m in self.modules],
            "profiles": {
                fp: {"instruction_count": p.instruction_count} for fp, p in self.profiles.items()
            },
            "warnings": list(self.warnings),
        }


def convert_trace(run_dir: Any, **options: Any) -> dict[str, Profile]:
    """Profiles from a trace run folder: `{fingerprint: Profile}` per module, else `{'': Profile}`
    (`convert_trace_detailed`'s options; its `.profiles`)."""
    return convert_trace_detailed(run_dir, **options).profiles


# --- reading ---------------------------------------------------------------------------------


def trace_files(path: Any) -> list[str] | None:
    """The `*.xplane.pb` files of a trace run folder; None when `path` is not one."""
    try:
        files = find_xplane_files(path) if os.path.isdir(path) else []
    except (OSError, ProfileError):
        return None
    return files or None


def _stat_str(stat: Message, ref_names: dict[int, str]) -> str | None:
    """tsl XStatVisitor::ToString(); None when no value is set (jaxlib skips those)."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "str_value":
        return str(stat.str_value)
    if kind == "ref_value":
        return ref_names.get(stat.ref_value, "")
    if kind == "int64_value":
        return str(stat.int64_value)
    if kind == "uint64_value":
        return str(stat.uint64_value)
    if kind == "double_value":
        return f"{stat.double_value:.6g}"
    return "<opaque bytes>"


def _stat_int(stat: Message) -> StatInt | None:
    """The stat as an integer; a uint64 comes back as `("u", value)`, kept apart because
    jaxlib's IntValue() reads only int64_value (so it sees 0 there). None when not set."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "uint64_value":
        return ("u", int(stat.uint64_value))
    return int(stat.int64_value)


@dataclasses.dataclass
class _HloModuleInfo:
    name: str
    id: int
    module_fp: str | None
    root_fp: str | None


def _hlo_modules(plane: Message | None) -> list[_HloModuleInfo]:
    """Modules whose HloProto is in the metadata plane (any bytes stat that parses as one)."""
    from google.protobuf.message import DecodeError

    out: list[_HloModuleInfo] = []
    if plane is None:
        return out
    HloProto = hlo_proto_class()
    for em in plane.event_metadata.values():
        for st in em.stats:
            if st.WhichOneof("value") != "bytes_value":
                continue
            try:
                module = HloProto.FromString(st.bytes_value).hlo_module
            except DecodeError:
                continue
            if not module.computations:
                continue
            out.append(
                _HloModuleInfo(
                    name=module.name,
                    id=module.id,
                    module_fp=module.frontend_attributes.map.get(FINGERPRINT_ATTR) or None,
                    root_fp=_root_fingerprint(module),
                )
            )
    return out


def _root_fingerprint(module: Message) -> str | None:
    entry = None
    for comp in module.computations:
        if comp.id == module.entry_computation_id or (
            module.entry_computation_name and comp.name == module.entry_computation_name
        ):
            entry = comp
    if entry is None:
        entry = module.computations[-1]  # callees come before callers; the entry is last
    for ins in entry.instructions:
        if ins.id == entry.root_id:
            return ins.frontend_attributes.map.get(FINGERPRINT_ATTR) or None
    return None


def read_log_fingerprints(log_path: Any) -> tuple[dict[tuple[str, int], str], list[str]]:
    """`(module name, unique id) -> fingerprint` from VLOG lines; warnings for conflicting lines."""
    found: dict[tuple[str, int], str] = {}
    conflicts: set[tuple[str, int]] = set()
    try:
        with open(os.fspath(log_path), encoding="utf-8", errors="replace") as f:
            for line in f:
                if "Fingerprint before LHS" not in line:
                    continue
                m = FINGERPRINT_LOG_RE.search(line)
                if not m:
                    continue
                if m.group("name").endswith("-clone"):
                    # jax 0.7.2/0.8.3: the collective combiner's scheduling copy; it never runs,
                    # and a profile file under its fingerprint makes the module itself miss its
                    # own (tests/data/xla_gpu/README.md).
                    continue
                key = (m.group("name"), int(m.group("id")))
                fp = m.group("fp").lower()
                if key in found and found[key] != fp:
                    conflicts.add(key)
                found[key] = fp
    except FileNotFoundError:
        raise BadInput(f"log {os.fspath(log_path)} does not exist.") from None
    except OSError as e:
        raise BadInput(f"cannot read log {os.fspath(log_path)}: {e.strerror or e}.") from None
    warnings = []
    for key in sorted(conflicts):
        found.pop(key)
        warnings.append(
            f"the log gives module {key[0]}({key[1]}) more than one fingerprint "
            "(several processes?); it is left out."
        )
    return found, warnings


def _normalize_window(steps_window: Any) -> list[tuple[int, int]] | None:
    if steps_window is None:
        return None
    pairs = list(steps_window)
    if len(pairs) == 2 and all(isinstance(v, (int, float)) for v in pairs):
        pairs = [tuple(pairs)]
    out = []
    for pair in pairs:
        start, end = pair
        if end < start:
            raise BadInput(f"step window ({start}, {end}) ends before it starts.")
        out.append((int(start), int(end)))
    return out


def _profile_start_ns(plane: Message | None) -> int | None:
    """`profile_start_time` of the "Task Environment" plane: TSL stores event times relative to
    it."""
    if plane is None:
        return None
    for st in plane.stats:
        md = plane.stat_metadata.get(st.metadata_id)
        if md is not None and md.name == "profile_start_time":
            return int(st.uint64_value or st.int64_value) or None
    return None


# --- conversion --------------------------------------------------------------------------------


def convert_trace_detailed(
    run_dir: Any,
    *,
    per_module: bool,
    stat: str = "median",
    log_path: Any = None,
    steps_window: Any = None,
    qualify: bool = False,
    merge_fragments: bool | None = None,
    files: list[str] | None = None,
) -> TraceConversion:
    """Everything the conversion of a trace run folder learned (its `profiles`: `{fingerprint:
    Profile}` per module, else `{'': Profile}`).

    `steps_window`: one `(start_ns, end_ns)` pair or a list of them, in Unix-epoch
    nanoseconds (`time.time_ns()` in the workload); an execution is kept when it
    starts inside one. `qualify` (single file only): prefix every instruction with
    its module's fingerprint from any source, not only where jaxlib would.
    `merge_fragments` (default: on per module, off for a single file): count the
    kernels of one op execution (same `scope_range_id` on one device) as one span,
    as XLA main does since 2025; jaxlib 0.10.2 counts each kernel separately.
    `files`: the folder's `*.xplane.pb` files, when the caller already listed them.
    """
    stat = parse_stat(stat)
    merge = per_module if merge_fragments is None else merge_fragments
    window = _normalize_window(steps_window)
    files = find_xplane_files(run_dir) if files is None else files
    log_fps: dict[tuple[str, int], str] = {}
    warnings: list[str] = []
    if log_path is not None:
        log_fps, log_warnings = read_log_fingerprints(log_path)
        warnings += log_warnings

    # Module fingerprints from every host's metadata plane, read first so that every
    # host sees every module (jaxlib accumulates them host by host, in listing order).
    host_infos = []
    hlo: dict[tuple[str, int], _HloModuleInfo] = {}
    for path in files:
        host = TraceFile(path)
        infos = _hlo_modules(host.first(METADATA_PLANE))
        host_infos.append((path, infos))
        for info in infos:
            hlo[(info.name, info.id)] = info
    resolver = _FingerprintResolver(hlo, log_fps)
    namer = None if per_module else _SingleFileNamer(resolver, qualify)

    durations: Durations = {}
    ops_seen: set[tuple[str, tuple[str, int | None]]] = set()
    modules_seen: dict[tuple[str, int | None], int] = {}
    device_planes = used = outside = 0
    for path, infos in host_infos:
        host = TraceFile(path)
        if namer is not None:
            namer.add_host_modules(infos)
        start_ns = _profile_start_ns(host.first(TASK_ENV_PLANE))
        if window is not None and start_ns is None:
            warnings.append(
                f"{os.path.basename(path)} has no profile start time; "
                "its timestamps are taken as Unix-epoch nanoseconds for the step window."
            )
        indices = host.device_plane_indices()
        device_planes += len(indices)
        for plane_index in indices:
            data = host.read(plane_index)
            # The plane's metadata and lines without their events, parsed; its events read as
            # columns from the bytes (a parsed plane is ~8x its bytes: memory, issues 16, 25).
            layout, skeleton = host.layout(plane_index, data)
            setup = _plane_stat_setup(skeleton)
            got = (0, 0) if setup is None else None
            if setup is not None:
                lines = [
                    (i, line.timestamp_ns)
                    for i, line in enumerate(skeleton.lines)
                    if (line.display_name or line.name) != ASYNC_OPS_LINE
                ]
                got = _scan_plane_columns(
                    setup,
                    lines,
                    layout,
                    merge,
                    durations,
                    ops_seen,
                    modules_seen,
                    window,
                    start_ns,
                    namer,
                )
            del skeleton, layout  # the parsed skeleton is large: free it before a fallback parse
            if got is None:  # a layout the column reader does not decode exactly
                got = _scan_plane(
                    host.parse(plane_index, data),
                    merge,
                    durations,
                    ops_seen,
                    modules_seen,
                    window,
                    start_ns,
                    namer,
                )
            del data
            u, o = got
            used += u
            outside += o

    summaries = []
    for mkey, count in modules_seen.items():
        fp, source = resolver.lookup(mkey) or (None, None)
        summaries.append(
            ModuleSummary(
                name=mkey[0],
                program_id=mkey[1],
                fingerprint=fp,
                fingerprint_source=source,
                event_count=count,
                instruction_count=sum(1 for _, m in ops_seen if m == mkey),
            )
        )

    if per_module:
        profiles = _per_module_profiles(durations, stat, resolver, warnings)
    else:
        costs: list[tuple[str, float]] = []
        for name, v in durations.items():
            assert isinstance(name, str)  # one file: the namer's name strings, as jaxlib's
            costs.append((name, stat_of_chunks(v, stat)))
        profiles = {"": Profile(costs=costs)}

    if device_planes == 0:
        warnings.append(
            "the trace holds no /device:GPU (or TPU) plane, so the profile is empty: "
            "PGLE profiles come from NVIDIA GPU runs."
        )
    elif used == 0 and outside:
        warnings.append(f"{all_of(outside, 'device event')} lie outside the step window.")
    return TraceConversion(
        profiles=profiles,
        modules=summaries,
        xplane_files=files,
        device_planes=device_planes,
        events_used=used,
        events_outside_window=outside,
        stat=stat,
        warnings=warnings,
    )


class _FingerprintResolver:
    """(module name, program id) -> (fingerprint, source), from the HLO protos, then the log."""

    def __init__(
        self, hlo: dict[tuple[str, int], _HloModuleInfo], log_fps: dict[tuple[str, int], str]
    ):
        self.hlo = hlo
        self.log_fps = log_fps
        self.by_name: dict[str, set[tuple[str, int]]] = {}
        for key in list(hlo) + list(log_fps):
            self.by_name.setdefault(key[0], set()).add(key)
        self.cache: dict[tuple[str, int | None], tuple[str, str] | None] = {}

    def lookup(self, mkey: tuple[str, int | None]) -> tuple[str, str] | None:
        if mkey in self.cache:
            return self.cache[mkey]
        key: Any = mkey
        if mkey[1] is None:
            # No program_id on the events: the name must name one module only.
            candidates = self.by_name.get(mkey[0], set())
            key = next(iter(candidates)) if len(candidates) == 1 else None
        result = None
        info = self.hlo.get(key) if key else None
        if info is not None and info.module_fp and FINGERPRINT_RE.match(info.module_fp):
            result = (info.module_fp, "hlo-module")
        elif info is not None and info.root_fp and FINGERPRINT_RE.match(info.root_fp):
            result = (info.root_fp, "hlo-root")
        elif key in self.log_fps:
            result = (self.log_fps[key], "log")
        self.cache[mkey] = result
        return result


class _SingleFileNamer:
    """The instruction name written to a single-file profile."""

    def __init__(self, resolver: _FingerprintResolver, qualify: bool):
        self.qualify = qualify
        self.resolver = resolver
        # jaxlib qualifies only by the ROOT attribute, looked up as "name(id)" (or "name"
        # when the events carry no program_id, which never matches), and learns modules
        # host by host: a host read earlier does not see a later host's modules.
        self.jax_root: dict[str, str] = {}

    def add_host_modules(self, infos: list[_HloModuleInfo]) -> None:
        for i in infos:
            if i.root_fp:
                self.jax_root[f"{i.name}({i.id})"] = i.root_fp

    def name(self, op: str, module: str, pid: StatInt | None, mkey: ModuleKey) -> str:
        if self.qualify:
            fp = self.resolver.lookup(mkey)
        else:
            jax_pid = 0 if isinstance(pid, tuple) else pid
            root = self.jax_root.get(f"{module}({jax_pid})" if pid is not None else module)
            fp = (root, "") if root else None
        return f"{fp[0]}{QUALIFIER}{op}" if fp else op


_OP, _MODULE, _PID, _SCOPE = range(4)
_STAT_CODES = {"hlo_op": _OP, "hlo_module": _MODULE, "program_id": _PID, "scope_range_id": _SCOPE}


def _as_int(value: StatInt) -> int:
    """A stat integer as read by `_stat_int` (plain int, or `("u", value)` for a uint64)."""
    return value[1] if isinstance(value, tuple) else value


def _scan_plane(
    plane: Message,
    merge: bool,
    durations: Durations,
    ops_seen: set[tuple[str, ModuleKey]],
    modules_seen: dict[ModuleKey, int],
    window: list[tuple[int, int]] | None,
    start_ns: int | None,
    namer: _SingleFileNamer | None,
) -> tuple[int, int]:
    """Collect one device plane's op durations (with `merge`, one per fragment span); returns
    (events used, events outside the window). The hot loop of the converter: it avoids
    per-event allocations and reads the usual stat encodings (references, int64) directly."""
    import numpy as np

    setup = _plane_stat_setup(plane)
    if setup is None:
        return 0, 0
    codes, ref_names, md_stats = setup
    offset_ns = 0 if start_ns is None else start_ns
    single = window[0] if window is not None and len(window) == 1 else None
    # (op, module, program id) -> [name key, module key, event count, durations]
    # (a heterogeneous row, mutated in the hot loop: a dataclass costs an attribute lookup)
    groups: dict[tuple[str, str, StatInt | None], list[Any]] = {}
    plane_values: dict[Any, list[float]] = {}  # name -> durations, in event order (no merge)
    used = outside = 0
    codes_get, md_get, groups_get = codes.get, md_stats.get, groups.get
    for line in plane.lines:
        if (line.display_name or line.name) == ASYNC_OPS_LINE:
            continue
        line_ps = line.timestamp_ns * 1000
        line_offset_ns = 0 if line.timestamp_ns >= _ABSOLUTE_NS else offset_ns
        for ev in line.events:
            base = md_get(ev.metadata_id, _NO_STATS)
            if base is None:
                continue  # internal host event
            op, module, pid, scope = base
            # _read_stats inlined: this loop runs once per device event (millions in a large
            # trace), and it reads interned stat names through ref_value first.
            for st in ev.stats:
                code = codes_get(st.metadata_id)
                if code is None:
                    continue
                if code <= _MODULE:
                    ref = st.ref_value
                    text = ref_names.get(ref, "") if ref else _stat_str(st, ref_names)
                    if text is None:
                        continue
                    if code == _OP:
                        op = text
                    else:
                        module = text
                else:
                    number = st.int64_value or _stat_int(st)
                    if number is None:
                        continue
                    if code == _PID:
                        pid = number
                    else:
                        scope = number
            if op is None or module is None:
                continue
            ts = line_ps + ev.offset_ps
            if window is not None:
                t_ns = ts // 1000 + line_offset_ns
                if single is not None:
                    if not single[0] <= t_ns < single[1]:
                        outside += 1
                        continue
                elif not any(a <= t_ns < b for a, b in window):
                    outside += 1
                    continue
            used += 1
            gkey = (op, module, pid)
            group = groups_get(gkey)
            if group is None:
                mkey = (module, None if pid is None else _as_int(pid))
                # jaxlib keys by its name string: modules it cannot tell apart pool.
                name = (op, mkey) if namer is None else namer.name(op, module, pid, mkey)
                ops_seen.add((op, mkey))
                values: dict[Any, list[int]] | list[float]  # spans (merge), or durations
                if merge:
                    values = {}
                else:
                    found = plane_values.get(name)
                    if found is None:
                        found = plane_values[name] = []
                    values = found
                group = groups[gkey] = [name, mkey, 0, values]
            group[2] += 1
            if not merge:
                # jaxlib 0.10.2: every event is one sample, in event order, converted
                # ps -> ns -> us in two divisions (one division by 1e6 differs in the last bit).
                group[3].append(ev.duration_ps / 1e3 / 1e3)
                continue
            # One op execution may run as several kernels sharing a scope_range_id: one
            # span from the first start to the last end. Spans live per plane, so one op
            # started at the same picosecond on two devices stays two executions.
            key = _as_int(scope) if scope is not None else ts
            end = ts + ev.duration_ps
            span = group[3].get(key)
            if span is None:
                group[3][key] = [ts, end]
            else:
                if ts < span[0]:
                    span[0] = ts
                if end > span[1]:
                    span[1] = end
    for name, mkey, count, spans in groups.values():
        modules_seen[mkey] = modules_seen.get(mkey, 0) + count
        if merge:
            durations.setdefault(name, []).append(
                np.array([(end - start) / 1e3 / 1e3 for start, end in spans.values()], np.float64)
            )
    for name, values in plane_values.items():
        durations.setdefault(name, []).append(np.array(values, np.float64))
    return used, outside


_NO_STATS = (None, None, None, None)
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _plane_stat_setup(plane: Message) -> StatSetup | None:
    """(stat codes, reference names, metadata-level stats) of a device plane; None when the
    plane has no hlo_op / hlo_module stat (nothing to read)."""
    codes = {
        k: _STAT_CODES[v.name] for k, v in plane.stat_metadata.items() if v.name in _STAT_CODES
    }
    if not {_OP, _MODULE} <= set(codes.values()):
        return None
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    # Metadata-level stats apply to every event of that metadata (and events override them).
    md_stats: dict[int, EventStats | None] = {}
    for mid, md in plane.event_metadata.items():
        if md.name in INTERNAL_EVENTS:
            md_stats[mid] = None
        else:
            md_stats[mid] = _read_stats(md.stats, codes, ref_names, _NO_STATS)
    return codes, ref_names, md_stats


def _scan_plane_columns(
    setup: StatSetup,
    lines: list[tuple[int, int]],
    layout: PlaneBytes,
    merge: bool,
    durations: Durations,
    ops_seen: set[tuple[str, ModuleKey]],
    modules_seen: dict[ModuleKey, int],
    window: list[tuple[int, int]] | None,
    start_ns: int | None,
    namer: _SingleFileNamer | None,
) -> tuple[int, int] | None:
    """`_scan_plane` on numpy columns read from the plane's bytes (pgle.profiles.xplane_columns):
    the same events, groups, names, sample order and values, several times faster on millions of
    events. None (before touching any argument) where the plane's layout is outside what the
    column reader decodes exactly; the caller then runs `_scan_plane`."""
    import numpy as np

    from pgle.profiles.xplane_columns import INT64, REF, UINT64, event_columns, small_ids

    codes, ref_names, md_stats = setup
    cols = event_columns(layout, [i for i, _ in lines], codes)
    if cols is None:
        return None
    n = cols.metadata_id.size
    zero_k, zero_v = np.zeros(n, np.int8), np.zeros(n, np.int64)
    ev = {c: cols.stats.get(c, (zero_k, zero_v)) for c in (_OP, _MODULE, _PID, _SCOPE)}
    for code, (kind, _) in ev.items():
        allowed = (0, REF) if code <= _MODULE else (0, INT64, UINT64)
        if not np.isin(kind, allowed).all():
            return None  # a string-valued op, a non-integer id: the protobuf path reads those

    strings: dict[str, int] = {}

    def intern(text: str) -> int:
        return strings.setdefault(text, len(strings))

    # Metadata-level stats, one row per distinct metadata id of the events.
    ids, inv = small_ids(cols.metadata_id)
    m = ids.size
    internal = np.zeros(m, bool)
    base = {c: (np.zeros(m, np.int8), np.zeros(m, np.int64)) for c in (_PID, _SCOPE)}
    base_op, base_module = np.full(m, -1, np.int64), np.full(m, -1, np.int64)
    for j, mid in enumerate(ids.tolist()):
        row = md_stats.get(mid, _NO_STATS)
        if row is None:
            internal[j] = True
            continue
        md_op, md_module, md_pid, md_scope = row
        if md_op is not None:
            base_op[j] = intern(md_op)
        if md_module is not None:
            base_module[j] = intern(md_module)
        for code, number in ((_PID, md_pid), (_SCOPE, md_scope)):
            if number is None:
                continue
            if isinstance(number, tuple):  # ("u", uint64)
                base[code][0][j], base[code][1][j] = UINT64, np.uint64(number[1]).view(np.int64)
            elif _I64_MIN <= number <= _I64_MAX:
                base[code][0][j], base[code][1][j] = INT64, number
            else:
                return None

    def text_column(code: int, base_col: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        kind, value = ev[code]
        out: npt.NDArray[np.int64] = base_col[inv]
        is_ref = np.flatnonzero(kind == REF)
        if is_ref.size:
            refs, rinv = small_ids(value[is_ref])
            sid = np.array(
                [intern(ref_names.get(int(r) & 0xFFFFFFFFFFFFFFFF, "")) for r in refs.tolist()],
                np.int64,
            )
            out[is_ref] = sid[rinv]
        return out

    def int_column(code: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        kind, value = ev[code]
        bk, bv = base[code]
        k, v = bk[inv], bv[inv]
        on_event = kind != 0
        return np.where(on_event, kind, k), np.where(on_event, value, v)

    op_col = text_column(_OP, base_op)
    module_col = text_column(_MODULE, base_module)
    pid_k, pid_v = int_column(_PID)
    scope_k, scope_v = int_column(_SCOPE)
    keep = ~internal[inv] & (op_col >= 0) & (module_col >= 0)

    outside = 0
    if window is not None:
        # t_ns = (line_ns * 1000 + offset_ps) // 1000 + line offset = constant per line
        # + offset_ps // 1000; each window compared per line, in int64 (clamped).
        offset_ns = 0 if start_ns is None else start_ns
        const = [ts + (0 if ts >= _ABSOLUTE_NS else offset_ns) for _, ts in lines]
        t_rel = cols.offset_ps // 1000
        inside = np.zeros(n, bool)
        for a, b in window:
            lo = np.array([min(max(a - c, _I64_MIN), _I64_MAX) for c in const], np.int64)[cols.line]
            hi = np.array([min(max(b - c, _I64_MIN), _I64_MAX) for c in const], np.int64)[cols.line]
            inside |= (lo <= t_rel) & (t_rel < hi)
        outside = int(np.count_nonzero(keep & ~inside))
        keep &= inside
    e = np.flatnonzero(keep)
    used = int(e.size)
    if not used:
        return 0, outside

    # Groups (op, module, program id) in order of first event, as `_scan_plane`'s dict.
    pv_unique, pv_idx = np.unique(pid_v[e], return_inverse=True)
    s_count, p_count = len(strings), pv_unique.size * 4
    if s_count * s_count * p_count >= 1 << 62:
        return None
    key = (op_col[e] * s_count + module_col[e]) * p_count + pv_idx.astype(np.int64) * 4 + pid_k[e]
    _, first, ginv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    group = rank[ginv]  # group of each kept event, numbered in first-event order
    counts = np.bincount(group, minlength=order.size)
    names_text = list(strings)
    groups = []
    for g in range(order.size):
        i = e[first[order[g]]]
        k, v = int(pid_k[i]), int(pid_v[i])
        pid: StatInt | None = None
        if k != 0:
            pid = v if k == INT64 else ("u", v & 0xFFFFFFFFFFFFFFFF)
        op_text, module_text = names_text[op_col[i]], names_text[module_col[i]]
        mkey = (module_text, None if pid is None else _as_int(pid))
        name = (op_text, mkey) if namer is None else namer.name(op_text, module_text, pid, mkey)
        groups.append((op_text, mkey, name, int(counts[g])))

    if merge:
        has_scope = scope_k[e] != 0
        if np.any((scope_k[e] == UINT64) & (scope_v[e] < 0)):
            return None  # a scope id >= 2**63 would collide with a negative one here
        mixed = np.bincount(group, weights=has_scope, minlength=order.size)
        if np.any((mixed > 0) & (mixed < counts)):
            return None  # one op keyed by scope ids and by timestamps: keys could collide
        line_ts = [ts for _, ts in lines]
        base_ns = min(line_ts)
        line_ps = [(ts - base_ns) * 1000 for ts in line_ts]
        extent = (
            max(abs(x) for x in line_ps)
            + int(np.abs(cols.offset_ps).max())
            + int(np.abs(cols.duration_ps).max())
        )
        if extent >= 1 << 62:
            return None
        ts = np.array(line_ps, np.int64)[cols.line[e]] + cols.offset_ps[e]
        end = ts + cols.duration_ps[e]
        span_key = np.where(has_scope, scope_v[e], ts)
        by = np.lexsort((span_key, group))
        g_sorted, k_sorted = group[by], span_key[by]
        cut = np.flatnonzero((g_sorted[1:] != g_sorted[:-1]) | (k_sorted[1:] != k_sorted[:-1])) + 1
        starts = np.concatenate(([0], cut))
        span_start = np.minimum.reduceat(ts[by], starts)
        span_end = np.maximum.reduceat(end[by], starts)
        span_first = np.minimum.reduceat(by, starts)
        span_group = g_sorted[starts]
        seq = np.lexsort((span_first, span_group))
        values = (span_end[seq] - span_start[seq]) / 1e3 / 1e3
        bounds = np.searchsorted(span_group[seq], np.arange(order.size + 1))
        chunks = [(g, values[bounds[g] : bounds[g + 1]]) for g in range(order.size)]
    else:
        # Every event one sample, in event order per name (groups may share a name).
        name_ids: dict[Any, int] = {}
        group_name = np.array(
            [name_ids.setdefault(name, len(name_ids)) for _, _, name, _ in groups], np.int64
        )
        per_event = group_name[group]
        by = np.argsort(per_event, kind="stable")
        values = cols.duration_ps[e][by] / 1e3 / 1e3
        bounds = np.searchsorted(per_event[by], np.arange(len(name_ids) + 1))
        chunks = [(j, values[bounds[j] : bounds[j + 1]]) for j in range(len(name_ids))]

    for op_text, mkey, _, count in groups:
        ops_seen.add((op_text, mkey))
        modules_seen[mkey] = modules_seen.get(mkey, 0) + count
    if merge:
        for g, chunk in chunks:
            durations.setdefault(groups[g][2], []).append(chunk)
    else:
        names = list(name_ids)
        for j, chunk in chunks:
            durations.setdefault(names[j], []).append(chunk)
    return used, outside


def _read_stats(
    stats: Any, codes: dict[int, int], ref_names: dict[int, str], base: EventStats
) -> EventStats:
    op, module, pid, scope = base
    for st in stats:
        code = codes.get(st.metadata_id)
        if code is None:
            continue
        if code <= _MODULE:
            text = _stat_str(st, ref_names)
            if text is None:
                continue
            if code == _OP:
                op = text
            else:
                module = text
        else:
            number = _stat_int(st)
            if number is None:
                continue
            if code == _PID:
                pid = number
            else:
                scope = number
    return op, module, pid, scope


def _per_module_profiles(
    durations: Durations, stat: str, resolver: _FingerprintResolver, warnings: list[str]
) -> dict[str, Profile]:
    per_fp: dict[str, dict[str, list[npt.NDArray[np.float64]]]] = {}
    missing: set[tuple[str, int | None]] = set()
    for key, values in durations.items():
        assert not isinstance(key, str)  # per module: keyed by (op, module key), no namer
        op, mkey = key
        fp = resolver.lookup(mkey)
        if fp is None:
            missing.add(mkey)
            continue
        # Two compilations of one module (same fingerprint) pool their executions.
        per_fp.setdefault(fp[0], {}).setdefault(op, []).extend(values)
    for mkey in sorted(missing, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        label = mkey[0] if mkey[1] is None else f"{mkey[0]}({mkey[1]})"
        warnings.append(
            f"module {label} has no fingerprint in the trace or the log, so it gets no per-module "
            "profile; rerun with TF_CPP_VMODULE=gpu_hlo_schedule=1 and pass the log."
        )
    return {
        fp: Profile(costs=[(op, stat_of_chunks(v, stat)) for op, v in ops.items()])
        for fp, ops in per_fp.items()
    }
