"""Which mutated functions a test reaches through its subprocesses (the mutation run only).

mutmut 3 maps each test to the functions it calls by recording trampoline hits in the test
process; a function reached only in a `python -m pgle` subprocess, or in the workload under it
(the whole harness: `pgle.launch.harness`, `handoff`, `jax_internals`), maps to no test, and
mutmut then counts its mutants "no tests", survivors that no test ever ran. In the stats run a
subprocess appends each function it reaches to the file `PGLE_MUTATION_HITS` names (one line per
name, its first hit only; O_APPEND, so the processes of one test write side by side), and the
test process adds the file's names to the hits of the test that just ran (tests/conftest.py),
so mutmut runs that test on those mutants. Checked against mutmut 3.8.1 (trampoline's
`record_trampoline_hit` name, `state()._stats`)."""

from __future__ import annotations

import os
import sys

ENV = "PGLE_MUTATION_HITS"


def record_into(path: str) -> None:
    """In a subprocess of the stats run: the trampolines' hits go to `path` (mutmut's own
    recorder needs the configuration only mutmut's process loaded)."""
    import mutmut.mutation.trampoline as trampoline

    seen: set[str] = set()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC

    def opened() -> tuple[int, tuple[int, int]] | None:
        try:
            fd = os.open(path, flags, 0o600)
        except OSError:
            return None
        st = os.fstat(fd)
        return fd, (st.st_dev, st.st_ino)

    # Opened now, while the process is still the test's user: a subprocess may drop to another
    # user (os.setuid) and then cannot open the file; the descriptor is used only while it is
    # still this file (a process may close its descriptors and reuse the number). A hit that
    # cannot be written is lost (at worst a "no tests" survivor), never the subprocess's run.
    first = opened()

    as_main = runs_harness_as_main()

    def hit(name: str, caller: str | None = None) -> None:
        if as_main and name.startswith(_MAIN):
            name = HARNESS + name[len(_MAIN):]
        if name in seen:
            return
        seen.add(name)
        try:
            if first is not None:
                st = os.fstat(first[0])
                if (st.st_dev, st.st_ino) == first[1]:
                    os.write(first[0], (name + "\n").encode())
                    return
        except OSError:
            pass
        if (now := opened()) is not None:
            try:
                os.write(now[0], (name + "\n").encode())
            except OSError:
                pass
            finally:
                os.close(now[0])

    trampoline.record_trampoline_hit = hit  # type: ignore[assignment]


def drain(path: str) -> set[str]:
    """In the test process: the names written since the last drain (the file emptied)."""
    try:
        with open(path, "r+") as f:
            names = set(f.read().split())
            f.truncate(0)
    except FileNotFoundError:
        return set()
    return names


# `pgle run script.py` starts the workload as `python .../pgle/launch/harness.py --spec ...`
# (pgle.launch.execution): the harness is `__main__` there, so mutmut's trampolines name its
# functions `__main__.xǁHarnessǁstart` and never match the mutant `pgle.launch.harness.xǁ...`
# they would have to run. In that process both names are translated.
HARNESS = "pgle.launch.harness."
_MAIN = "__main__."


def runs_harness_as_main() -> bool:
    argv = getattr(sys, "orig_argv", [])
    return len(argv) > 1 and argv[1].endswith(os.path.join("pgle", "launch", "harness.py"))


def harness_as_main() -> None:
    """The mutant under test, when it is the harness's, named as this process's trampolines
    name it (`__main__.`): the trampoline asks `get_mutant_under_test` at each call."""
    import mutmut.mutation.trampoline as trampoline

    asked = trampoline.get_mutant_under_test

    def translated() -> str:
        name = asked()
        return _MAIN + name[len(HARNESS):] if name.startswith(HARNESS) else name

    trampoline.get_mutant_under_test = translated  # type: ignore[assignment]
