import pytest
import yaml

from accel_launch import (
    ConfigError,
    LaunchConfig,
    config_from_dict,
    load_config_file,
    write_basic_config,
)


def test_unknown_key_names_the_closest_valid_one():
    with pytest.raises(ConfigError, match="unknown setting 'num_proceses'.*'num_processes'"):
        config_from_dict({"num_proceses": 2})


def test_bad_values_state_rule_value_fix():
    with pytest.raises(ConfigError, match="num_processes must be an integer >= 1; got 0"):
        config_from_dict({"num_processes": 0})
    with pytest.raises(ConfigError, match="mixed_precision must be one of .*got 'fp12'"):
        config_from_dict({"mixed_precision": "fp12"})
    with pytest.raises(ConfigError, match="multiple of num_machines=2; got 3"):
        config_from_dict({"num_processes": 3, "num_machines": 2, "main_process_ip": "h"})
    with pytest.raises(ConfigError, match="needs main_process_ip"):
        config_from_dict({"num_processes": 2, "num_machines": 2})
    with pytest.raises(ConfigError, match="machine_rank must be in"):
        config_from_dict({"machine_rank": 1})


def test_file_that_does_not_parse(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_processes: [2\n")
    with pytest.raises(ConfigError, match="does not parse"):
        load_config_file(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "missing.yaml")
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping of settings"):
        load_config_file(lst)


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("num_processes: !!int\n", "int", "''"),
        ("mixed_precision: !!float\n", "float", "''"),
        ("use_cpu: !!bool maybe\n", "bool", "'maybe'"),
        ("debug: !!timestamp soon\n", "timestamp", "'soon'"),
    ],
)
def test_a_tagged_value_yaml_cannot_build_is_named(tmp_path, text, kind, value):
    # PyYAML's own builders fail on these with IndexError, KeyError or AttributeError.
    bad = tmp_path / "tagged.yaml"
    bad.write_text(text)
    with pytest.raises(
        ConfigError,
        match=rf"does not parse: `!!{kind}` at line 1 has the value {value}, which YAML cannot "
        rf"read as a {kind}",
    ):
        load_config_file(bad)


def test_future_format_is_refused(tmp_path):
    with pytest.raises(
        ConfigError,
        match="config_version must be at most 2, the newest format this accel-launch understands; got 99",
    ):
        config_from_dict({"config_version": 99})


def test_round_trip_yaml_and_json(tmp_path):
    config = LaunchConfig(num_processes=4, mixed_precision="bf16")
    for name in ("c.yaml", "c.json"):
        path = config.save(tmp_path / name)
        assert load_config_file(path) == config


def test_write_basic_config_on_cpu_machine(tmp_path):
    target = tmp_path / "default.yaml"
    assert write_basic_config("bf16", save_location=target) == target
    data = yaml.safe_load(target.read_text())
    assert data["mixed_precision"] == "bf16" and data["use_cpu"] is True
    assert data["num_processes"] == 1
    assert write_basic_config(save_location=target) is False  # never overwrites
