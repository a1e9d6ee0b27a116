"""The `run_results` step of a compiled Kubeflow pipeline: what the run computed, as outputs the Kubeflow UI displays.

Every TFX output is a `tfx.*` artifact, which the run page lists but does not display. This step,
added by `dtfx compile` after evaluate (pipeline/kubeflow/compiler.py), reads the evaluation, the
blessing, the statistics and the anomalies and writes four outputs typed as the UI reads them
(kubeflow/pipelines 2.17.0 and 2.0.0, frontend/src/components/viewers/MetricsVisualizations.tsx):
`system.Metrics`, `system.ClassificationMetrics`, `system.HTML` and `system.Markdown`
(`ui_outputs`). `evaluation` and `data` read the inputs, `pages` writes the two pages, `step` is
the container's entrypoint.
"""
