"""Profile I/O: formats, round trips, directories, corrupt input, content-addressed copies."""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from pgle.errors import BadInput, ProfileError
from pgle.profiles.files import (
    Profile,
    content_addressed_copy,
    encode_profile,
    load_profile_source,
    parse_profile,
    profile_format,
    read_profile,
    split_qualified,
    write_profile,
)
from pgle.profiles.proto import locate_corruption
from helpers.pgle_testing import encode_double, encode_varint

FP_A = "0123456789abcdef0123456789abcdef"
FP_B = "fedcba9876543210fedcba9876543210"


def sample() -> Profile:
    return Profile(
        costs=[("fusion.12", 34.5), (f"{FP_A}::fusion.3", 1.25), ("fusion.3.remat2", 7.0),
               ("all-reduce-start.1", 120.0), ("naïve ünïcode", 0.1), ("fusion.12", 35.0)],
        latencies=[("all-reduce-start.1", "all-reduce-done.1", 99.5)],
    )


def test_profile_format_by_extension_only():
    assert profile_format("a/b.pb") == "binary"
    assert profile_format("a/b.pbtxt") == "text"
    for bad in ["profile.txt", "profile", "profile.PB", "profile.pb.bak", "profile.textproto"]:
        with pytest.raises(ProfileError, match="silently ignores"):
            profile_format(bad)


def test_profile_error_is_bad_input_exit_2():
    with pytest.raises(BadInput) as e:
        profile_format("x.json")
    assert e.value.exit_code == 2


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_round_trip_file(tmp_path, suffix):
    p = sample()
    path = write_profile(p, tmp_path / f"p{suffix}")
    assert path.is_absolute()
    assert read_profile(path) == p
    assert p.instruction_count == 6 and p.latency_count == 1 and not p.is_empty()


def test_text_form_matches_pgle_facts():
    text = encode_profile(Profile([("fusion.12", 34.5)]), "text").decode()
    assert 'name: "fusion.12"' in text and "cost_us: 34.5" in text
    # The one-line form from the docs parses too.
    assert parse_profile(b'costs { name: "fusion.12" cost_us: 34.5 }', "text", "x") == \
        Profile([("fusion.12", 34.5)])


def test_binary_wire_layout_is_the_tsl_schema():
    # Field 1 costs{1: name, 2: double}, field 2 latencies{1,2: strings, 3: double}, built by hand.
    cost = b"\x0a\x01a" + b"\x11" + encode_double(2.5)
    lat = b"\x0a\x01a" + b"\x12\x01b" + b"\x19" + encode_double(4.0)
    data = b"\x0a" + encode_varint(len(cost)) + cost + b"\x12" + encode_varint(len(lat)) + lat
    assert parse_profile(data, "binary", "x") == Profile([("a", 2.5)], [("a", "b", 4.0)])
    assert encode_profile(Profile([("a", 2.5)], [("a", "b", 4.0)]), "binary") == data


def test_unknown_fields_are_accepted_like_protobuf():
    data = encode_profile(Profile([("a", 1.0)]), "binary") + b"\x18\x05" + b"\x22\x02hi"
    assert parse_profile(data, "binary", "x") == Profile([("a", 1.0)])
    assert locate_corruption(data) is None


def test_random_round_trips_exact_floats(tmp_path):
    rng = random.Random(7)
    for i in range(20):
        p = Profile(
            costs=[(f"op.{rng.randrange(1000)}{'.remat' if rng.random() < .1 else ''}",
                    rng.choice([0.0, -0.0, 1e-300, 1e300, rng.random() * 1e4, float(rng.randrange(10))]))
                   for _ in range(rng.randrange(50))],
            latencies=[(f"s{j}", f"t{j}", rng.random()) for j in range(rng.randrange(5))],
        )
        for suffix in (".pb", ".pbtxt"):
            path = write_profile(p, tmp_path / f"r{i}{suffix}")
            assert read_profile(path) == p


def test_empty_and_huge(tmp_path):
    empty = write_profile(Profile(), tmp_path / "e.pb")
    assert empty.read_bytes() == b""  # what jaxlib writes on CPU
    assert read_profile(empty).is_empty()
    assert read_profile(write_profile(Profile(), tmp_path / "e.pbtxt")).is_empty()
    src = load_profile_source(empty)  # not rejected: callers decide
    assert src.instruction_count == 0 and src.is_empty()
    big = Profile([(f"fusion.{i}", i * 0.5) for i in range(200_000)])
    path = write_profile(big, tmp_path / "big.pb")
    assert read_profile(path) == big


