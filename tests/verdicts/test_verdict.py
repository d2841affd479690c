"""The verdict from XLA log text: every wording and prefix style pgle knows."""

from __future__ import annotations


from helpers.pgle_testing import report_of, run_pgle, write_profile
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import judge, overall_status
from pgle.verdicts.statuses import Applied

FP1, FP2 = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"


def absl(sev, tid, file, msg, rank=None):
    prefix = f"{rank}: " if rank is not None else ""
    return f"{prefix}{sev}0822 12:34:56.789012  {tid} {file}:538] {msg}"


def tsl(sev, file, msg, tid=None):
    t = f" {tid:7d}" if tid is not None else ""
    return f"2023-07-21 16:09:43.551741: {sev}{t} external/xla/xla/service/gpu/{file}:573] {msg}"


def verdict_of(lines, **kw):
    text = "\n".join(lines).encode() + b"\n"
    scanner = LogScanner()
    import io

    return judge(scanner.scan_stream(io.BytesIO(text)), **kw)


def test_the_overall_status_of_the_modules():
    # The rule every verdict shares (one run, a job's ranks, verify's per-rank rows): no module
    # is no evidence of a profile applied, never "all applied".
    assert overall_status([]) == Applied.NOT_APPLIED
    assert overall_status([Applied.APPLIED, Applied.APPLIED]) == Applied.APPLIED
    assert overall_status([Applied.APPLIED, Applied.NOT_APPLIED]) == Applied.PARTIAL
    assert overall_status([Applied.NOT_APPLIED]) == Applied.NOT_APPLIED


def test_single_file_two_threads_interleaved():
    s, p = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
    v = verdict_of([
        absl("I", 1, s, "Using PGLE profile from /p.pb"),
        absl("I", 2, s, "Using PGLE profile from /p.pb"),
        absl("I", 1, s, "Found profile for module jit_a, using profile guided latency estimator"),
        absl("I", 2, s, "Found profile for module jit_b, using profile guided latency estimator"),
        absl("W", 2, p, "Found 3 instructions from the profile."),
        "unrelated output from the workload",
        absl("W", 2, p, "Missing 1 instructions from the profile."),
        absl("I", 1, "other.cc", "something else"),
        absl("W", 2, p, "  fusion.7"),
    ])
    mods = {m["module"]: m for m in v.modules}
    assert mods["jit_a"]["status"] == "applied" and mods["jit_a"]["coverage"] == 1.0
    assert mods["jit_b"]["coverage"] == 0.75 and mods["jit_b"]["status"] == "partial"
    assert mods["jit_b"]["missing_instructions"] == ["fusion.7"]
    assert v.status == "partial"


def test_old_wording_and_old_prefix():
    s = "gpu_hlo_schedule.cc"
    v = verdict_of([
        tsl("I", s, "Using PGLE profile from /tmp/profile.pbtxt"),
        tsl("I", s, "Found profile, using profile guided latency estimator"),
        tsl("I", s, "PGLE profile may not applicable to the module, but will still be used : "
                    "cost name all-gather-start not in module jit_convert_element_type"),
    ])
    # jax <= 0.4.30 names the module and the first profile entry it lacks: the profile was not
    # made for this module (issue 10: a real jax 0.4.25 log read as "applied, 100%").
    assert v.status == "partial"
    assert v.modules[0]["module"] == "jit_convert_element_type"
    assert v.modules[0]["coverage"] is None
    assert "all-gather-start" in v.modules[0]["notes"][0]


def test_old_prefix_with_thread_ids():
    s, p = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
    v = verdict_of([
        tsl("I", s, "Found profile for module jit_a, using profile guided latency estimator", 11),
        tsl("I", s, "Found profile for module jit_b, using profile guided latency estimator", 12),
        tsl("W", p, "Found 0 instructions from the profile.", 11),
        tsl("W", p, "Missing 2 instructions from the profile.", 11),
        tsl("W", p, "  a.1", 11),
        tsl("W", p, "  a.2", 11),
    ])
    mods = {m["module"]: m for m in v.modules}
    assert mods["jit_a"]["status"] == "not_applied" and mods["jit_a"]["coverage"] == 0.0
    assert mods["jit_b"]["status"] == "applied"


