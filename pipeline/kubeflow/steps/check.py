"""The `check_parameters` step, the first of a compiled pipeline with run parameters (dtfx.pipeline.kubeflow.run_form):
the config compiled into the spec, loaded with the run's values (`--set`, as `dtfx validate` does) and checked by the
config's rules and the cluster's (dtfx.pipeline.kubeflow.checks, RUN). A value that breaks one ends the run, before
any other step, with exit code 2 and the rule.

Run as `python -m dtfx.pipeline.kubeflow.steps.check --executor_input '{{$}}' --keys KEYS --config CONFIG`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from dtfx.components.errors import report_user_error
from dtfx.pipeline.errors import ConfigError
from dtfx.pipeline.kubeflow.steps import run_parameters as step_side

CHECK_STEP = "check_parameters"  # short enough for the task table of dtfx rehearse



def check(config_yaml: str, keys: dict[str, dict], values: dict) -> list[str]:
    """The problems of the config `config_yaml` with each parameter's value (`values`, by parameter name) set at its
    key (`keys`: name to {key, type}), as `dtfx validate --set` finds them without the data; one line each, naming
    the parameter."""
    from dtfx.pipeline.kubeflow.checks import RUN, cluster_problems
    from dtfx.pipeline.loader import load_config

    problems, overrides, given = [], [], {}
    for name, entry in keys.items():
        if name not in values:
            continue
        key = entry["key"]
        try:
            given[name] = step_side.typed(values[name], entry["type"])
        except ValueError as error:
            problems.append(f"run parameter {name} ({key}): {error}")
            continue
        null = entry.get("zero_is_null") and given[name] == 0
        overrides.append(f"{key}={'null' if null else json.dumps(given[name])}")
    if problems:
        return problems
    with tempfile.TemporaryDirectory(prefix="dtfx-run-parameters-") as scratch:
        path = os.path.join(scratch, "config.yaml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(config_yaml)
        try:
            config = load_config(path, overrides, check_data=False)
            found = cluster_problems(config, path, RUN)
        except ConfigError as error:
            found = error.problems
    by_key = {entry["key"]: name for name, entry in keys.items()}
    return [_named(problem, by_key, given) for problem in found]


def _named(problem, by_key: dict[str, str], values: dict) -> str:
    """A config problem as the check step prints it: at the run parameter whose key it is at, with the value given."""
    for key, name in by_key.items():
        if problem.path == key or problem.path.startswith(key + "."):
            return f"run parameter {name} ({key}) = {json.dumps(values.get(name))}: {problem.message}"
    for key, name in by_key.items():  # a rule of another key that the value breaks (data.path in minio:// needs an endpoint)
        if f"{key} " in problem.message:
            return f"run parameter {name} ({key}) = {json.dumps(values.get(name))}: {problem.path}: {problem.message}"
    return f"{problem.path}: {problem.message}"


def main(argv: list[str] | None = None) -> int:
    """The check step: exit code 2 and one line per broken rule, else 0."""
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--executor_input", required=True)
    parser.add_argument("--keys", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    values = step_side.parameter_values(json.loads(args.executor_input))
    keys = json.loads(args.keys)
    problems = check(args.config, keys, values)
    if problems:
        return report_user_error("the run parameters of this run break the config's rules; no step ran:\n  " +
                                 "\n  ".join(problems))
    print("run parameters: " + ", ".join(f"{name}={json.dumps(values.get(name))}" for name in keys if name in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
