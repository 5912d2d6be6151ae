"""``accel.commands``: the reference's ``accelerate.commands`` functions that libraries call
(TRL's and transformers' command lines), driving accel's own commands."""
