"""A one-variable linear regression, the smallest model and data a training test can check:
``y = a * x + b`` plus noise, and a model with the two parameters ``a`` and ``b``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class RegressionDataset:
    """``length`` samples ``{"x": x, "y": a * x + b + noise}`` (float32 scalars), with
    ``x ~ N(0, 1)`` and noise ``~ N(0, 0.1)`` drawn from ``numpy.random.default_rng(seed)``
    (x first, then the noise), so a seed gives the same samples as the reference library's
    ``RegressionDataset``.

    Args:
        a: Slope of the line.
        b: Intercept of the line.
        length: Number of samples.
        seed: Seed of the generator; None draws different samples each time.

    Raises:
        ValueError: ``length`` is negative.
    """

    def __init__(self, a: float = 2, b: float = 3, length: int = 64, seed: int | None = None):
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(
                f"RegressionDataset: length must be an integer >= 0; got {length!r}. "
                "Pass e.g. length=64."
            )
        generator = np.random.default_rng(seed)
        self.length = length
        self.x = generator.normal(size=(length,)).astype(np.float32)
        noise = generator.normal(scale=0.1, size=(length,)).astype(np.float32)
        self.y = a * self.x + b + noise

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": self.x[i], "y": self.y[i]}


class RegressionModel(torch.nn.Module):
    """``forward(x) = x * a + b`` with scalar parameters ``a`` and ``b``.

    The first forward prints the parameters' and the input's dtypes, so a mixed-precision test
    shows what autocast did.

    Args:
        a: Initial slope.
        b: Initial intercept.
        double_output: Return the prediction twice, as a tuple ``(y, y)``, to test code that
            handles models with several outputs.
    """

    def __init__(self, a: float = 0, b: float = 0, double_output: bool = False):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(float(a)))
        self.b = torch.nn.Parameter(torch.tensor(float(b)))
        self.double_output = double_output
        self.first_batch = True

    def forward(self, x: torch.Tensor | None = None) -> Any:
        """The prediction for ``x`` (a tensor of any shape)."""
        if x is None:
            raise ValueError(
                "RegressionModel.forward needs the input x; got None. Call model(x=batch['x'])."
            )
        if self.first_batch:
            print(f"Model dtype: {self.a.dtype}, {self.b.dtype}. Input dtype: {x.dtype}")
            self.first_batch = False
        prediction = x * self.a + self.b
        return (prediction, prediction) if self.double_output else prediction


__all__ = ["RegressionDataset", "RegressionModel"]
