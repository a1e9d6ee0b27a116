"""The `beam:` section: what it accepts, what it refuses and why, and the options every Beam stage gets."""

from __future__ import annotations

import pytest

from dtfx.pipeline.beam_config import BeamSection
from dtfx.pipeline.beam_pipeline_args import masked, pipeline_args, runner_name
from dtfx.pipeline.builder import build_pipeline
from dtfx.pipeline.errors import ConfigError
from dtfx.pipeline.loader import load_config

PORTABLE = {"runner": "portable", "portable": {"job_endpoint": "localhost:8099",
                                               "environment": {"type": "external", "config": "localhost:50000"}}}
FLINK = {"runner": "flink", "flink": {"master": "flink-jobmanager:8081", "parallelism": 8,
                                      "environment": {"type": "external", "config": "localhost:50000"}}}


def test_the_default_is_the_in_memory_direct_runner_with_one_worker():
    assert pipeline_args(BeamSection()) == ["--runner=DirectRunner", "--pickle_library=cloudpickle",
                                            "--direct_running_mode=in_memory", "--direct_num_workers=1"]
    threads = BeamSection(direct={"mode": "multi_threading", "workers": "auto"})
    assert pipeline_args(threads)[2:] == ["--direct_running_mode=multi_threading", "--direct_num_workers=0"]


def test_each_runner_gets_its_options_and_the_extra_args_come_last():
    assert pipeline_args(BeamSection(**PORTABLE, args=["--experiments=beam_fn_api"])) == [
        "--runner=PortableRunner", "--pickle_library=cloudpickle", "--job_endpoint=localhost:8099", "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000", "--experiments=beam_fn_api"]
    assert pipeline_args(BeamSection(**FLINK)) == [
        "--runner=FlinkRunner", "--pickle_library=cloudpickle", "--flink_master=flink-jobmanager:8081", "--parallelism=8",
        "--environment_type=EXTERNAL", "--environment_config=localhost:50000"]
    spark = BeamSection(runner="spark", spark={"master_url": "spark://m:7077", "environment": {"type": "docker"}})
    assert pipeline_args(spark, image="registry/dtfx:1") == [
        "--runner=SparkRunner", "--pickle_library=cloudpickle", "--spark_master_url=spark://m:7077", "--environment_type=DOCKER",
        "--environment_config=registry/dtfx:1"]
    dataflow = BeamSection(runner="dataflow", dataflow={"project": "p", "region": "europe-west4",
                                                        "temp_location": "gs://b/tmp", "max_workers": 20})
    assert pipeline_args(dataflow, image="registry/dtfx:1") == [
        "--runner=DataflowRunner", "--pickle_library=cloudpickle", "--project=p", "--region=europe-west4", "--temp_location=gs://b/tmp",
        "--max_num_workers=20", "--sdk_container_image=registry/dtfx:1"]


@pytest.mark.parametrize("beam, fragment", [
    ({"runner": "flink"}, "runner flink needs the beam.flink section"),
    ({"runner": "spark", "spark": {"master_url": "spark://m:7077", "environment": {"type": "loopback"}}},
     "environment type loopback cannot work with runner spark on a cluster"),
    ({"runner": "direct", "flink": {"master": "m:8081", "environment": {"type": "loopback"}}},
     "beam.flink: environment type loopback cannot work"),  # a profile not chosen is checked too
    ({"runner": "portable", "portable": {"job_endpoint": "beam-job-server:8099", "environment": {"type": "loopback"}}},
     "loopback cannot work with runner portable on a cluster"),
    ({"runner": "portable", "portable": {"job_endpoint": "localhost:8099", "environment": {"type": "external"}}},
     "environment type external needs config"),
    ({"runner": "dataflow", "dataflow": {"project": "p", "region": "r", "temp_location": "/tmp/x"}},
     "must be a gs:// path"),
    ({"args": ["runner=FlinkRunner"]}, "is not a pipeline option"),
])
def test_combinations_that_cannot_work_are_refused_with_the_reason(write_config, beam, fragment):
    with pytest.raises(ConfigError) as raised:
        load_config(str(write_config(beam=beam)))
    assert fragment in str(raised.value) and "beam" in str(raised.value)


def test_the_issues_sample_with_every_runner_profile_is_valid_and_only_the_chosen_one_is_read(write_config):
    sample = {
        "runner": "direct", "direct": {"mode": "in_memory", "workers": "auto"},
        "portable": {"job_endpoint": "localhost:8099", "environment": {"type": "external", "config": "localhost:50000"}},
        "flink": FLINK["flink"],
        "spark": {"master_url": "spark://spark-master:7077", "environment": {"type": "docker"}},
        "dataflow": {"project": "my-project", "region": "europe-west4", "temp_location": "gs://bucket/tmp",
                     "machine_type": "n2-standard-8", "max_workers": 20},
        "args": [],
    }
    config = load_config(str(write_config(beam=sample)))
    assert pipeline_args(config.beam)[0] == "--runner=DirectRunner" and not config.beam.on_a_cluster()
    flink = load_config(str(write_config(beam={**sample, "runner": "flink"})), check_data=False)
    assert pipeline_args(flink.beam)[:3] == ["--runner=FlinkRunner", "--pickle_library=cloudpickle",
                                             "--flink_master=flink-jobmanager:8081"]


def test_a_worker_image_other_than_the_pipeline_image_is_refused(write_config):
    beam = {"runner": "spark", "spark": {"master_url": "spark://m:7077",
                                         "environment": {"type": "docker", "config": "other/image:2"}}}
    with pytest.raises(ConfigError, match="is not kubeflow.image registry/dtfx:1"):
        load_config(str(write_config(beam=beam, kubeflow={"image": "registry/dtfx:1"})))


def test_a_local_run_refuses_a_cluster_runner(write_config):
    from dtfx.pipeline.errors import UserError
    from dtfx.pipeline.local_runner import run_local

    config = load_config(str(write_config(beam=FLINK)))
    with pytest.raises(UserError, match="beam.runner flink runs the Beam stages on a cluster"):
        run_local(config)


def test_every_beam_stage_of_the_built_pipeline_gets_the_same_options(write_config):
    config = load_config(str(write_config(beam={**PORTABLE, "args": ["--sdk_location=container"]})))
    pipeline = build_pipeline(config)
    assert pipeline.beam_pipeline_args == pipeline_args(config.beam)
    assert runner_name(pipeline.beam_pipeline_args) == "PortableRunner"


def test_credentials_in_options_are_masked():
    args = ["--runner=DataflowRunner", "--s3_secret_access_key=abc", "--auth_token=xyz", "--project=p"]
    assert masked(args) == ["--runner=DataflowRunner", "--s3_secret_access_key=****", "--auth_token=****", "--project=p"]