def test_directory_mode_with_fingerprints():
    s = "gpu_hlo_schedule.cc"
    v = verdict_of([
        absl("I", 1, s, f"Fingerprint before LHS for module jit_a(3) = {FP1}"),
        absl("E", 1, s, f"PGLE profile file does not exist: /d/{FP1}.pbtxt"),
        absl("I", 1, s, f"Using PGLE profile from /d/{FP1}.pb"),
        absl("I", 1, s, "Found profile for module jit_a, using profile guided latency estimator"),
        absl("I", 2, s, f"Fingerprint before LHS for module jit_b(4) = {FP2}"),
        absl("E", 2, s, f"PGLE profile file does not exist: /d/{FP2}.pbtxt"),
        absl("E", 2, s, f"PGLE profile file does not exist: /d/{FP2}.pb"),
    ])
    mods = {m["module"]: m for m in v.modules}
    assert mods["jit_a"]["fingerprint"] == FP1 and mods["jit_a"]["status"] == "applied"
    assert mods["jit_b"]["fingerprint"] == FP2 and mods["jit_b"]["status"] == "not_applied"
    assert v.status == "partial"


def test_rank_labels_keep_ranks_apart():
    s, p = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
    v = verdict_of([
        absl("I", 1, s, "Found profile for module jit_a, using profile guided latency estimator", 0),
        absl("I", 1, s, "Found profile for module jit_a, using profile guided latency estimator", 1),
        absl("W", 1, p, "Found 1 instructions from the profile.", 1),
        absl("W", 1, p, "Missing 1 instructions from the profile.", 1),
        absl("W", 1, p, "  x", 1),
    ])
    by_rank = {m["rank"]: m for m in v.modules}
    assert by_rank[0]["status"] == "applied" and by_rank[1]["coverage"] == 0.5


def test_fdo_profile_and_parse_errors():
    s = "gpu_hlo_schedule.cc"
    v = verdict_of([absl("I", 1, s, "Using PGLE profile from fdo_profile (binary)"),
                    absl("E", 1, s, "Unable to parse fdo_profile: not a valid text or binary "
                                    "ProfiledInstructionsProto")])
    assert v.status == "error"


def test_no_lines_depends_on_backend():
    assert verdict_of(["hello"], platform="cpu").status == "not_applicable"
    assert verdict_of(["hello"], platform="gpu").status == "not_applied"
    assert verdict_of(["hello"]).status == "not_applied"


def test_checker_off_leaves_coverage_unknown():
    v = verdict_of([absl("I", 1, "gpu_hlo_schedule.cc",
                         "Found profile for module m, using profile guided latency estimator")],
                   accuracy_checker=False)
    assert v.status == "applied" and v.modules[0]["coverage"] is None


def test_line_split_across_read_chunks(monkeypatch):
    import pgle.evidence.xla_log as verdict_module

    monkeypatch.setattr(verdict_module, "CHUNK", 7)
    v = verdict_of([absl("I", 1, "gpu_hlo_schedule.cc",
                         "Found profile for module m, using profile guided latency estimator"),
                    absl("W", 1, "profile_guided_latency_estimator.cc", "Found 1 instructions from the profile."),
                    absl("W", 1, "profile_guided_latency_estimator.cc", "Missing 1 instructions from the profile."),
                    absl("W", 1, "profile_guided_latency_estimator.cc", "  q")])
    assert v.modules[0]["coverage"] == 0.5 and v.modules[0]["missing_instructions"] == ["q"]


def test_verify_command_from_file_and_stdin(project):
    s = "gpu_hlo_schedule.cc"
    log = "\n".join([absl("I", 1, s, f"Using PGLE profile from {project}/p.pb"),
                     absl("I", 1, s, "Found profile for module m, using profile guided latency estimator")])
    (project / "run.log").write_text(log + "\n")
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("verify", "run.log", "--profile", "p.pb", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert report_of(proc)["status"] == "applied"
    assert report_of(proc)["warnings"] == []
    proc = run_pgle("verify", "-", "--backend", "cpu", "--require-applied", "--json", cwd=project,
                    input=b"nothing here\n")
    assert proc.returncode == 3 and report_of(proc)["status"] == "not_applicable"
    proc = run_pgle("verify", "missing.log", cwd=project)
    assert proc.returncode == 2


def test_the_module_line_counts_the_collectives_the_profile_covers():
    # One of a module's 8 collectives missing from the profile reads "covered 7/8" (not the
    # missing count as if it were the covered one); none missing reads "8/8".
    from pgle.verdicts.rows import module_lines

    def row(name, missing):
        return {"module": name, "status": "partial", "coverage": 0.95,
                "instructions_missing": len(missing), "collectives_missing": missing,
                "collectives_total": 8}

    one, none = module_lines([row("jit_a", ["all-reduce.3"])]), module_lines([row("jit_b", [])])
    assert "collectives covered 7/8" in one[0], one
    assert "collectives covered 8/8" in none[0], none
