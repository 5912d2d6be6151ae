import dataclasses

import pytest
import torch

from accel_precision import BnbQuantizationConfig


def test_documented_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(BnbQuantizationConfig)}
    assert defaults == {
        "load_in_8bit": False,
        "llm_int8_threshold": 6.0,
        "load_in_4bit": False,
        "bnb_4bit_quant_type": "fp4",
        "bnb_4bit_use_double_quant": False,
        "bnb_4bit_compute_dtype": "fp16",
        "torch_dtype": None,
        "skip_modules": None,
        "keep_in_fp32_modules": None,
    }


def test_8bit_and_4bit_together_is_an_error():
    with pytest.raises(ValueError, match="not both; got load_in_8bit=True and load_in_4bit=True"):
        BnbQuantizationConfig(load_in_8bit=True, load_in_4bit=True)


def test_no_quantization_is_an_error():
    with pytest.raises(ValueError, match="Set load_in_8bit=True or load_in_4bit=True"):
        BnbQuantizationConfig()


def test_unknown_quant_type_is_an_error():
    with pytest.raises(
        ValueError, match="bnb_4bit_quant_type must be one of \\['fp4', 'nf4'\\]; got 'int4'"
    ):
        BnbQuantizationConfig(load_in_4bit=True, bnb_4bit_quant_type="int4")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bnb_4bit_compute_dtype": "fp64"}, "bnb_4bit_compute_dtype must be one of"),
        ({"torch_dtype": torch.int8}, "torch_dtype must be a floating-point dtype"),
        ({"skip_modules": "lm_head"}, "skip_modules must be a list"),
        ({"keep_in_fp32_modules": [1]}, "keep_in_fp32_modules must be a list"),
        ({"llm_int8_threshold": "6"}, "llm_int8_threshold must be a number"),
        ({"bnb_4bit_use_double_quant": 1}, "bnb_4bit_use_double_quant must be a bool"),
    ],
)
def test_bad_values_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BnbQuantizationConfig(load_in_4bit=True, **kwargs)


def test_dtype_names_and_defaults():
    eight = BnbQuantizationConfig(load_in_8bit=True)
    assert eight.torch_dtype is torch.float16 and eight.target_dtype is torch.int8
    four = BnbQuantizationConfig(load_in_4bit=True, bnb_4bit_compute_dtype="bf16")
    assert four.bnb_4bit_compute_dtype is torch.bfloat16 and four.torch_dtype is torch.bfloat16
    assert four.target_dtype == "int4"
    assert BnbQuantizationConfig(load_in_8bit=True, torch_dtype="fp32").torch_dtype is torch.float32
