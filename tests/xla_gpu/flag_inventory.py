#!/usr/bin/env python3
"""Which XLA_FLAGS names a jaxlib's XLA accepts: asked of the jaxlib itself.

Stdlib and protobuf (pgle's own dependency). Importable (Prober, candidates, write_inventory,
read_inventory) and runnable:

    python tests/xla_gpu/flag_inventory.py --target VENV/bin/python[:DIR] [--target ...]
        [--also FILE ...] --out DIR

How: every `xla_<name>` string in the jaxlib's shared libraries (and the CUDA plugin's,
where installed) is a candidate; a child process of that interpreter starts jax's CPU backend
with all candidates in XLA_FLAGS (`--<name>=1`), and XLA says which it does not know
(`Unknown flag(s) in XLA_FLAGS: ...`, after every value parsed). A value XLA cannot read
(`Couldn't interpret value 1 for flag X`, `Illegal value for --X '1'`) names a flag it knows,
and the rest is asked again (then with an empty value); a rejected value it does not name is
found by halving the set. Flags XLA accepts but no
longer honours (`"X" is no longer supported ...`) are recorded as deprecated. The CPU
backend parses every DebugOptions flag (GPU flags included), and it is started in every jax
process, so its answer is what decides whether XLA aborts a GPU job too.

DIR/<jaxlib version>.txt: a provenance header (`#` lines), then one accepted flag a line,
tab-separated: name, kind, enum values, default (from the jaxlib's own DebugOptions declaration
and default values), and XLA's deprecation warning where it prints one. `--usage` also writes
DIR/<version>.usage.txt, XLA's own flag listing (needs gdb). `--also FILE` adds names to probe
(other inventories); every target is asked about every target's candidates, so a name one
version dropped is asked of the others too. `PYTHON:DIR` puts a jax/jaxlib unpacked in DIR
(`pip download --no-deps jax==V jaxlib==V`, unzipped) before the interpreter's own: how
releases the lane has no venv for were inventoried (tests/data/xla_gpu/flags/README.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CANDIDATE = re.compile(rb"xla_[a-z0-9_]{3,}")
_OK = "FLAG-INVENTORY-STARTED"
_CHILD = ("import jax, jaxlib.version\n"
          "jax.devices()\n"
          f"print('{_OK}', jaxlib.version.__version__, flush=True)\n")
# jax >= 0.5.1: "Unknown flag in XLA_FLAGS: --a=1 --b=1"; <= 0.5.0: "Unknown flags in
# XLA_FLAGS: --a=1 --b=1  <leftover argv>" (two spaces, then junk: seen on 0.4.35).
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.*?)(?:  .*)?$", re.MULTILINE)
_BAD = (re.compile(r"Couldn't interpret value .* for flag (xla_\w+)"),
        re.compile(r"Illegal value for --(xla_\w+)"))
_PARSE_FAILED = "Flag parsing failed"
# absl cuts a log message at about 15000 bytes: a longer listing may have lost names.
_LISTING_CUT = 8000
# Symbols of generated protobuf code and embedded files, never flag names.
_NOT_A_FLAG = re.compile(r"__|_2eproto|_2f")
_DEPRECATED = re.compile(r'"(xla_\w+)" is no longer supported[^\n]*')


def candidates(pythonpath: list[str], python: str) -> set[str]:
    """`xla_*` names in the jaxlib's (and CUDA plugin's) shared libraries."""
    code = ("import os, jaxlib; print(os.path.dirname(jaxlib.__file__))\n"
            "try:\n import jax_plugins.xla_cuda12 as p; print(os.path.dirname(p.__file__))\n"
            "except Exception: pass\n")
    out = subprocess.run([python, "-c", code], env=_env("", pythonpath), check=True,
                         capture_output=True, text=True).stdout.split()
    names: set[str] = set()
    for root in out:
        for path in Path(root).rglob("*.so*"):
            if path.is_file() and path.stat().st_size > 1_000_000:
                names.update(m.decode() for m in _CANDIDATE.findall(path.read_bytes()))
    return {n for n in names if not _NOT_A_FLAG.search(n)}


def _env(xla_flags: str, pythonpath: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "TF_CPP_", "JAX_")) and k != "PYTHONPATH"}
    env.update(XLA_FLAGS=xla_flags, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="0")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    return env


class Prober:
    """Asks one interpreter's XLA about flag names, one child process a question.

    `hints`: names XLA rejects both values of without naming the flag (some enums): asked
    one at a time instead of being found by halving; shared between versions, which mostly
    have the same such flags, and grown as new ones turn up."""

    def __init__(self, python: str, pythonpath: list[str], hints: set[str] | None = None):
        self.python, self.pythonpath, self.runs = python, pythonpath, 0
        self.hints = hints if hints is not None else set()
        self.deprecated: dict[str, str] = {}

    def run(self, names: list[str], value: str = "1") -> tuple[str, set[str], set[str]]:
        """('ok'|'unknown'|'parse_failed', unknown names, names with a rejected value)."""
        self.runs += 1
        with tempfile.TemporaryDirectory(prefix="pgle-flags-") as cwd:
            p = subprocess.run([self.python, "-c", _CHILD], cwd=cwd, capture_output=True,
                               text=True, errors="replace", timeout=300, check=False,
                               env=_env(" ".join(f"--{n}={value}" for n in names),
                                        self.pythonpath))
        for m in _DEPRECATED.finditer(p.stderr):
            self.deprecated.setdefault(m.group(1), m.group(0).strip())
        bad = {m.group(1) for r in _BAD for m in r.finditer(p.stderr)}
        if p.returncode == 0 and _OK in p.stdout:
            return "ok", set(), bad
        m = _UNKNOWN.search(p.stderr)
        if m:
            return "unknown", set(re.findall(r"--(\w+)", m.group(1))), bad
        if _PARSE_FAILED in p.stderr:
            return "parse_failed", set(), bad
        raise RuntimeError(f"the probe child ended without a flag verdict (exit "
                           f"{p.returncode}): {p.stderr.strip()[-2000:]}")

    def accepted(self, names: list[str]) -> set[str]:
        """The names XLA knows, among `names`."""
        alone = [n for n in names if n in self.hints]
        known = {n for n in alone if self._batch([n])}
        return known | self._batch([n for n in names if n not in self.hints])

    def _batch(self, names: list[str]) -> set[str]:
        """Values "1" then "" (empty): between them every bool, int and plain string flag
        parses or is named; a rejection XLA does not name (`Invalid collective op name: 1`,
        some enums) is found by halving the set."""
        known: set[str] = set()
        pending = list(names)
        for value in ("1", ""):
            while pending:
                status, unknown, bad = self.run(pending, value)
                if status == "ok":
                    return known | set(pending)
                if status == "unknown":
                    if len(" ".join(unknown)) < _LISTING_CUT:
                        return known | (set(pending) - unknown)
                    # XLA's log line may have been cut short: ask again without those
                    pending = [n for n in pending if n not in unknown]
                    continue
                if not bad & set(pending):
                    break  # rejected without a name: try the next value
                known |= bad & set(pending)  # named: known; ask again without them
                pending = [n for n in pending if n not in bad]
        if not pending:
            return known
        if len(pending) == 1:  # rejects both values without naming the flag: it knows it
            self.hints.add(pending[0])
            return known | set(pending)
        half = len(pending) // 2
        return known | self._batch(pending[:half]) | self._batch(pending[half:])


@dataclasses.dataclass
class Entry:
    """One accepted flag of one jaxlib."""

    name: str
    kind: str = "?"  # bool | int | float | string | enum | enum_list | string_list | map | ?
    values: tuple[str, ...] = ()  # an enum's value names, as XLA's DebugOptions declares them
    default: str | None = None  # as XLA's default DebugOptions has it; None: unknown
    note: str = ""  # XLA's own deprecation warning

    def line(self) -> str:
        return "\t".join([self.name, self.kind, ",".join(self.values),
                          "" if self.default is None else self.default,
                          f"deprecated: {self.note}" if self.note else ""]).rstrip("\t")


def read_inventory(path: str | Path) -> dict[str, Entry]:
    """name -> Entry, from an inventory file (tab-separated: name, kind, enum values,
    default (`-` unknown), note)."""
    out: dict[str, Entry] = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t") + [""] * 4
        name, kind, values, default, note = cols[:5]
        out[name] = Entry(name, kind or "?", tuple(v for v in values.split(",") if v),
                          None if default == "-" else default,
                          note.removeprefix("deprecated: "))
    return out


def versions_of(python: str, pythonpath: list[str]) -> tuple[str, str]:
    """(jaxlib version, Python version) of that interpreter (with that path)."""
    code = "import sys, jaxlib.version as v; print(v.__version__, sys.version.split()[0])"
    out = subprocess.run([python, "-c", code], env=_env("", pythonpath), check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], out[1]


# --- what each flag is: XLA's own DebugOptions declaration and its default values ---------
_KINDS = {8: "bool", 9: "string", 14: "enum", 1: "float", 2: "float"}  # FieldDescriptorProto


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def debug_options_descriptor(data: bytes):
    """XLA's DebugOptions message, from the serialized xla/xla.proto FileDescriptorProto that
    protobuf's generated code embeds in the library (found by its name field, read until the
    first byte that cannot continue a FileDescriptorProto)."""
    from google.protobuf import descriptor_pb2

    key = b"\n\rxla/xla.proto"
    for m in re.finditer(re.escape(key), data):
        fd = _file_descriptor_at(data, m.start(), descriptor_pb2)
        for msg in fd.message_type if fd is not None else ():
            if msg.name == "DebugOptions":
                return msg
    return None


def _file_descriptor_at(data: bytes, start: int, descriptor_pb2):
    """The FileDescriptorProto that starts at `start`, or None (not one after all)."""
    i = start
    while i < len(data):
        tag, j = _varint(data, i)
        if not 1 <= tag >> 3 <= 15 or tag & 7 not in (0, 2):
            break
        if tag & 7 == 2:
            n, j = _varint(data, j)
            j += n
        else:
            _, j = _varint(data, j)
        if j > len(data):
            break
        i = j
    from google.protobuf.message import DecodeError

    try:
        return descriptor_pb2.FileDescriptorProto.FromString(data[start:i])
    except DecodeError:
        return None


def describe(python: str, pythonpath: list[str]) -> dict[str, Entry]:
    """Kind, enum values and default of every DebugOptions field of that jaxlib."""
    code = ("import os, jaxlib\nfrom jax._src.lib import xla_client as xc\n"
            "o = xc.CompileOptions()\nb = o.executable_build_options\n"
            "print(os.path.dirname(jaxlib.__file__))\nprint(repr(b.debug_options))\n")
    out = subprocess.run([python, "-c", code], env=_env("", pythonpath), check=True,
                         capture_output=True, text=True).stdout
    root, _, text = out.partition("\n")
    msg = None
    for path in sorted(Path(root).rglob("*.so*"), key=lambda p: -p.stat().st_size):
        if path.is_file() and path.stat().st_size > 1_000_000:
            msg = debug_options_descriptor(path.read_bytes())
            if msg is not None:
                break
    if msg is None:
        raise RuntimeError(f"no xla.DebugOptions descriptor in the libraries under {root}")
    enums = {e.name: tuple(v.name for v in e.value) for e in msg.enum_type}
    maps = {n.name for n in msg.nested_type if n.options.map_entry}
    printed: dict[str, list[str]] = {}
    for line in text.splitlines():  # the default DebugOptions in text format (top level)
        m = re.match(r"^(\w+): (.*)$", line)
        if m:
            value = m.group(2)
            if value.startswith('"'):
                value = value[1:-1].encode().decode("unicode_escape")
            printed.setdefault(m.group(1), []).append(value)
    out_entries: dict[str, Entry] = {}
    for f in msg.field:
        repeated = f.label == 3
        enum = enums.get(f.type_name.rsplit(".", 1)[-1], ()) if f.type == 14 else ()
        kind = _KINDS.get(f.type, "int" if f.type in (3, 4, 5, 6, 7, 13, 15, 16, 17, 18)
                          else "?")
        if f.type == 11 and f.type_name.rsplit(".", 1)[-1] in maps:
            kind = "map"
        elif repeated:
            kind += "_list"
        if f.name in printed:
            default = ",".join(printed[f.name])
        elif kind == "map":
            default = None
        else:  # proto3 prints no field at its zero value
            default = {"bool": "false", "int": "0", "float": "0", "enum": enum[0] if enum
                       else None}.get(kind, "")
        out_entries[f.name] = Entry(f.name, kind, enum, default)
    return out_entries


def usage(python: str, pythonpath: list[str]) -> str:
    """XLA's own flag listing (`--name=default<TAB>type<TAB>help` per flag), whole.

    XLA prints it when a value does not parse (`Flag parsing failed.` then `usage: ...
    Flags:`), but absl cuts a log message at about 15 kB. The whole text is still in the
    process's memory when it exits: gdb stops the process at its exit_group system call and
    writes a core file, and the longest listing in it is the whole one. Needs gdb."""
    with tempfile.TemporaryDirectory(prefix="pgle-usage-") as tmp:
        core = os.path.join(tmp, "core")
        env = _env("--xla_gpu_autotune_level=not-a-number", pythonpath)
        subprocess.run(["gdb", "-batch", "-q", "-ex", "set pagination off", "-ex",
                        "catch syscall exit_group", "-ex", "run", "-ex",
                        f"generate-core-file {core}", "--args", python, "-c", _CHILD],
                       cwd=tmp, env=env, capture_output=True, timeout=600, check=False)
        data = Path(core).read_bytes()
    best = b""
    for m in re.finditer(rb"usage: [^\n]*\nFlags:\n", data):
        end = data.find(b"\0", m.start())
        if end - m.start() > len(best):
            best = data[m.start():end]
    text = best.decode("utf-8", "replace")
    return text[text.index("Flags:\n") + len("Flags:\n"):] if text else ""


def write_inventory(out_dir: str | Path, target: tuple[str, list[str]], names: set[str],
                    hints: set[str], known: set[str] | None = None,
                    deprecated: dict[str, str] | None = None,
                    header: list[str] | None = None) -> Path:
    """Ask one target about `names` (unless `known` is given); write
    <out_dir>/<jaxlib version>.txt."""
    python, pythonpath = target
    t0 = time.time()
    runs = 0
    if known is None:
        prober = Prober(python, pythonpath, hints)
        known = prober.accepted(sorted(names))
        deprecated, runs = prober.deprecated, prober.runs
    fields = describe(python, pythonpath)
    jaxlib, pyver = versions_of(python, pythonpath)
    out = Path(out_dir) / f"{jaxlib}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = header or [
        (f"# XLA_FLAGS names jaxlib {jaxlib} accepts (Python {pyver}), asked of it by "
         f"tests/xla_gpu/flag_inventory.py on {time.strftime('%Y-%m-%d')}"),
        (f"# {len(known)} of {len(names)} candidate names; {runs} probe runs"
         + (f"; jax/jaxlib from {' '.join(pythonpath)}" if pythonpath else ""))]
    lines = [ln for ln in lines if not ln.startswith("# columns")] + [
             ("# columns (tab-separated): name, kind, enum values, default (XLA's default "
              "DebugOptions; - unknown), XLA's deprecation warning")]
    for name in sorted(known):
        entry = dataclasses.replace(fields.get(name, Entry(name)), name=name,
                                    note=(deprecated or {}).get(name, ""))
        if entry.default is None:
            entry = dataclasses.replace(entry, default="-")
        lines.append(entry.line())
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(known)} names, {runs} runs, {time.time() - t0:.0f} s", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", required=True, metavar="PYTHON[:PATH]",
                    help="an interpreter, with a directory holding jax/jaxlib to put first")
    ap.add_argument("--also", action="append", default=[], metavar="FILE")
    ap.add_argument("--out", required=True)
    ap.add_argument("--usage", action="store_true",
                    help="also write DIR/<version>.usage.txt: XLA's own flag listing (gdb)")
    ap.add_argument("--describe-only", action="store_true",
                    help="keep the names of DIR/<version>.txt; only describe them again")
    args = ap.parse_args()
    targets = [(t.split(":", 1)[0], t.split(":", 1)[1:]) for t in args.target]
    names: set[str] = set()
    for f in args.also:
        names |= set(read_inventory(f))
    if args.usage:
        for target in targets:
            out = Path(args.out) / f"{versions_of(*target)[0]}.usage.txt"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(usage(*target))
    if args.describe_only:
        for target in targets:
            path = Path(args.out) / f"{versions_of(*target)[0]}.txt"
            old = read_inventory(path)
            header = [ln for ln in path.read_text().splitlines() if ln.startswith("#")]
            write_inventory(args.out, target, names, set(), known=set(old),
                            deprecated={n: e.note for n, e in old.items() if e.note},
                            header=header)
        return 0
    for python, pythonpath in targets:  # every target is asked about every name
        names |= candidates(pythonpath, python)
    hints: set[str] = set()
    for target in targets:
        write_inventory(args.out, target, names, hints)
    return 0


if __name__ == "__main__":
    sys.exit(main())
