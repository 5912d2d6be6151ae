"""``accel config``: the questions of a SageMaker launch and the config they produce."""

from __future__ import annotations

from collections.abc import Callable

from ..commands._sagemaker import SAGEMAKER_PARALLEL_EC2_INSTANCES, SageMakerConfig
from ..configs._engine_configs import DynamoConfig
from ._prompts import Prompter, whole
from ._questionnaire import PRECISIONS, _existing_file, _positive

SAGEMAKER_MODES = ("No distributed training", "Data parallelism")
CREDENTIALS = ("An AWS profile", "Key id and secret given to `accel launch` (--aws_* flags)")


def ask_sagemaker(ask: Prompter, dynamo: Callable[[Prompter], DynamoConfig]) -> SageMakerConfig:
    """Ask what a SageMaker launch needs and return the checked config.

    Args:
        ask: Where questions go and answers come from.
        dynamo: Asks the ``torch.compile`` questions.
    """
    config = SageMakerConfig()
    if ask.choose("How does accel launch authenticate with AWS?", CREDENTIALS) == 0:
        config.profile = ask.ask("Which AWS profile?", "default")
    config.region = ask.ask("Which AWS region?", "us-east-1")
    config.iam_role_name = ask.ask("Which IAM role (name or ARN) does the job run as?", None)
    if ask.yes_no("Do you use a training image of your own (it must have accel)?", False):
        config.image_uri = ask.ask("Its image URI?", None)
    if ask.yes_no("Do the job's data channels come from a file (name<TAB>S3 URI lines)?"):
        config.sagemaker_inputs_file = ask.ask("Path of that file?", None, check=_existing_file)
    if ask.yes_no("Are metrics read from the job's log (a file of name<TAB>regex lines)?"):
        config.sagemaker_metrics_file = ask.ask("Path of that file?", None, check=_existing_file)
    parallel = ask.choose("Which distributed mode?", SAGEMAKER_MODES) == 1
    config.distributed_type = "DATA_PARALLEL" if parallel else "NO"
    compile_options = dynamo(ask).to_dict()
    config.dynamo_config = compile_options or None
    if parallel:
        index = ask.choose("Which EC2 instance type?", SAGEMAKER_PARALLEL_EC2_INSTANCES)
        config.ec2_instance_type = SAGEMAKER_PARALLEL_EC2_INSTANCES[index]
        config.debug = ask.yes_no("Check distributed operations for errors while running?")
        config.num_machines = ask.ask("How many instances?", 1, whole, check=_positive)
    else:
        config.ec2_instance_type = ask.ask("Which EC2 instance type?", "ml.p3.2xlarge")
    config.base_job_name = f"accelerate-sagemaker-{config.num_machines}"
    config.mixed_precision = PRECISIONS[
        ask.choose("Do you wish to use mixed precision?", PRECISIONS)
    ]
    return config.validate("accel config")
