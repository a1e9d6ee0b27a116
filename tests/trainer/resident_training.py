"""Trains the shipped config's network (with dropout) once per learning rate, in one process, and writes what each gave.

Run as a script, because the replicas' logical CPU devices must be set up before TensorFlow starts:
    python resident_training.py TRANSFORMED GRAPH RAW_EXAMPLES OUT_DIR keep|fresh LEARNING_RATE...
`keep` trains as a watching process does (resident.models_kept); `fresh` as a plain run does. OUT_DIR/result.json
holds, per training: the loss histories, the serving model's predictions for the raw examples, and how many times the
train step had been traced by then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import sys

import dtfx.components  # noqa: F401  (tf_keras before TensorFlow)
from dtfx.components.trainer.training.devices import ensure_logical_cpus

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "pipeline_config", "penguins.yaml")
STEPS = 40
DROPOUT = 0.3


def main(transformed: str, graph: str, raw_examples: str, out: str, mode: str, *learning_rates: str) -> None:
    ensure_logical_cpus(2)
    import tensorflow as tf

    from dtfx.components.trainer import run_fn
    from dtfx.components.trainer.job import TrainingJob
    from dtfx.components.trainer.training import resident
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config

    options = trainer_options(load_config(CONFIG))
    # With dropout: its random ops live in the kept network's traced step, and must start over as in a fresh process.
    options = dataclasses.replace(options, model={**options.model, "dropout": DROPOUT})
    serialized = [record.numpy() for path in sorted(glob.glob(raw_examples))
                  for record in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    results = []
    with resident.models_kept() if mode == "keep" else contextlib.nullcontext():
        for index, learning_rate in enumerate(learning_rates):
            job = TrainingJob(
                train_files=[os.path.join(transformed, "Split-train", "*")],
                eval_files=[os.path.join(transformed, "Split-eval", "*")],
                transform_output=graph, serving_model_dir=os.path.join(out, str(index), "serving"),
                model_run_dir=os.path.join(out, str(index), "run"), train_steps=STEPS, eval_steps=2,
                custom_config=dataclasses.replace(options, learning_rate=float(learning_rate)).to_dict(),
            )
            run_fn.train(job, options=dataclasses.replace(options, learning_rate=float(learning_rate)))
            served = tf.saved_model.load(job.serving_model_dir).signatures["serving_default"](
                examples=tf.constant(serialized))
            with open(os.path.join(job.model_run_dir, "train_stats.json")) as handle:
                history = json.load(handle)["history"]
            kept = resident._kept
            results.append({
                "history": history,
                "scores": served["scores"].numpy().tolist(),
                "traces": kept.network.train_function.experimental_get_tracing_count() if kept else None,
            })
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
