"""`dtfx init NAME --data FILE`: a first, fully commented config guessed from a CSV or Parquet file.

The file's header (or Parquet schema) and a sample of its rows give the feature kinds (numeric when every value
is a number but for a few stray cells, which init names, or a Parquet column stores numbers; else categorical), the
columns left out (empty, lists, row numbers, text distinct in most rows, a feature that gives the label away by
itself), the label (the last column unless given), the task (classification for a string label or an integer one
with few distinct values, else regression), and a threshold the model must meet to be pushed: better than always
predicting the most common class (auc, for a label mostly of one class), or the median. Each decision that is not a
column's plain reading is printed with its reason and written in the config's header. Every key of the config is
written with a comment, in the style of pipeline_config/penguins.yaml: the keys come from the config model itself, so
that a key added to it later is written too.

Modules: `sample` reads the file's columns and first rows, `guess` decides the label, the task,
the feature kinds and a threshold, `render` writes a config as commented YAML, and `command`
is the CLI verb that puts them together.
"""
