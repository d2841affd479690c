"""What pgle takes the user's words for (pgle.launch.workload): a script the harness runs, a
module, or a command it starts as it is; each refusal in one sentence. Real files in a real
folder (issue 37: the mutation run found nothing that called this in process)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from pgle.errors import BadInput
from pgle.launch.workload import Workload
from pgle.redact import REDACTED


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(module, words) -> BadInput:
    with pytest.raises(BadInput) as e:
        Workload.from_cli(module, words)
    return e.value


def _file(path: Path, text: bytes, mode: int = 0o644) -> Path:
    path.write_bytes(text)
    path.chmod(mode)
    return path


def test_a_module_by_option_or_by_words(here):
    w = Workload.from_cli("json.tool", ["--sort-keys", "a.json"])
    assert (w.script, w.module, w.args, w.command) == (None, "json.tool", ("--sort-keys", "a.json"), ())
    assert Workload.from_cli(None, ["-m", "json", "x"]) == Workload(None, "json", ("x",))
    assert w.argv() == ["json.tool", "--sort-keys", "a.json"]
    assert w.describe() == "-m json.tool --sort-keys a.json"
    # `-m` alone is no module: the word is taken as a program or file (none here).
    with pytest.raises(BadInput, match="-m is neither a file nor a program on PATH"):
        Workload.from_cli(None, ["-m"])


def test_a_module_is_looked_for_where_python_dash_m_looks(here):
    assert _refused("a-b", []).message == "-m 'a-b' is not a Python module name."
    assert _refused("1x", []).message == "-m '1x' is not a Python module name."
    with pytest.raises(BadInput) as e:
        Workload.from_cli("nosuchmod_pgle.sub", [])
    assert e.value.message == "no module named 'nosuchmod_pgle' (for -m nosuchmod_pgle.sub)."
    assert e.value.hint == "Run pgle from the folder where `python -m` finds it."
    (here / "mypkg_pgle").mkdir()
    assert Workload.from_cli("mypkg_pgle.train", []).module == "mypkg_pgle.train"
    (here / "single_pgle.py").write_text("")
    assert Workload.from_cli("single_pgle", ["1"]).args == ("1",)


def test_no_words_and_missing_files_are_one_sentence_each(here):
    with pytest.raises(BadInput) as e:
        Workload.from_cli(None, [])
    assert e.value.message == "no workload given." and "pgle COMMAND [OPTIONS] SCRIPT" in e.value.hint
    assert _refused(None, ["train.py"]).message == 'script train.py does not exist.'
    assert _refused(None, ["sub/train"]).message == 'script sub/train does not exist.'
    assert _refused(None, ["nosuchprog_pgle"]).message == (
        "nosuchprog_pgle is neither a file nor a program on PATH.")
    (here / "folder").mkdir()
    assert _refused(None, ["folder"]).message == 'script folder is not a file.'


def test_a_program_on_path_is_a_command(here):
    w = Workload.from_cli(None, ["bash", "run.sh", "--token", "abc"])
    assert (w.script, w.module, w.command, w.args) == (
        None, None, ("bash", "run.sh", "--token", "abc"), ("run.sh", "--token", "abc"))
    assert w.argv() == ["bash", "run.sh", "--token", "abc"]
    assert w.describe() == f"bash run.sh --token '{REDACTED}'"  # quoted as a shell word
    spaced = Workload(None, None, ("a b",), ("echo", "a b"))
    assert spaced.describe() == "echo 'a b'"


def test_python_scripts_are_scripts_whatever_their_name(here):
    plain = _file(here / "train.py", b"print(1)\n")
    w = Workload.from_cli(None, ["train.py", "--steps", "3", "--api-key=k"])
    assert (w.script, w.module, w.command) == (str(plain), None, ())
    assert w.args == ("--steps", "3", "--api-key=k")
    assert w.argv() == [str(plain), "--steps", "3", "--api-key=k"]
    assert w.describe() == f"{plain} --steps 3 --api-key={REDACTED}"
    for shebang in (b"#!/usr/bin/python3\n", b"#!/usr/bin/env python3\n",
                    b"#!/usr/bin/env -S python3 -u\n", b"#!\n"):
        f = _file(here / "tool", shebang + b"print(1)\n", 0o755)
        assert Workload.from_cli(None, ["tool"]) == Workload(str(f), None, ())
    noext = _file(here / "noext", b"print(2)\n")  # no shebang, no suffix: Python
    assert Workload.from_cli(None, ["noext"]).script == str(noext)


def test_shell_scripts_and_programs_are_commands(here):
    exe = _file(here / "run", b"#!/bin/bash\necho hi\n", 0o755)
    assert Workload.from_cli(None, ["run", "a"]).command == (str(exe), "a")
    plain = _file(here / "run2", b"#!/bin/bash -e\necho hi\n")
    assert Workload.from_cli(None, ["run2", "a"]).command == ("/bin/bash", "-e", str(plain), "a")
    sh = _file(here / "job.sh", b"echo hi\n")
    assert Workload.from_cli(None, ["job.sh"]).command == ("sh", str(sh))
    sh.chmod(0o755)
    assert Workload.from_cli(None, ["job.sh"]).command == (str(sh),)
    for suffix in (".bash", ".zsh", ".ksh"):
        f = _file(here / f"job{suffix}", b"echo hi\n")
        assert Workload.from_cli(None, [f"job{suffix}"]).command == ("sh", str(f))
    elf = here / "prog"
    shutil.copyfile(os.path.realpath(sys.executable), elf)
    elf.chmod(0o644)
    with pytest.raises(BadInput) as e:
        Workload.from_cli(None, ["prog"])
    assert e.value.message == f"{elf} is a program but not executable."
    assert e.value.hint == f"chmod +x {elf}"
    elf.chmod(0o755)
    assert Workload.from_cli(None, ["prog", "-V"]).command == (str(elf), "-V")


def test_the_words_edges_and_the_usage_hint(here):
    assert Workload.from_cli(None, ["-m", "json"]) == Workload(None, "json", ())
    e = _refused(None, [])
    assert e.hint == ("Usage: pgle COMMAND [OPTIONS] SCRIPT [-- ARGS], or pgle COMMAND "
                      "[OPTIONS] -- PROGRAM [ARGS] (bash run.sh, python -m pkg, torchrun ...).")
    bare = Workload(None, None, ("a",))
    assert bare.argv() == ["", "a"] and bare.describe() == " a"
    exe = _file(here / "run", b"#!/bin/sh\n", 0o755)
    assert Workload.from_cli(None, ["run", "x", "y"]).args == ("x", "y")
    assert Workload.from_cli(None, ["run"]).command == (str(exe),)


def test_a_shebang_is_read_as_the_kernel_reads_it(here):
    # Bytes that are not UTF-8 in the line: replaced, never an error.
    odd = _file(here / "odd", b"#!/bin/sh -\xff\xfe\necho\n", 0o755)
    assert Workload.from_cli(None, ["odd"]).command == (str(odd),)
    # The kernel reads 256 bytes of it (BINPRM_BUF_SIZE): a `python` past them is not seen.
    head = b"#!/bin/sh".ljust(251) + b"python3\n"
    cut = _file(here / "cut", head + b"echo\n")
    assert Workload.from_cli(None, ["cut"]).command == ("/bin/sh", "pytho", str(cut))
