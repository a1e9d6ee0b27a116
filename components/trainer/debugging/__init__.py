"""The Trainer's debugging aids (`trainer.debug`): numerics, replica agreement, per-replica statistics."""
