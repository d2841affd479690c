"""Profiles written by pgle/profiles/canonical.py (issue 16) and read through parse_profile: byte
for byte what protobuf and text_format give, and protobuf's path, with its errors, for anything
else."""

from __future__ import annotations

import math
import random
import struct
import subprocess
import sys

import pytest
from google.protobuf import text_format

from helpers.pgle_testing import pgle_env
from pgle.errors import ProfileError
from pgle.profiles import files
from pgle.profiles.canonical import text_bytes
from pgle.profiles.files import BINARY, TEXT, Profile, encode_profile, parse_profile
from pgle.profiles.proto import message_class
from helpers.pgle_testing import encode_double, encode_varint

ASCII_NAMES = ["", "fusion.1", 'quo"te', "back\\slash", "tab\there", "new\nline", "nul\x00x", "del\x7f",
               "it's", "cr\rx", "a" * 130, "%d{}", "fp0123456789abcdef0123456789abcdef::fusion.3"]
UTF8_NAMES = ["ü-op", "名字.1", "emoji😀", "é" * 70]
FLOATS = [0.0, -0.0, 1.0, -2.5, 1e300, -1e-300, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310,
          1.7976931348623157e308, math.inf, -math.inf, math.nan, 0.1, 1 / 3, 123456789.125, 1e16, 1e-5]


def _message(profile: Profile):
    msg = message_class()()
    for n, c in profile.costs:
        msg.costs.add(name=n, cost_us=c)
    for s, t, v in profile.latencies:
        msg.latencies.add(source=s, target=t, latency_us=v)
    return msg


def _random_profile(seed: int, names: list[str]) -> Profile:
    rng = random.Random(seed)

    def value():
        return rng.choice(FLOATS) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)

    costs = [(rng.choice(names) + (f".{i}" if rng.random() < 0.5 else ""), value())
             for i in range(rng.randrange(0, 60))]
    lats = [(rng.choice(names), rng.choice(names), value()) for _ in range(rng.randrange(0, 5))]
    return Profile(costs, lats)


def _same(a: Profile, b: Profile) -> bool:
    # Floats by their bits: NaN != NaN, and -0.0 == 0.0 would hide a difference.
    def bits(p):
        return ([(n, struct.pack("<d", c)) for n, c in p.costs],
                [(s, t, struct.pack("<d", v)) for s, t, v in p.latencies])
    return bits(a) == bits(b)


def _protobuf_profile(msg) -> Profile:
    return Profile([(c.name, c.cost_us) for c in msg.costs],
                   [(x.source, x.target, x.latency_us) for x in msg.latencies])


@pytest.mark.parametrize("seed", range(60))
def test_text_written_equals_text_format(seed):
    names = ASCII_NAMES if seed % 3 else ASCII_NAMES + UTF8_NAMES
    profile = _random_profile(seed, names)
    expected = text_format.MessageToString(_message(profile)).encode("utf-8")
    fast = text_bytes(profile.costs, profile.latencies)
    if seed % 3:
        assert fast == expected  # ASCII names: always the fast path
    else:
        assert fast in (None, expected)
    assert encode_profile(profile, TEXT) == expected


@pytest.mark.parametrize("seed", range(60))
def test_binary_read_equals_protobuf(seed):
    profile = _random_profile(seed, ASCII_NAMES + UTF8_NAMES)
    data = _message(profile).SerializeToString(deterministic=True)
    expected = _protobuf_profile(message_class().FromString(data))
    assert _same(parse_profile(data, BINARY, "p.pb"), expected)


def test_empty_profile_both_ways():
    assert text_bytes([], []) == b"" == text_format.MessageToString(message_class()()).encode()
    assert parse_profile(b"", BINARY, "e.pb").is_empty()


def test_values_protobuf_would_convert_go_to_protobuf():
    # An int cost: protobuf writes it as a double (1.0); the fast writer leaves it to protobuf.
    assert text_bytes([("a", 1)], []) is None
    assert encode_profile(Profile([("a", 1)]), TEXT) == b'costs {\n  name: "a"\n  cost_us: 1.0\n}\n'


