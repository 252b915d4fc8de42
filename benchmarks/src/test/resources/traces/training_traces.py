#!/usr/bin/env python3
"""Writes the synthetic training traces of TracePolicyTest (see README.md): python3 training_traces.py [DIR]."""
import gzip
import random
import sys


def training(seed, parameters, activations, steps, largest_activation, jitter, temporaries):
    """A training loop of fixed shapes, each step's activation sizes scaled by up to +-jitter.

    Parameters are allocated first and live to the end. Each step allocates its activations in order (with, where
    `temporaries` says how often, a temporary of up to 8 MiB freed at once), then frees them in reverse order while
    it allocates a gradient per parameter every third free; after the first step's backward pass the optimizer
    allocates two states per parameter, which live to the end; the gradients are freed at the end of each step.
    """
    r = random.Random(seed)
    param_sizes = [r.choice([r.randint(1 << 20, 16 << 20), r.randint(512, 1 << 20)]) for _ in range(parameters)]
    act_sizes = [r.choice([r.randint(1 << 20, largest_activation), r.randint(512, 1 << 20)]) for _ in range(activations)]
    events = []
    next_id = 0

    def allocate(size):
        nonlocal next_id
        events.append(f"a,{next_id},{size},0")
        next_id += 1
        return next_id - 1

    for size in param_sizes:
        allocate(size)
    for step in range(steps):
        scale = 1 + r.uniform(-jitter, jitter)
        live = []
        for size in act_sizes:
            live.append(allocate(max(1, int(size * scale))))
            if r.random() < temporaries:
                events.append(f"f,{allocate(r.randint(512, 8 << 20))}")
        gradients = []
        for k, block in enumerate(reversed(live)):
            events.append(f"f,{block}")
            if k % 3 == 0 and len(gradients) < len(param_sizes):
                gradients.append(allocate(param_sizes[len(gradients)]))
        while len(gradients) < len(param_sizes):
            gradients.append(allocate(param_sizes[len(gradients)]))
        if step == 0:
            for size in param_sizes:
                allocate(size)
                allocate(size)
        for block in gradients:
            events.append(f"f,{block}")
    return events


def write(path, comment, events):
    with gzip.open(path, "wt") as out:
        out.write(f"# {comment}\n# format: a,<id>,<bytes>,<stream> allocates; f,<id> frees\n")
        out.write("\n".join(events) + "\n")


if __name__ == "__main__":
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    write(f"{directory}/fixed_shape_training.csv.gz", "synthetic: fixed shapes, 150 parameters, 400 activations of up to 48 MiB, 10 steps",
          training(seed=3, parameters=150, activations=400, steps=10, largest_activation=48 << 20, jitter=0.0, temporaries=0.3))
    write(f"{directory}/small_model_training.csv.gz", "synthetic: 80 parameters, 200 activations of up to 8 MiB, 15 steps, sizes +-1% a step",
          training(seed=7, parameters=80, activations=200, steps=15, largest_activation=8 << 20, jitter=0.01, temporaries=0.3))
