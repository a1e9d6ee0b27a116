"""dtfx's own ExampleGen: sharded, vectorised ingestion of CSV, Parquet and TFRecord files.

`ShardedExampleGen` (component.py) reuses TFX's FileBasedExampleGen driver, so input files
are resolved and fingerprinted exactly as for stock ExampleGens (pipeline caching notices
a changed data file). Its executor (executor.py) is a Beam pipeline that reads record
batches with pyarrow, encodes them with tfx_bsl and writes N gzipped TFRecord shards per
split, in a standard `Examples` artifact.
"""
