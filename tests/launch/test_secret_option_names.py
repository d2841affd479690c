"""A workload option whose name holds a secret word anywhere (`--githubtoken=...`,
`--mysecretvalue ...`, `--aws_access_key_id ...`) has its value redacted in everything pgle
writes: the run folder's spec, the report (issue 37's independent mutants: only whole words
of the name were looked at)."""

from __future__ import annotations

import json

from helpers.pgle_testing import report_of, run_pgle, write_profile

SECRETS = ("ghp_t0ken", "s3cretval", "AKIAEXAMPLE")


def test_options_naming_a_secret_inside_a_word_are_redacted(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "w.py"
    script.write_text("import sys\nprint(len(sys.argv))\n")
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(script), "--",
                    f"--githubtoken={SECRETS[0]}", "--mysecretvalue", SECRETS[1],
                    "--aws_access_key_id", SECRETS[2], "--keep", "3", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    written = [proc.stdout, proc.stderr] + [p.read_bytes() for p in (project / "r").rglob("*")
                                            if p.is_file() and p.name != "workload.log"]
    for data in written:
        for secret in SECRETS:
            assert secret.encode() not in data, (secret, data[:2000])
    spec = json.loads((project / "r" / "spec.json").read_text())
    assert json.dumps(spec).count("<redacted>") >= 3
    assert "--keep" in json.dumps(report_of(proc)) or "--keep" in json.dumps(spec)


def test_only_the_secret_is_redacted_never_its_neighbours(project):
    # `--token=x` carries its own value: the next argument is the workload's, kept; an XLA
    # flag is never a secret, though `pass` is a word of `--xla_dump_hlo_pass_re`.
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "w.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    args = ["--token=t0k", "data/train", "--xla_dump_hlo_pass_re=fusion", "--password", "pw"]
    proc = run_pgle("run", "--profile", "p.pb", "--run-dir", "r", str(script), "--", *args,
                    cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    spec = json.loads((project / "r" / "spec.json").read_text())
    assert spec["workload"]["args"] == ["--token=<redacted>", "data/train",
                                        "--xla_dump_hlo_pass_re=fusion", "--password",
                                        "<redacted>"]
