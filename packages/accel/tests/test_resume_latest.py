"""``load_state("latest")``: the newest complete checkpoint of the project, or a fresh start."""

import logging
import os

import pytest
import torch

from accel import Accelerator
from accel.utils import ProjectConfiguration


def _accelerator(project, automatic=True):
    config = ProjectConfiguration(project_dir=str(project), automatic_checkpoint_naming=automatic)
    accelerator = Accelerator(cpu=True, project_config=config)
    model = accelerator.prepare(torch.nn.Linear(2, 2))
    return accelerator, model


def test_latest_without_checkpoint_starts_fresh_with_a_log_line(tmp_path, caplog):
    accelerator, model = _accelerator(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with caplog.at_level(logging.WARNING, logger="accel.checkpointing"):
        accelerator.load_state("latest")
    assert "starting fresh" in caplog.text
    assert str(tmp_path / "checkpoints") in caplog.text
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert accelerator.project_configuration.iteration == 0


def test_latest_loads_the_newest_complete_checkpoint(tmp_path):
    accelerator, model = _accelerator(tmp_path)
    accelerator.save_state()
    with torch.no_grad():
        model.weight.fill_(3.0)
    accelerator.save_state()
    # An interrupted save: a staging folder with no manifest does not count.
    os.makedirs(tmp_path / "checkpoints" / ".checkpoint_2.partial")
    with torch.no_grad():
        model.weight.fill_(7.0)
    accelerator.load_state("latest")
    assert torch.all(model.weight == 3.0)
    assert accelerator.project_configuration.iteration == 2


def test_latest_needs_a_project_dir(tmp_path):
    accelerator = Accelerator(cpu=True)
    with pytest.raises(ValueError, match="project_dir=None"):
        accelerator.load_state("latest")


def test_latest_refuses_when_a_folder_of_that_name_is_here(tmp_path, monkeypatch):
    accelerator, _ = _accelerator(tmp_path)
    monkeypatch.chdir(tmp_path)
    os.makedirs("latest")
    with pytest.raises(FileExistsError, match=r"'\./latest'"):
        accelerator.load_state("latest")


def test_load_state_without_folder_names_latest_when_there_is_none(tmp_path):
    accelerator, _ = _accelerator(tmp_path)
    with pytest.raises(FileNotFoundError, match='load_state\\("latest"\\)'):
        accelerator.load_state()
