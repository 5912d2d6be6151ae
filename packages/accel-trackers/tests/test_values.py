import pytest

from accel_trackers._values import flatten, normalize, stringify_unsupported, to_python


def test_flatten_joins_nested_keys_with_slash():
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e": 3}) == {"a/b": 1, "a/c/d": 2, "e": 3}


def test_numpy_scalars_and_arrays_become_python_values():
    np = pytest.importorskip("numpy")
    assert to_python(np.float32(0.5)) == 0.5
    assert type(to_python(np.float32(0.5))) is float
    assert type(to_python(np.int64(3))) is int
    assert to_python(np.array([1, 2, 3])) == [1, 2, 3]
    assert to_python(np.array(7)) == 7


def test_torch_tensors_become_python_values():
    torch = pytest.importorskip("torch")
    assert to_python(torch.tensor(2.5)) == 2.5
    assert to_python(torch.tensor([1.0, 2.0])) == [1.0, 2.0]
    assert to_python(torch.tensor([[3]])) == 3


def test_normalize_converts_everywhere_and_keeps_none():
    np = pytest.importorskip("numpy")
    out = normalize({"opt": {"lr": np.float64(0.1), "betas": (0.9, 0.99)}, "x": None})
    assert out == {"opt/lr": 0.1, "opt/betas": [0.9, 0.99], "x": None}
    nested = normalize({"opt": {"lr": np.float64(0.1)}}, flat=False)
    assert nested == {"opt": {"lr": 0.1}}


def test_normalize_rejects_a_non_mapping_with_the_fix():
    with pytest.raises(TypeError, match=r"mapping.*got list.*Pass a dict"):
        normalize([1, 2])  # type: ignore[arg-type]


def test_unsupported_hparams_are_stringified_with_a_warning_naming_them(caplog):
    out = stringify_unsupported(
        {"lr": 0.1, "sched": None, "layers": [1, 2]}, (int, float, str), tracker="demo"
    )
    assert out == {"lr": 0.1, "sched": "None", "layers": "[1, 2]"}
    assert "sched (NoneType)" in caplog.text and "layers (list)" in caplog.text
