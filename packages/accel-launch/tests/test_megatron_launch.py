"""Megatron-LM in the launcher: ``--use_megatron_lm`` and the ``--megatron_lm_*`` flags reach
the environment of every process, the config file holds them, ``--explain`` says where each
came from, and ``accel config`` asks them on a GPU machine (in-process)."""

import importlib.util
from io import StringIO

import pytest
import yaml

from accel_launch import ConfigError, config_from_dict
from accel_launch._resolve import child_environment
from accel_launch.questionnaire._prompts import Prompter
from accel_launch.questionnaire._questionnaire import run_questionnaire

from .test_engines import plan_for

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("megatron") is None,
    reason='needs megatron-core: pip install "accel-torch[megatron]"',
)

FLAGS = (
    "--use_megatron_lm",
    "--num_processes",
    "2",
    "--megatron_lm_tp_degree",
    "2",
    "--megatron_lm_pp_degree",
    "1",
    "--megatron_lm_num_micro_batches",
    "4",
    "--megatron_lm_sequence_parallelism",
    "true",
    "--megatron_lm_recompute_activations",
    "false",
    "--megatron_lm_use_distributed_optimizer",
    "true",
    "--megatron_lm_gradient_clipping",
    "0.5",
)


def test_megatron_flags_reach_the_environment_and_the_explanation(tmp_path):
    _, plan = plan_for(*FLAGS, "x.py")
    assert plan.config.distributed_type == "MEGATRON_LM"
    env = child_environment(plan.config)
    assert {k: v for k, v in env.items() if "MEGATRON" in k} == {
        "ACCEL_USE_MEGATRON_LM": "1",
        "ACCEL_MEGATRON_LM_TP_DEGREE": "2",
        "ACCEL_MEGATRON_LM_PP_DEGREE": "1",
        "ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES": "4",
        "ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM": "1",
        "ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS": "0",
        "ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER": "1",
        "ACCEL_MEGATRON_LM_GRADIENT_CLIPPING": "0.5",
    }
    explained = plan.explain()
    assert "megatron_lm_config.megatron_lm_tp_degree" in explained
    assert "flag --megatron_lm_tp_degree" in explained
    # The same settings from a config file; a flag wins over the file.
    path = tmp_path / "mlm.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "distributed_type": "MEGATRON_LM",
                "num_processes": 2,
                "megatron_lm_config": {"megatron_lm_tp_degree": 2, "megatron_lm_pp_degree": 2},
            }
        )
    )
    _, plan = plan_for("--config_file", str(path), "--megatron_lm_pp_degree", "1", "x.py")
    env = child_environment(plan.config)
    assert env["ACCEL_USE_MEGATRON_LM"] == "1"
    assert (env["ACCEL_MEGATRON_LM_TP_DEGREE"], env["ACCEL_MEGATRON_LM_PP_DEGREE"]) == ("2", "1")
    with pytest.raises(ConfigError, match="megatron_lm_tp_degree must be >= 1; got 0"):
        config_from_dict({"megatron_lm_config": {"megatron_lm_tp_degree": 0}})
    with pytest.raises(ConfigError, match="--use_deepspeed.*--use_megatron_lm"):
        plan_for("--use_deepspeed", "--use_megatron_lm", "x.py")


def test_questionnaire_asks_megatron_on_a_gpu_machine():
    # multi-GPU, 1 machine, no debug, no dynamo, no DeepSpeed, no FSDP, Megatron-LM: TP 2 with
    # sequence parallelism, PP 2 with 4 micro-batches, recompute, no distributed optimizer,
    # clipping 0.5 (after a refused -1); 2 processes, all GPUs, bf16.
    answers = ["3", "1", "no", "no", "no", "no", "yes", "2", "yes", "2", "4", "yes", "no"]
    answers += ["-1", "0.5", "2", "", "3"]
    out = StringIO()
    config = run_questionnaire(Prompter(StringIO("\n".join(answers) + "\n"), out, False), 2)
    assert "a clipping norm is >= 0 (0 turns clipping off), got -1.0" in out.getvalue()
    assert config.distributed_type == "MEGATRON_LM" and config.num_processes == 2
    assert config.megatron_lm_config.to_dict() == {
        "megatron_lm_tp_degree": 2,
        "megatron_lm_pp_degree": 2,
        "megatron_lm_num_micro_batches": 4,
        "megatron_lm_sequence_parallelism": True,
        "megatron_lm_recompute_activations": True,
        "megatron_lm_use_distributed_optimizer": False,
        "megatron_lm_gradient_clipping": 0.5,
    }
