"""The verdict of a log in which XLA read no profile, and --require where no module has a row,
in process (issue 37; pgle/verdicts/pgle_applied.py's log-level rules, pgle/verdicts/require.py):
each sentence a user reads, whole.
"""

from __future__ import annotations

import io

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.xla_log import Evidence, LogScanner, ModuleEvidence
from pgle.report import Report
from pgle.verdicts.pgle_applied import judge
from pgle.verdicts.require import enforce


def _scan(lines: list[str]) -> Evidence:
    return LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))


def test_a_backend_without_pgle():
    v = judge(_scan(["nothing"]), platform="cpu")
    assert (v.status, v.reasons) == ("not_applicable", [
        "backend cpu: PGLE is an XLA:GPU feature, so no module used a profile and none could; "
        "run on an NVIDIA GPU to apply it."])


def test_the_checker_set_without_a_profile():
    line = ("W0822 12:34:56.789012  1 gpu_hlo_schedule.cc:538] xla_gpu_pgle_accuracy_checker is "
            "set to WARN, but no profile path specified")
    v = judge(_scan([line, line]))
    assert (v.status, v.reasons) == ("not_applied", [
        "XLA says the accuracy checker is set but no profile path is "
        '("xla_gpu_pgle_accuracy_checker is set to WARN, but no profile path specified", 2 '
        "times): the profile flag --xla_gpu_pgle_profile_file_or_directory_path did not reach "
        "XLA."])


def test_every_executable_loaded_from_the_cache():
    v = judge(_scan(["nothing"]), loaded_from_cache=[f"jit_{i}" for i in range(6)] + ["jit_0"],
              compiled_anew=0)
    assert (v.status, v.reasons) == ("error", [
        "every executable was loaded from jax's persistent compilation cache (6 modules: jit_0, "
        "jit_1, jit_2, jit_3, jit_4, ...): XLA compiled nothing, so its log cannot show whether "
        "the profile applied; rerun with the cache off (JAX_ENABLE_COMPILATION_CACHE=false) or an "
        "empty cache folder (JAX_COMPILATION_CACHE_DIR)."])
    v = judge(_scan(["nothing"]), loaded_from_cache=["jit_a"], compiled_anew=0)
    assert v.reasons[0].startswith("every executable was loaded from jax's persistent "
                                   "compilation cache (1 module: jit_a): XLA compiled nothing")
    # Something compiled anew: the usual sentence.
    v = judge(_scan(["nothing"]), loaded_from_cache=["jit_a"], compiled_anew=1)
    assert v.reasons[0].startswith("no PGLE line in the log: XLA never read a profile (is the "
                                   "INFO log on, TF_CPP_MIN_LOG_LEVEL=0, and did the profile flag")


def test_modules_whose_fingerprints_alone_were_logged():
    v = judge(Evidence(modules=[ModuleEvidence("jit_a", fingerprint_only=True),
                                ModuleEvidence("jit_b", fingerprint_only=True)]))
    assert (v.status, [m["module"] for m in v.modules]) == ("not_applied", ["jit_a", "jit_b"])
    assert v.reasons == [
        "XLA compiled 2 modules and read no profile for any (only their fingerprints were "
        "logged): did the profile flag reach XLA? jax <= 0.5.3 logs nothing when the profile file "
        "does not exist, jax <= 0.5.x nothing for a directory without the module's file, and jax "
        ">= 0.5.1 ignores a file that is not .pb/.pbtxt silently."]


def test_require_where_no_module_has_a_row():
    r = Report("run", "not_applicable")
    enforce(r, ("jit_a*", "jit_b"))
    line = "--require jit_a*, jit_b: no module used a profile (verdict not_applicable)"
    assert (r.reasons, r.summary, r.exit_code) == ([line], [line], EXIT_NOT_VERIFIED)
