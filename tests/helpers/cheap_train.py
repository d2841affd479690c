"""examples/train.py as a test copy that costs half the CPU per run (issue 37: the suite's CPU).

Most of a small train.py run on CPU is XLA:CPU compiling its ~27 jitted functions (the step,
jax.random's threefry kernels, ...), and most of that is LLVM optimizing the generated code:
with `--xla_backend_optimization_level=0` appended to XLA_FLAGS (by the script, before jax
starts, as it already appends the emulated device count) a run takes ~5 s of CPU instead of
~10 s (jax 0.10.2, 2 emulated devices). The HLO, its module and instruction names, the step
markers and everything pgle reads are the same; only the machine code is less optimized,
which no CPU test times against a bound. The smaller model (`small=True`) changes only
defaults: options given on the command line win.
"""

from __future__ import annotations

from pathlib import Path

from helpers.pgle_testing import EXAMPLES

OPT_FLAG = "--xla_backend_optimization_level=0"

_SMALL = (("default=128", "default=16"), ("default=256", "default=32"),
          ('"--seq", type=int, default=32', '"--seq", type=int, default=8'))


def cheap_train_source(*, small: bool = False, devices: int | None = None) -> str:
    src = (EXAMPLES / "train.py").read_text()
    edits = list(_SMALL) if small else []
    if devices is not None:
        edits.append(('"--devices", type=int, default=8', f'"--devices", type=int, default={devices}'))
    old = "    emulate_cpu_devices(args.devices)\n"
    edits.append((old, old + "    # A test copy: LLVM at -O0 (tests/helpers/cheap_train.py).\n"
                        "    os.environ[\"XLA_FLAGS\"] = (os.environ.get(\"XLA_FLAGS\", \"\") + "
                        f"\" {OPT_FLAG}\").strip()\n"))
    for before, after in edits:
        assert before in src, before  # examples/train.py changed: update this copy
        src = src.replace(before, after, 1)
    return src


def write_cheap_train(folder: Path, name: str = "train.py", *, small: bool = False,
                      devices: int | None = None) -> Path:
    path = folder / name
    path.write_text(cheap_train_source(small=small, devices=devices))
    return path
