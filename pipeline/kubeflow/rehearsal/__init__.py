"""`dtfx rehearse`: a compiled pipeline run on this machine as open-source Kubeflow Pipelines would run it, step by step.

command      the `dtfx rehearse` verb: its checks, the S3 API, what it prints
spec         the compiled file as a rehearsal reads it, and what it refuses to run
runner       the tasks in order, each a fresh process with the driver's and the launcher's part around it
environment  a step's environment: the image's, the driver's, and what stands in for the cluster's
report       what the rehearsal did (rehearsal.json), and the outputs the UI's run page would display (run_page)
driver       executor inputs as each backend version's driver writes them
cache        Kubeflow's step cache: its cache key, and the ML Metadata kept between rehearsals
object_store an S3 server on 127.0.0.1 for rehearsals, and the launcher's artifact downloads and uploads
"""
