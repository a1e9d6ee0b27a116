"""dtfx's own ExampleGen: sharded, vectorised ingestion of CSV, Parquet and TFRecord files.

`ShardedExampleGen` (component.py) reuses TFX's FileBasedExampleGen driver, so input files
are resolved and fingerprinted exactly as for stock ExampleGens (pipeline caching notices
a changed data file). Its executor (executor.py) is a Beam pipeline with one element per
file, not per row: sources.py reads record batches with pyarrow, encode.py turns a batch
into tf.Examples with numpy and pyarrow, assign.py picks each row's split and shard, and
tfrecord.py writes N gzipped TFRecord shards per split into a standard `Examples` artifact;
labels.py counts a classification label's classes in each split (validate counts them too).
"""
