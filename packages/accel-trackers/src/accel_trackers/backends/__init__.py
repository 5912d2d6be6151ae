"""One module per tracker library (TensorBoard, W&B, Comet, DVCLive, MLflow, Aim, ClearML,
SwanLab, Trackio): each adapts its library to the `GeneralTracker` interface and imports the
library only when a tracker starts, so that importing this folder costs nothing."""
