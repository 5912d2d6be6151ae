"""Counting the ops of training steps, shared by the single- and multi-process step tests."""

from collections import Counter

from torch.profiler import ProfilerActivity, profile


def step_op_counts(model, opt, batches, loss_fn, backward):
    """ATen and c10d ops of the steps over ``batches[1:]``; ``batches[0]`` warms up (AdamW
    creates its state on the first step)."""

    def step(x, y):
        opt.zero_grad()
        backward(loss_fn(model(x), y))
        opt.step()

    step(*batches[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for x, y in batches[1:]:
            step(x, y)
    keys = ("aten::", "c10d::")
    return Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith(keys)})