def test_write_refuses_overwrite_and_other_extensions(tmp_path):
    path = write_profile(sample(), tmp_path / "p.pb")
    with pytest.raises(BadInput, match="already exists"):
        write_profile(sample(), path)
    write_profile(Profile([("x", 1.0)]), path, force=True)
    assert read_profile(path) == Profile([("x", 1.0)])
    with pytest.raises(ProfileError, match="silently ignores"):
        write_profile(sample(), tmp_path / "p.bin")
    assert not (tmp_path / "p.bin").exists()
    assert [f.name for f in tmp_path.iterdir()] == ["p.pb"]  # no temp files left behind


def test_write_bytes_validated_and_converted(tmp_path):
    data = encode_profile(sample(), "binary")
    out = write_profile(data, tmp_path / "p.pbtxt")
    assert read_profile(out) == sample()
    with pytest.raises(ProfileError, match="byte"):
        write_profile(data[:-4], tmp_path / "q.pb")
    assert not (tmp_path / "q.pb").exists()


@pytest.mark.parametrize("cut", [1, 3, 9, 20])
def test_truncated_binary_names_file_and_offset(tmp_path, cut):
    data = encode_profile(sample(), "binary")
    path = tmp_path / "t.pb"
    path.write_bytes(data[:-cut])
    with pytest.raises(ProfileError) as e:
        load_profile_source(path)
    msg = str(e.value)
    assert str(path) in msg and "at byte" in msg and f"of {len(data) - cut}" in msg
    offset = int(msg.split("at byte ")[1].split()[0])
    assert 0 <= offset < len(data) - cut


def test_corruption_offsets_are_exact():
    good = encode_profile(Profile([("a", 1.0)]), "binary")  # 13 bytes
    cases = {
        good + b"\x0a\x05ab": len(good),  # sub-message claims 5 bytes, 2 remain
        good + b"\x07": len(good),  # wire type 7 does not exist
        good + b"\x00": len(good),  # field number 0
        good + b"\x0a\x03\x0a\x01\xff": len(good) + 4,  # bad UTF-8 in the name
        good + b"\x0a\x80\x80": len(good) + 1,  # truncated length varint
    }
    for data, offset in cases.items():
        with pytest.raises(ProfileError, match=f"at byte {offset} of {len(data)}"):
            parse_profile(data, "binary", "p.pb")


def test_swapped_formats_get_a_rename_hint(tmp_path):
    (tmp_path / "t.pb").write_bytes(encode_profile(sample(), "text"))
    with pytest.raises(ProfileError, match="rename it to .pbtxt"):
        read_profile(tmp_path / "t.pb")
    (tmp_path / "b.pbtxt").write_bytes(encode_profile(sample(), "binary"))
    with pytest.raises(ProfileError, match="rename it to .pb"):
        read_profile(tmp_path / "b.pbtxt")


def test_bad_text_names_line(tmp_path):
    path = tmp_path / "x.pbtxt"
    path.write_text('costs { name: "a" cost_us: 1 }\ncosts { nme: "b" }\n')
    with pytest.raises(ProfileError, match=r"x.pbtxt.*2:"):
        read_profile(path)


