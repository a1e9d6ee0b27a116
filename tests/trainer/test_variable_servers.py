"""dtfx.components.trainer.training.devices.variable_servers: where each variable (and each shard of it) lives."""

from __future__ import annotations

from types import SimpleNamespace

from dtfx.components.trainer.training.devices import variable_servers


def test_shards_of_a_variable_are_grouped_under_its_name_in_shard_order():
    variables = [
        SimpleNamespace(name="embedding/embeddings/part_0:0", device="/job:ps/replica:0/task:1/device:CPU:0"),
        SimpleNamespace(name="embedding/embeddings/part_1:0", device="/job:ps/replica:0/task:0/device:CPU:0"),
        SimpleNamespace(name="dense/kernel:0", device="/job:ps/replica:0/task:0/device:CPU:0"),
        SimpleNamespace(name="Adam/iter:0", device="/job:chief/replica:0/task:0/device:CPU:0"),  # not on a server
        SimpleNamespace(name="seen/part_time:0", device="/job:ps/replica:0/task:1/device:CPU:0"),  # not a shard name
    ]
    assert variable_servers(variables) == {
        "embedding/embeddings": ["ps 1", "ps 0"],
        "dense/kernel": ["ps 0"],
        "seen/part_time": ["ps 1"],
    }
