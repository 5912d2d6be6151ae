"""DeepSpeedPlugin refuses a gradient clipping norm that cannot be one."""

import math

import pytest

from accel_state import DeepSpeedPlugin, patch_environment


@pytest.mark.parametrize("value", [-1, -0.5, "-2", math.nan, math.inf, "x", True])
def test_bad_norm_is_refused_with_rule_value_and_fix(value):
    with pytest.raises(ValueError) as err:
        DeepSpeedPlugin(gradient_clipping=value)
    text = str(err.value)
    assert "DeepSpeedPlugin.gradient_clipping" in text and "finite number >= 0" in text
    assert repr(value) in text and "Pass e.g. 1.0" in text


def test_bad_norm_from_launcher_or_config_is_refused():
    with patch_environment(ACCEL_DEEPSPEED_GRADIENT_CLIPPING="-1"):
        with pytest.raises(ValueError, match="got '-1'"):
            DeepSpeedPlugin()
    config = {"gradient_clipping": -2, "zero_optimization": {"stage": 2}}
    with pytest.raises(ValueError, match="DeepSpeed config's gradient_clipping .* got -2"):
        DeepSpeedPlugin(hf_ds_config=config)


@pytest.mark.parametrize("value", [0, 0.0, 1, "1.5", "auto"])
def test_good_norms_are_kept(value):
    plugin = DeepSpeedPlugin(gradient_clipping=value)
    assert plugin.gradient_clipping == (value if value == "auto" else float(value))
