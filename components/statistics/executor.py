"""The statistics step's executor: TFDV's statistics, computed without Beam where Beam adds nothing.

On the DirectRunner's in-memory mode (dtfx's default; see dtfx.components.without_beam) this executor
feeds TFDV's own combiner generators (the ones TFDV's in-memory API uses) one Arrow record batch at a time and writes
the result where TFX's StatisticsGen writes it (`Split-<name>/FeatureStats.pb`); memory holds one
batch and the generators' sketches, whatever the size of the data.

Every other runner (portable, Flink, Spark, Dataflow, the DirectRunner's multi-process mode) gets
TFX's executor unchanged: those are there to spread the work over processes or machines.

The in-memory generators count distinct values and the most frequent ones with sketches (TFDV's
Misra-Gries and K-minimum-values, as StatisticsGen's `use_sketch_based_topk_uniques` does on Beam):
exact up to a thousand distinct values of a feature, estimates above.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import tensorflow_data_validation as tfdv
from tensorflow_data_validation.statistics import stats_impl
from tfx import types
from tfx.components.statistics_gen import executor as tfx_statistics
from tfx.components.util import tfxio_utils
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils
from tfx_bsl.tfxio import dataset_options

from dtfx.components.without_beam import ComputesWithoutBeamInOneThread, runs_in_one_thread

BATCH_SIZE = 1000  # rows per Arrow record batch; TFDV's Beam path batches by the same order of rows


class Executor(ComputesWithoutBeamInOneThread, tfx_statistics.Executor):
    """TFX's StatisticsGen executor; on the DirectRunner's in-memory mode, computed in this process."""

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],  # noqa: N802
           exec_properties: dict[str, Any]) -> None:
        if not runs_in_one_thread(self._beam_pipeline_args or []) or _asks_for_more(exec_properties, input_dict):
            super().Do(input_dict, output_dict, exec_properties)
            return
        examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
        statistics = artifact_utils.get_single_instance(output_dict[standard_component_specs.STATISTICS_KEY])
        splits = artifact_utils.decode_split_names(examples.split_names)
        statistics.split_names = artifact_utils.encode_split_names(splits)
        statistics.span = examples.span
        options = tfdv.StatsOptions()
        if exec_properties.get(standard_component_specs.STATS_OPTIONS_JSON_KEY):
            options = tfdv.StatsOptions.from_json(exec_properties[standard_component_specs.STATS_OPTIONS_JSON_KEY])
        if (options.sample_rate or options.slicing_config or options.experimental_slice_functions
                or options.experimental_slice_sqls):
            super().Do(input_dict, output_dict, exec_properties)  # row sampling and slices: TFDV's Beam path
            return
        statistics.set_json_value_custom_property(
            tfx_statistics.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
            json_utils.dumps({split: options.sample_rate or 1.0 for split in splits}))
        for split in splits:
            logging.info("Generating statistics for split %s in this process (no Beam pipeline).", split)
            tfxio = tfxio_utils.get_split_tfxio(examples=[examples], split=split, telemetry_descriptors=["StatisticsGen"])
            result = split_statistics(tfxio, options)
            output_dir = artifact_utils.get_split_uri([statistics], split)
            io_utils.write_bytes_file(os.path.join(output_dir, tfx_statistics.DEFAULT_FILE_NAME),
                                      result.SerializeToString())


def split_statistics(tfxio, options: tfdv.StatsOptions):
    """TFDV's DatasetFeatureStatisticsList of the records `tfxio` reads, one record batch in memory at a time."""
    generators = stats_impl.get_generators(options, in_memory=True)
    accumulators = [generator.create_accumulator() for generator in generators]
    batches = tfxio.RecordBatches(dataset_options.RecordBatchesOptions(batch_size=BATCH_SIZE, drop_final_batch=False,
                                                                        num_epochs=1, shuffle=False))
    for batch in batches:
        accumulators = [generator.add_input(accumulator, batch)
                        for generator, accumulator in zip(generators, accumulators, strict=True)]
    return stats_impl.extract_statistics_output(accumulators, generators)


def _asks_for_more(exec_properties: dict[str, Any], input_dict: dict[str, list[types.Artifact]]) -> bool:
    """StatisticsGen's settings dtfx never sets: a schema input, excluded splits, per-split sampling, sharded output."""
    return bool(input_dict.get(standard_component_specs.SCHEMA_KEY)
                or json_utils.loads(exec_properties.get(standard_component_specs.EXCLUDE_SPLITS_KEY) or "null")
                or json_utils.loads(exec_properties.get(standard_component_specs.SAMPLE_RATE_BY_SPLIT_KEY) or "null")
                or exec_properties.get(standard_component_specs.SHARDED_STATS_OUTPUT_KEY))
