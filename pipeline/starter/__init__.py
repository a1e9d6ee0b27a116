"""`dtfx init NAME --data CSV`: a first, fully commented config guessed from a CSV file.

The CSV's header and a sample of its rows give the feature kinds (numeric when every value
is a number, else categorical), the label (the last column unless given) and the task
(classification for a string label or an integer one with few distinct values, else
regression), and a threshold the model must meet to be pushed: better than always
predicting the most common class, or the median. Every key of the config is written with a
comment, in the style of pipeline_config/penguins.yaml: the keys come from the config
model itself, so that a key added to it later is written too.

Modules: `sample` reads the CSV's header and first rows, `guess` decides the label, the task,
the feature kinds and a threshold, `render` writes a config as commented YAML, and `command`
is the CLI verb that puts them together.
"""
