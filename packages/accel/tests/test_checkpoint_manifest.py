"""Any manifest either loads or is refused with CheckpointIntegrityError, and a refused one
changes nothing (property-based)."""

import json
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel import Accelerator
from accel._training_checkpoints.files._manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    Manifest,
    file_checksum,
    parse_manifest,
)
from accel.utils import CheckpointIntegrityError, ProjectConfiguration

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = ["format_version", "world_size", "step", "files", "checksums", "models", "optimizers"]
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _valid() -> dict:
    return json.loads(
        Manifest(
            format_version=FORMAT_VERSION,
            world_size=2,
            step=5,
            files={"model.safetensors": 120, "random_states_0.pkl": 30, "random_states_1.pkl": 30},
            checksums={"model.safetensors": "crc32:0123abcd"},
            extra={"models": 1, "optimizers": 0, "safe_serialization": True},
        ).to_json()
    )


@st.composite
def mutated(draw) -> dict:
    data = _valid()
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(KEYS))
        action = draw(st.sampled_from(["delete", "replace", "nested"]))
        if action == "delete":
            data.pop(key, None)
        elif action == "replace" or not isinstance(data.get(key), dict):
            data[key] = draw(JSON)
        else:
            data[key][draw(st.text(max_size=12))] = draw(JSON)
    return data


def _parses_or_refuses(raw) -> None:
    try:
        manifest = parse_manifest(raw, "accel_checkpoint.json")
    except CheckpointIntegrityError as exc:
        assert "accel_checkpoint.json" in str(exc)
        return
    assert isinstance(manifest.world_size, int) and manifest.world_size >= 1
    assert all(type(v) is int and v >= 0 for v in manifest.files.values())
    assert set(manifest.checksums) <= set(manifest.files)


@SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes(raw):
    _parses_or_refuses(raw)


@SETTINGS
@given(JSON)
def test_any_json_value(value):
    _parses_or_refuses(json.dumps(value))


@SETTINGS
@given(mutated())
def test_mutated_valid_manifests(data):
    _parses_or_refuses(json.dumps(data))


def test_the_valid_manifest_round_trips():
    manifest = parse_manifest(json.dumps(_valid()), "m")
    assert manifest.world_size == 2 and manifest.extra["models"] == 1
    assert parse_manifest(manifest.to_json(), "m") == manifest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"world_size": "2"}, "'world_size' is '2', not an integer"),
        ({"world_size": 0}, "not a positive integer"),
        ({"files": {"../../etc/passwd": 1}}, "not a plain path inside the checkpoint"),
        ({"files": {"a.bin": -1}}, "not a byte count"),
        ({"checksums": {"missing.bin": "crc32:00000000"}}, "of a listed file"),
        ({"format_version": 99}, "format 99. Upgrade accel"),
        ({"models": "one"}, None),  # counts are checked when loading, see below
    ],
)
def test_refusals_state_the_rule(change, message):
    data = {**_valid(), **change}
    if message is None:
        parse_manifest(json.dumps(data), "m")
        return
    with pytest.raises(CheckpointIntegrityError, match=message):
        parse_manifest(json.dumps(data), "m")


class Counter:
    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


class _Saved(tuple):
    def __repr__(self):
        return "<saved checkpoint>"


@pytest.fixture
def saved(tmp_path):
    root = tmp_path
    acc = Accelerator(project_config=ProjectConfiguration(project_dir=str(root)))
    model = acc.prepare(torch.nn.Linear(3, 3))
    counter = Counter(7)
    acc.register_for_checkpointing(counter)
    out = Path(acc.save_state(root / "ckpt"))
    return _Saved((acc, model, counter, out, (out / MANIFEST_NAME).read_text()))


@SETTINGS
@given(
    key=st.sampled_from([*KEYS, "custom_objects", "dataloaders"]),
    value=JSON | st.integers(-2, 3),
)
def test_load_state_with_any_manifest_loads_or_refuses_and_changes_nothing(saved, key, value):
    acc, model, counter, out, original = saved
    data = json.loads(original)
    data[key] = value
    (out / MANIFEST_NAME).write_text(json.dumps(data))
    with torch.no_grad():
        model.weight.fill_(0.5)
    counter.value = -1
    try:
        acc.load_state(out)
    except CheckpointIntegrityError:
        assert counter.value == -1 and bool((model.weight == 0.5).all())
    except ValueError as exc:  # the manifest fits, the run does not (other object counts)
        assert "load_state restores every object" in str(exc), exc
        assert counter.value == -1 and bool((model.weight == 0.5).all())
    else:
        assert counter.value == 7
    finally:
        (out / MANIFEST_NAME).write_text(original)


def test_saving_over_a_damaged_manifest_writes_nothing(saved):
    acc, _, _, out, original = saved
    before = sorted(os.listdir(out))
    (out / MANIFEST_NAME).write_text('{"world_size": "x"}')
    try:
        with pytest.raises(CheckpointIntegrityError, match="cannot be read"):
            acc.save_state(out)
        assert sorted(os.listdir(out)) == before
        assert sorted(os.listdir(out.parent)) == ["ckpt"]
    finally:
        (out / MANIFEST_NAME).write_text(original)


def test_checksum_is_crc32_of_the_whole_file(tmp_path):
    import zlib

    path = tmp_path / "f.bin"
    data = os.urandom(20 << 20)  # more than one read chunk
    path.write_bytes(data)
    assert file_checksum(str(path)) == f"crc32:{zlib.crc32(data):08x}"