@pytest.mark.unprivileged
def test_missing_unreadable_and_wrong_extension(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile_source(tmp_path / "nope.pb")
    (tmp_path / "p.json").write_text("{}")
    with pytest.raises(ProfileError, match="silently ignores"):
        load_profile_source(tmp_path / "p.json")
    locked = write_profile(sample(), tmp_path / "locked.pb")
    os.chmod(locked, 0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: permissions are not enforced (CI reruns "
                        "`-m unprivileged` as a non-root user)")
        with pytest.raises(ProfileError, match="not readable"):
            load_profile_source(locked)
    finally:
        os.chmod(locked, 0o644)


def test_file_source(tmp_path):
    path = write_profile(sample(), tmp_path / "p.pb")
    src = load_profile_source(os.path.relpath(path))
    assert src.kind == "file" and src.path == path and src.files == [path]
    assert src.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert src.modules == {"": sample()}
    assert (src.instruction_count, src.latency_count) == (6, 1)
    assert src.to_dict()["kind"] == "file"


def test_directory_source(tmp_path):
    d = tmp_path / "profiles dir ü"
    write_profile(Profile([("fusion.1", 1.0)]), d / f"{FP_A}.pb")
    write_profile(Profile([("fusion.1", 2.0), ("fusion.2", 3.0)], [("a", "b", 1.0)]), d / f"{FP_B}.pbtxt")
    write_profile(Profile([("old", 9.0)]), d / f"{FP_B}.pb")  # shadowed: XLA tries .pbtxt first
    (d / "manifest.json").write_text("{}")
    (d / "FEDCBA9876543210FEDCBA9876543210.pb").write_bytes(b"")  # XLA prints lowercase hex
    src = load_profile_source(d)
    assert src.kind == "directory" and src.path == d
    assert sorted(src.modules) == [FP_A, FP_B]
    assert src.modules[FP_B].costs == [("fusion.1", 2.0), ("fusion.2", 3.0)]
    assert [f.name for f in src.files] == [f"{FP_A}.pb", f"{FP_B}.pbtxt"]
    assert [f.name for f in src.shadowed] == [f"{FP_B}.pb"]
    assert set(src.ignored) == {"manifest.json", "FEDCBA9876543210FEDCBA9876543210.pb"}
    assert (src.instruction_count, src.latency_count) == (3, 1)
    # The digest covers content and names, not the ignored files.
    before = src.sha256
    (d / "manifest.json").write_text('{"x": 1}')
    assert load_profile_source(d).sha256 == before
    write_profile(Profile([("fusion.1", 1.5)]), d / f"{FP_A}.pb", force=True)
    assert load_profile_source(d).sha256 != before


def test_directory_without_fingerprint_files_names_what_it_ignored(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(ProfileError, match="it is empty"):
        load_profile_source(d)
    write_profile(sample(), d / "profile.pb")
    (d / "notes.txt").write_text("x")
    with pytest.raises(ProfileError, match=r"ignored: notes.txt, profile.pb"):
        load_profile_source(d)


def test_directory_with_corrupt_module_names_it(tmp_path):
    d = tmp_path / "d"
    write_profile(sample(), d / f"{FP_A}.pb")
    (d / f"{FP_B}.pb").write_bytes(b"\x0a\x09abc")
    with pytest.raises(ProfileError, match=f"{FP_B}.pb.*at byte 0"):
        load_profile_source(d)


def test_directory_empty_modules_are_reported_not_rejected(tmp_path):
    d = tmp_path / "d"
    write_profile(Profile(), d / f"{FP_A}.pb")
    write_profile(sample(), d / f"{FP_B}.pb")
    src = load_profile_source(d)
    assert src.empty_modules == [FP_A] and not src.is_empty()


def test_split_qualified_follows_xla():
    assert split_qualified("fusion.3") == (None, "fusion.3")
    assert split_qualified(f"{FP_A}::fusion.3") == (FP_A, "fusion.3")
    assert split_qualified("a::b::c") == ("", "a::b::c")  # XLA keeps it for no module


def test_content_addressed_file_copy(tmp_path):
    src = load_profile_source(write_profile(sample(), tmp_path / "p.pbtxt"))
    store = tmp_path / "store"
    out = content_addressed_copy(src, store)
    assert out == store / f"profile-{src.sha256[:16]}.pbtxt" and out.is_absolute()
    assert out.read_bytes() == (tmp_path / "p.pbtxt").read_bytes()
    mtime = out.stat().st_mtime_ns
    assert content_addressed_copy(src, store) == out and out.stat().st_mtime_ns == mtime  # idempotent
    out.write_bytes(b"garbage")  # a damaged copy under the content's name is replaced
    assert content_addressed_copy(src, store).read_bytes() == (tmp_path / "p.pbtxt").read_bytes()
    # Regenerating the profile at the same path gives a new name: no stale cache hit.
    write_profile(Profile([("x", 1.0)]), tmp_path / "p.pbtxt", force=True)
    assert content_addressed_copy(load_profile_source(tmp_path / "p.pbtxt"), store) != out
    assert sorted(f.name for f in store.iterdir() if f.name.startswith(".")) == []


def test_content_addressed_directory_copy(tmp_path):
    d = tmp_path / "d"
    write_profile(Profile([("a", 1.0)]), d / f"{FP_A}.pb")
    write_profile(Profile([("b", 1.0)]), d / f"{FP_B}.pbtxt")
    (d / "manifest.json").write_text("{}")
    src = load_profile_source(d)
    store = tmp_path / "store"
    out = content_addressed_copy(src, store)
    assert out == store / f"profiles-{src.sha256[:16]}"
    assert sorted(f.name for f in out.iterdir()) == [f"{FP_A}.pb", f"{FP_B}.pbtxt"]
    assert load_profile_source(out).sha256 == src.sha256
    assert content_addressed_copy(src, store) == out
    (out / f"{FP_A}.pb").write_bytes(b"")  # damaged copy: rebuilt
    assert load_profile_source(content_addressed_copy(src, store)).sha256 == src.sha256
    assert sorted(f.name for f in store.iterdir()) == [out.name]
