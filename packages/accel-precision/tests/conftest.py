import warnings

warnings.filterwarnings("ignore", message="MatMul8bitLt: inputs will be cast")