def _cost(body: bytes) -> bytes:
    return b"\x0a" + encode_varint(len(body)) + body


OUTSIDE = {
    "unknown top-level field": _cost(b"\x0a\x01a") + b"\x18\x05",
    "unknown field in an entry": _cost(b"\x0a\x01a\x18\x07"),
    "cost before name": _cost(b"\x11" + encode_double(2.0) + b"\x0a\x01a"),
    "name twice": _cost(b"\x0a\x01a\x0a\x01b"),
    "two-byte key": b"\x8a\x00" + encode_varint(3) + b"\x0a\x01a",
    "cost as fixed32": _cost(b"\x0a\x01a\x15\x00\x00\x80\x3f"),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_valid_input_outside_the_layout_goes_to_protobuf(case):
    data = OUTSIDE[case]
    assert _same(parse_profile(data, BINARY, "p.pb"), _protobuf_profile(message_class().FromString(data)))


def _protobuf_error(data: bytes) -> str:
    with pytest.raises(ProfileError) as e:
        files._parse_binary(data, "bad.pb")  # protobuf's path, as before the fast reader
    return str(e.value)


GOOD = _message(Profile([("fusion.1", 1.5), ("é", 2.0)], [("a", "b", 3.0)])).SerializeToString()
MALFORMED = {
    "truncated": GOOD[:-3],
    "length past the end": b"\x0a\x7f\x0a\x01a",
    "invalid UTF-8 name": _cost(b"\x0a\x02\xff\xfe\x11" + encode_double(1.0)),
    "truncated double": _cost(b"\x0a\x01a\x11\x00\x00"),
    "field number 0": b"\x02\x00",
    "text in a .pb": b'costs {\n  name: "a"\n}\n',
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_gets_protobufs_error(case, tmp_path):
    data = MALFORMED[case]
    expected = _protobuf_error(data)
    with pytest.raises(ProfileError) as e:
        parse_profile(data, BINARY, "bad.pb")
    assert str(e.value) == expected
    # And through the CLI: one clear line, exit 2, no traceback.
    path = tmp_path / "bad.pb"
    path.write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "pgle", "inspect", str(path)], capture_output=True,
                          text=True, env=pgle_env(), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"pgle: error: profile {path} is not a valid binary ProfiledInstructionsProto")
    assert "Traceback" not in proc.stderr


def test_convert_binary_to_text_matches_text_format(tmp_path):
    profile = _random_profile(3, ASCII_NAMES)
    src = tmp_path / "b.pb"
    src.write_bytes(_message(profile).SerializeToString())
    out = tmp_path / "c.pbtxt"
    proc = subprocess.run([sys.executable, "-m", "pgle", "convert", str(src), str(out)], capture_output=True,
                          text=True, env=pgle_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == text_format.MessageToString(_message(profile)).encode()


@pytest.mark.parametrize("seed", range(30))
def test_damaged_bytes_never_read_differently_from_protobuf(seed):
    # Cuts and flipped bytes anywhere: the fast reader steps aside or agrees with protobuf, and
    # never accepts what protobuf rejects.
    from google.protobuf.message import DecodeError

    rng = random.Random(seed)
    data = bytearray(_message(_random_profile(seed, ASCII_NAMES + UTF8_NAMES)).SerializeToString())
    if not data:
        return
    for _ in range(40):
        damaged = bytearray(data)
        if rng.random() < 0.3:
            damaged = damaged[:rng.randrange(len(damaged))]
        else:
            for _ in range(rng.randint(1, 3)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        damaged = bytes(damaged)
        try:
            expected = _protobuf_profile(message_class().FromString(damaged))
        except DecodeError:
            with pytest.raises(ProfileError):
                parse_profile(damaged, BINARY, "p.pb")
            continue
        assert _same(parse_profile(damaged, BINARY, "p.pb"), expected)
