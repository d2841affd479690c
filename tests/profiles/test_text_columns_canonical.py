"""The canonical text reader (pgle.profiles.canonical.text_columns, issue 25): text
profiles whose every entry has a name and a cost, read from their newlines with numbers
converted from their digits. Checked against protobuf's own text parser, value by value and
bit by bit; every other layout steps aside (None) and is read by the general path, with the
same merged bytes whichever path reads it."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest
from helpers.pgle_testing import run_pgle

from pgle.profiles import canonical, columns
from pgle.profiles.files import Profile, parse_profile, read_profile, write_profile
from pgle.profiles.proto import message_class

NAMES = ["fusion.1", "all-gather-start.2.remat2", "a b", "x::y", "loop_add_fusion.7", "o(k)",
         "custom-call.12", "z" * 300]


def protobuf_costs(data: bytes) -> list[tuple[str, float]]:
    from google.protobuf import text_format

    msg = message_class()()
    text_format.Parse(data.decode(), msg)
    return [(c.name, c.cost_us) for c in msg.costs]


def text_of(costs: list[tuple[str, float]]) -> bytes:
    from google.protobuf import text_format

    msg = message_class()()
    for name, cost in costs:
        msg.costs.add(name=name, cost_us=cost)
    return text_format.MessageToString(msg).encode()


def same(got, expected: list[tuple[str, float]]) -> None:
    names, costs = got
    assert [n.decode() for n in names.tolist()] == [n for n, _ in expected]
    bits = [struct.pack("<d", c) for _, c in expected]
    assert [struct.pack("<d", c) for c in costs.tolist()] == bits


def random_double(rng: random.Random) -> float:
    kind = rng.randrange(9)
    if kind == 0:  # any bit pattern: every exponent, subnormals
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        return value if not math.isnan(value) and value not in (0.0, float("inf"), -float("inf")) else 1.0
    if kind == 1:  # what pgle's converter writes: picoseconds / 1e3 / 1e3
        return rng.randrange(1, 10**9) / 1e3 / 1e3
    if kind == 2:
        return rng.lognormvariate(2, 3)
    if kind == 3:  # 17-19 significant digits around 2**53 (the long-double path and its ties)
        return float(rng.randrange(2**52, 2**56)) / 10 ** rng.randrange(0, 6)
    if kind == 4:
        return float(rng.randrange(1, 10**6))
    if kind == 5:
        return rng.choice([5e-324, 1e-9, 1e300, 1.7976931348623157e308, 2.2250738585072014e-308,
                           0.1, 0.3, 1e22, 1e23, 9007199254740993.0, float("inf"),
                           -float("inf"), float("nan")])
    if kind == 6:
        return -rng.random() * 10 ** rng.randrange(-5, 20)
    if kind == 7:
        return rng.random() * 10 ** rng.randrange(-5, 5)
    return rng.uniform(0, 1000)


def test_equal_to_protobuf_on_every_kind_of_double():
    rng = random.Random(3)
    for _ in range(300):
        costs = [(rng.choice(NAMES), random_double(rng)) for _ in range(rng.randrange(1, 60))]
        data = text_of(costs)
        got = canonical.text_columns(data)
        assert got is not None, data[:200]
        expected = protobuf_costs(data)
        names, values = got
        assert [n.decode() for n in names.tolist()] == [n for n, _ in expected]
        for v, (_, c) in zip(values.tolist(), expected):
            assert struct.pack("<d", v) == struct.pack("<d", c) or (math.isnan(v) and math.isnan(c)), (v, c)


@pytest.mark.parametrize("text", [
    # Decimal forms beyond repr's own: more digits than a double holds, ties between two
    # doubles (round half to even), integers past 2**53, the largest exact powers of ten.
    "9007199254740993", "9007199254740993.0", "9007199254740995", "9007199254740993.1",
    "900719925474099.25", "18014398509481987", "1.00000000000000011102230246251565",
    "0.1000000000000000055511151231257827", "1234567890123456789", "9999999999999999999",
    "18446744073709551615", "18446744073709551616", "0.000000000000000000001",
    "10000000000000000000000", "1000000000000000000000.5", "4.9406564584124654e-324",
    "179769313486231570000000", "0.30000000000000004", "123.456e+10", "5e-05", "-0.0", "0",
    "0.0", "-12.5", "inf", "-inf", "1.7976931348623157e+308", "2.2250738585072014e-308",
])
def test_decimal_forms_read_as_float_reads_them(tmp_path, text):
    data = b'costs {\n  name: "n"\n  cost_us: ' + text.encode() + b"\n}\n"
    got = canonical.text_columns(data)
    if len(text) > 24:
        assert got is None  # the general path's
        (tmp_path / "p.pbtxt").write_bytes(data)
        cols = columns.read_file_columns(tmp_path / "p.pbtxt")
        same((cols.names, cols.costs), protobuf_costs(data))
        return
    assert got is not None
    same(got, protobuf_costs(data))
    assert struct.pack("<d", got[1][0]) == struct.pack("<d", float(text))


def test_ties_take_python_float():
    """Mantissas between 2**53 and 2**64 whose long-double quotient lands on a tie: the whole
    range of last digits around many powers of two."""
    texts = []
    for e in range(53, 64):
        for delta in range(-3, 4):
            texts.append(str(2**e + delta))
            texts.append(f"{2**e + delta}.5")
            texts.append(str(2**e + delta * 2 ** (e - 52) // 2))
    # Not ties, but their quotient rounded to long double's 64 bits is one: rounding that to a
    # double goes the wrong way (found by a search with exact fractions).
    texts += ["844422.0071031966363", "757954.6449858996202", "583382.4560729917721"]
    data = b"".join(b'costs {\n  name: "n"\n  cost_us: ' + t.encode() + b"\n}\n"
                    for t in texts if len(t) <= 24)
    got = canonical.text_columns(data)
    assert got is not None
    same(got, protobuf_costs(data))


def test_plain_decimals_need_no_per_number_python(monkeypatch):
    """What pgle's converter writes (repr of a positive double without an exponent) is
    converted in numpy; only signs, exponents, inf/nan and ties go through float() one by one
    (a regression there would stay correct but slow)."""
    rng = random.Random(4)
    costs = [(f"fusion.{i}", rng.randrange(1, 10**9) / 1e3 / 1e3) for i in range(3000)]
    costs += [(f"x.{i}", rng.lognormvariate(2, 2)) for i in range(3000)]
    costs = [(n, c) for n, c in costs if "e" not in repr(c)]
    seen = []

    class Counting:
        def fullmatch(self, text):
            seen.append(text)
            return columns_number.fullmatch(text)

    columns_number = canonical._NUMBER
    monkeypatch.setattr(canonical, "_NUMBER", Counting())
    got = canonical.text_columns(text_of(costs))
    assert got is not None
    same(got, costs)
    assert len(seen) <= len(costs) // 1000, seen[:5]
    monkeypatch.undo()
    got = canonical.text_columns(text_of([("a", -1.5), ("b", 1e-7), ("c", 2.5)]))
    same(got, [("a", -1.5), ("b", 1e-7), ("c", 2.5)])


def test_layouts_it_does_not_take_are_read_by_the_general_path(tmp_path):
    """Hand-edited but valid text: each is None here, and `read_file_columns` gives protobuf's
    reading of it."""
    valid = [
        b'# a comment\ncosts {\n  name: "x"\n  cost_us: 1.5\n}\n',
        b'costs {\n  cost_us: 1.5\n  name: "x"\n}\n',  # fields in another order
        b'costs { name: "x" cost_us: 1.5 }\n',  # one line
        b'costs {\n  name: "x"\n  cost_us: 1.5\n}',  # no final newline
        b'costs {\n  name: "t\\tab"\n  cost_us: 1.5\n}\n',  # an escape
        b'costs {\n  name: "q\\\'uote"\n  cost_us: 1.5\n}\n',  # text_format escapes quotes
        b'costs {\n  name: "\\303\\274"\n  cost_us: 2\n}\n',  # UTF-8 in octal escapes
        b'costs {\n  name: "x"\n  cost_us: 1E5\n}\n',  # capital exponent
        b'costs {\n  name: "x"\n  cost_us: 1e5\n}\n',  # unsigned exponent
        b'costs {\n  name: "x"\n  cost_us: 1.5f\n}\n',
        b'costs {\n  name: "x"\n  cost_us: .5\n}\n',
        b'costs {\n  name: "x"\n  cost_us: 1.\n}\n',
        b'costs {\n  name: "x"\n  cost_us: Infinity\n}\n',
        b"costs {\n  name: 'x'\n  cost_us: 2.5\n}\n",  # single quotes
        b'costs {\n  name: "x"\n  cost_us: 2.5\n}\n\n',  # a blank line
        b'costs  {\n  name: "x"\n  cost_us: 2.5\n}\n',
        b'costs {\n  name: "x\x00"\n  cost_us: 1.5\n}\n',  # a NUL byte: numpy's bytes drop it
        (b'costs {\n  name: "x"\n  cost_us: 2.5\n}\nlatencies {\n  source: "a"\n  target: "b"\n'
         b'  latency_us: 3\n}\n'),
    ]
    for k, data in enumerate(valid):
        assert canonical.text_columns(data) is None, data
        path = tmp_path / f"v{k}.pbtxt"
        path.write_bytes(data)
        cols = columns.read_file_columns(path)
        profile = parse_profile(data, "text", str(path))
        if profile.latencies or any("\0" in name for name, _ in profile.costs):
            assert cols is None
            continue
        assert cols is not None
        same((cols.names, cols.costs), profile.costs)


@pytest.mark.parametrize("data", [
    b'costs {\n  name: "x"\n}\ncosts {\n  name: "y"\n  cost_us: 2.5\n}\n',  # zero cost left out
    b'costs {\n  cost_us: 2.5\n}\ncosts {\n}\n',  # empty name left out, then both
    b'costs {\n  name: "y"\n  cost_us: 2.5\n}\ncosts {\n  cost_us: -0.0\n}\n',
    # eight lines, a multiple of four, but not four a entry: the classifying reader's
    b'costs {\n  name: "x"\n}\ncosts {\n  cost_us: 2.5\n}\ncosts {\n}\n',
])
def test_entries_without_a_name_or_cost_line_are_read(data):
    """proto3 leaves out an empty name and a +0.0 cost: pgle writes such entries (a real
    profile, tests/data/estimate/pgle-profile.pbtxt, has 16 of 28 without a cost line)."""
    got = canonical.text_columns(data)
    assert got is not None
    expected = protobuf_costs(data)
    assert [n.decode() for n in got[0].tolist()] == [n for n, _ in expected]
    assert [struct.pack("<d", v) for v in got[1].tolist()] == [
        struct.pack("<d", c) for _, c in expected]


def test_a_real_profile_with_zero_costs_is_read_as_columns():
    from pathlib import Path

    data = (Path(__file__).parent.parent / "data/estimate/pgle-profile.pbtxt").read_bytes()
    got = canonical.text_columns(data)
    assert got is not None and got[0].size == 28
    assert list(zip([n.decode() for n in got[0].tolist()], got[1].tolist())) == protobuf_costs(data)


@pytest.mark.parametrize("data", [
    b'costs {\n  name: "x"\n  cost_us: 1.2.3\n}\n',
    b'costs {\n  name: "x"\n  name: "y"\n}\n',
    b'costs {\n  name: "x"\n  cost_us: 00.5\n}\n',  # text_format: an invalid octal float
    b'costs {\n  name: "x"\n  cost_us: 1-2\n}\n',
    b'costs {\n  name: "x"\n  cost_us: --1\n}\n',
    b'costs {\n  name: "x"\n  cost_us: 12a\n}\n',
    b'costs {\n  name: "x"\n  cost_us: \n}\n',
    b'costs {\n  name: "x\n  cost_us: 1.5\n}\n',
    b'costs {\n  name: "x"y"\n  cost_us: 1.5\n}\n',
    b'costs {\n  name: "x"\n  cost_us: 1.5\n]\n',
    b'costs {\n  name: "x"\n  cost_us: 1.5\n}\ncosts {\n',
    b'cost {\n  name: "x"\n  cost_us: 1.5\n}\n',
    b'costs {\n  name: "x"\n  cost_usd: 1.5\n}\n',
    b'costs {\n  name: "\xff"\n  cost_us: 1.5\n}\n',
])
def test_malformed_text_steps_aside_and_is_protobufs_error(tmp_path, data):
    from pgle.errors import ProfileError

    assert canonical.text_columns(data) is None
    path = tmp_path / "bad.pbtxt"
    path.write_bytes(data)
    with pytest.raises(ProfileError) as caught:
        columns.read_file_columns(path)
    assert str(path) in str(caught.value)


def test_a_malformed_rank_is_a_one_line_error_naming_its_file(tmp_path):
    """`pgle merge` of per-module folders where one rank's file is cut mid-number: exit 2 (bad input),
    one line naming that file, nothing written."""
    fp = "ab" * 16
    rng = random.Random(5)
    folders = []
    for k in range(20):
        folder = tmp_path / f"rank-{k:02d}"
        folder.mkdir()
        write_profile(Profile([(f"fusion.{i}", rng.uniform(1, 100)) for i in range(200)]),
                      folder / f"{fp}.pbtxt")
        folders.append(folder)
    broken = folders[13] / f"{fp}.pbtxt"
    broken.write_bytes(broken.read_bytes().replace(b"cost_us: ", b"cost_us: 1.2.", 1))
    r = run_pgle("merge", "-o", str(tmp_path / "out"), *map(str, folders), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.decode().splitlines() if line.strip()]
    assert len(lines) <= 2 and str(broken) in lines[0] and "Traceback" not in r.stderr.decode()
    assert not (tmp_path / "out").exists()


def test_pgle_written_folders_merge_to_the_same_bytes_whichever_path_reads_them(tmp_path,
                                                                                monkeypatch):
    """Per-module text folders as `pgle collect --per-module` writes them (every entry with a
    name and a cost): the canonical reader takes every file, and the merged folder is
    byte-identical to the one merged with it turned off (the general numpy reader) and to the
    general path over protobuf's reading (merge_profiles)."""
    from pgle.commands import profiles as commands
    from pgle.commands.profiles import merge_report

    rng = random.Random(9)
    bases = {"9f" * 16: [f"fusion.{i}" for i in range(400)], "1e" * 16: [f"copy.{i}" for i in range(40)]}
    folders = []
    for k in range(6):
        folder = tmp_path / f"rank-{k}"
        folder.mkdir()
        for fp, base in bases.items():
            costs = [(n if rng.random() > 0.01 else f"{n}.{k}", random_double(rng)) for n in base]
            costs = [(n, c) for n, c in costs if not math.isnan(c)]  # NaN: the general path's
            write_profile(Profile(costs), folder / f"{fp}.pbtxt")
        folders.append(folder)
    taken = []
    real = canonical.text_columns

    def counting(data):
        got = real(data)
        taken.append(got is not None)
        return got

    outputs = {}
    for mode in ("canonical", "protobuf", "general"):
        with monkeypatch.context() as m:
            if mode == "canonical":
                m.setattr(canonical, "text_columns", counting)
            elif mode == "protobuf":
                m.setattr(canonical, "text_columns", lambda data: None)
            else:
                m.setattr(commands, "_merge_columns", lambda *a, **k: None)
            for method in ("percentile", "median", "mean", "min", "max"):
                out = tmp_path / f"{mode}-{method}"
                merge_report(folders, out, method=method, force=True)
                outputs.setdefault(method, []).append(
                    {p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert taken and all(taken)
    for method, results in outputs.items():
        assert results[0] == results[1] == results[2], method
    merged = read_profile(tmp_path / "canonical-percentile" / f"{'9f' * 16}.pbtxt")
    assert merged.instruction_count >= 400


def test_names_keep_every_byte_and_width():
    """Names of every length up to the reader's limit (512), padded per row: each comes back
    exactly, and one longer than the limit steps aside."""
    names = ["", "a", "ab" * 4, "c" * 7, "d" * 8, "e" * 9, "f" * 255, "g" * 512]
    costs = [(n, float(i + 1)) for i, n in enumerate(names) if n]
    got = canonical.text_columns(text_of(costs))
    assert got is not None
    same(got, costs)
    assert canonical.text_columns(text_of([("h" * 513, 1.0)])) is None
    assert np.asarray(got[0]).dtype.kind == "S"


def test_names_cross_from_workers_as_deltas_and_come_back_whole(tmp_path):
    """A worker sends a module's names whole once, then where they differ (pgle.profiles.columns
    `_compact`); the caller rebuilds them (`_whole`), wider names included, per worker."""
    from pgle.profiles.columns import (
        _SENT,
        DirectoryColumns,
        FileColumns,
        _compact,
        _NamesDelta,
        _whole,
    )

    base = np.array([f"fusion.{i}".encode() for i in range(100)])
    renamed = base.copy().astype("S40")
    renamed[[3, 70]] = [b"fusion.3.a-much-longer-name-than-any", b"x"]
    shuffled = base[::-1].copy()
    sent: dict = {}
    _SENT.clear()
    try:
        # (worker, names, sent as a delta): whole first, a delta on them, whole from another
        # worker, whole when most differ (and the reference for the next).
        steps = ((7, base, False), (7, renamed, True), (8, renamed, False), (7, shuffled, False),
                 (7, base, False))
        for worker, names, as_delta in steps:
            cols = FileColumns(tmp_path, names.copy(), np.zeros(names.size))
            folder = DirectoryColumns(tmp_path, {"ab" * 16: cols}, [], [], 0)
            if worker == 8:  # another process: its own names sent, worker 7's kept aside
                kept = dict(_SENT)
                _SENT.clear()
            _compact("ab" * 16, cols)
            assert isinstance(cols.names, _NamesDelta) == as_delta
            if worker == 8:
                _SENT.clear()
                _SENT.update(kept)
            back = _whole(worker, folder, sent)
            assert back.modules["ab" * 16].names.tolist() == names.tolist()
    finally:
        _SENT.clear()


def test_both_line_finders_agree_on_four_line_entries():
    """Files of four-line entries take `_four_line_entries` (issue 35: faster than classifying
    every line); it must find the same lines `_classified_lines` does, and step aside for
    anything else."""
    def finders(data):
        buf = np.frombuffer(data, np.uint8)
        f = canonical._FIELD
        pad = np.zeros(len(data) + 2 * f + canonical._NAME_WIDTH + 8, np.uint8)
        pad[f : f + len(data)] = buf
        words = np.ndarray((len(data) + f + 8,), "<u8", pad, 0, (1,))
        ends = np.flatnonzero(buf == 10)
        return (canonical._four_line_entries(ends, pad, words),
                canonical._classified_lines(ends, pad, words))

    fast, general = finders(text_of([("a", 1.5), ("bb", 2.0), ("c", -3e-5)]))
    assert fast is not None and general is not None
    for x, y in zip(fast[:4], general[:4], strict=True):
        assert x.tolist() == y.tolist()
    assert fast[4:] == general[4:] == (3, None, None)
    fast, general = finders(b'costs {\n  name: "x"\n}\ncosts {\n  cost_us: 2.5\n}\ncosts {\n}\n')
    assert fast is None and general is not None and general[4] == 3
