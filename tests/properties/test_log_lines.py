"""The log parsers on generated lines (issue 37): XLA's prefixes of every jax era (tsl before
jax 0.7.2, with and without TF_CPP_LOG_THREAD_ID; absl since; absl's zero date before absl is
initialised), `srun --label` rank prefixes (ranks >= 10 included), thread ids, and module names
with every character XLA and JAX put in them (`jit_` + the function's name, `.` and `-` included:
`jit_f-clone`, `jit_step.1`). Real lines: tests/data/xla_gpu/<jax>/ and
/work/shared/reference/xla-gpu-deviceless.md."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from pgle.evidence import jax_log, logscan
from pgle.evidence.xla_log import LogScanner

ranks = st.none() | st.integers(0, 9) | st.integers(10, 100_000)
threads = st.integers(1, 2**31 - 1).map(str)
linenos = st.integers(1, 99_999)
eras = st.sampled_from(["tsl", "tsl+tid", "absl", "absl-zero"])
# Module names: JAX's prefix, then a name of the characters XLA keeps (letters, digits, `_`,
# `.`, `-`), as the compiler's clones and renames give them.
_NAME_CHARS = string.ascii_letters + string.digits + "_.-"
modules = st.builds(
    lambda head, body: head + body,
    st.sampled_from(["jit_", "pjit_", "pmap_", "shard_map_", "jit__"]),
    st.text(_NAME_CHARS, min_size=1, max_size=30).filter(lambda s: not s.endswith(("(", ")"))),
)
messages = st.text(string.printable.replace("\n", "").replace("\r", "").replace("\x0b", "")
                   .replace("\x0c", ""), max_size=80)
fingerprints = st.text("0123456789abcdef", min_size=32, max_size=32)


def prefix(era: str, sev: str, tid: str, file: str, lineno: int, rank: int | None) -> str:
    head = f"{rank}: " if rank is not None else ""
    if era == "tsl":
        return f"{head}2023-07-21 16:09:43.551741: {sev} external/xla/xla/service/gpu/{file}:{lineno}] "
    if era == "tsl+tid":
        return f"{head}2023-07-21 16:09:43.551741: {sev} {tid} external/xla/xla/service/gpu/{file}:{lineno}] "
    if era == "absl":
        return f"{head}{sev}1125 15:57:26.205135   {tid} {file}:{lineno}] "
    return f"{head}{sev}0000 00:00:1732377600.123456  {tid} {file}:{lineno}] "


@given(eras, st.sampled_from("IWEF"), threads, linenos, ranks, messages,
       st.sampled_from(["gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc",
                        "convert_async_collectives_to_sync.cc", "se_gpu_pjrt_compiler.cc"]),
       st.sampled_from([b"\n", b"\r\n", b""]))
def test_every_prefix_era_splits_into_its_fields(era, sev, tid, lineno, rank, msg, file, end):
    line = (prefix(era, sev, tid, file, lineno, rank) + msg).encode() + end
    got = logscan.parse_prefix(line)
    assert got is not None, line
    assert got.severity == sev
    assert got.rank == rank
    assert got.thread == (None if era == "tsl" else tid)
    assert got.file == file and got.lineno == lineno
    assert got.message == msg
    assert got.absl == era.startswith("absl")


@given(eras, threads, linenos, messages, st.text(string.ascii_letters + " %|#=.", max_size=40))
def test_a_prefix_after_progress_text_without_a_newline_is_found(era, tid, lineno, msg, junk):
    line = (junk + "\r" + prefix(era, "I", tid, "gpu_hlo_schedule.cc", lineno, None) + msg).encode()
    got = logscan.parse_prefix(line)
    assert got is not None and got.lineno == lineno and got.message == msg


def _block(era: str, tid: str, rank: int | None, module: str, fp: str, missing: list[str]) -> list[bytes]:
    def ln(sev, file, lineno, msg):
        return (prefix(era, sev, tid, file, lineno, rank) + msg + "\n").encode()

    out = [
        ln("I", "gpu_hlo_schedule.cc", 466, f"Fingerprint before LHS for module {module}(7) = {fp}"),
        ln("I", "gpu_hlo_schedule.cc", 377, "Using PGLE profile from /p/profile.pbtxt"),
        ln("I", "gpu_hlo_schedule.cc", 522,
           f"Found profile for module {module}, using profile guided latency estimator"),
    ]
    if missing:
        out.append(ln("W", "profile_guided_latency_estimator.cc", 192, "Found 3 instructions from the profile."))
        out.append(ln("W", "profile_guided_latency_estimator.cc", 194,
                      f"Missing {len(missing)} instructions from the profile."))
        out += [ln("W", "profile_guided_latency_estimator.cc", 197, f"  {n}") for n in missing]
    return out


instructions = st.lists(st.text(_NAME_CHARS, min_size=1, max_size=20), max_size=4, unique=True)


@given(st.sampled_from(["tsl+tid", "absl", "absl-zero"]), threads, modules, fingerprints,
       instructions, ranks)
def test_a_module_keeps_its_name_fingerprint_rank_and_thread(era, tid, module, fp, missing, rank):
    ev = LogScanner().feed_lines(_block(era, tid, rank, module, fp, missing))
    (m,) = ev.modules
    assert (m.module, m.fingerprint, m.rank, m.thread, m.module_id) == (module, fp, rank, tid, 7)
    assert m.found_profile
    if missing:
        assert (m.checker_found, m.checker_missing, m.missing_names) == (3, len(missing), missing)


@given(st.sampled_from(["tsl+tid", "absl"]), st.lists(st.integers(0, 40), min_size=2, max_size=5,
                                                       unique=True), modules, fingerprints, instructions)
def test_interleaved_ranks_under_srun_label_keep_their_own_modules(era, rank_list, module, fp, missing):
    """`srun --label` interleaves the ranks' lines; each rank's module is its own (ranks >= 10
    included), its checker block its own."""
    blocks = [_block(era, "4242", r, module, fp, missing) for r in rank_list]
    lines = [b[i] for i in range(max(map(len, blocks))) for b in blocks if i < len(b)]
    ev = LogScanner().feed_lines(lines)
    assert sorted(m.rank for m in ev.modules) == sorted(rank_list)
    for m in ev.modules:
        assert m.module == module and m.fingerprint == fp
        if missing:
            assert m.missing_names == missing


@given(modules, st.text("0123456789abcdef", min_size=64, max_size=64))
def test_jax_cache_lines_keep_the_module_and_its_key(module, digest):
    key = f"{module}-{digest}"
    for message, kind in (
        (f"Persistent compilation cache hit for '{module}' with key '{key}'", jax_log.KIND_CACHE_HIT),
        (f"PERSISTENT COMPILATION CACHE MISS for '{module}' with key '{key}'", jax_log.KIND_CACHE_MISS),
        (f"Writing {module} to persistent compilation cache with key '{key}'", jax_log.KIND_CACHE_WRITE),
    ):
        ev = jax_log.classify_log(message)
        assert ev is not None and (ev.kind, ev.module, ev.key) == (kind, module, key), message
    assert jax_log.module_of_key(key) == module
    ev = jax_log.classify_log(f"Compiling module {module} with FDO profile of length 123")
    assert ev is not None and (ev.module, ev.value) == (module, 123)
    ev = jax_log.classify_log(
        f"Not writing persistent cache entry with key '{key}' since its size (10 bytes) is less "
        "than threshold (20 bytes)")
    assert ev is not None and ev.module == module and ev.value == 10
    ev = jax_log.classify_warning(
        f"PERSISTENT CACHE WRITE with key {key}, this is unexpected because "
        "JAX_COMPILATION_CACHE_EXPECT_PGLE is set")
    assert ev is not None and (ev.module, ev.key) == (module, key)


@given(st.sampled_from(["absl", "tsl+tid"]), modules, fingerprints, instructions)
def test_the_last_line_without_a_newline_is_read_from_a_file(tmp_path_factory, era, module, fp,
                                                             missing):
    """A log ending without its newline (a killed workload) still gives its last line."""
    lines = _block(era, "77", None, module, fp, missing or ["x"])
    path = tmp_path_factory.mktemp("log") / "xla.log"
    path.write_bytes(b"".join(lines)[:-1])  # the last line's newline gone
    ev = LogScanner().scan_file(path)
    (m,) = ev.modules
    assert m.missing_names == (missing or ["x"])
