"""The helpers of ``accel.test_utils``: what test suites written for the reference library
import from ``accelerate.test_utils`` (skip decorators, launch commands, the regression model,
offline dataloaders), implemented over accel."""
