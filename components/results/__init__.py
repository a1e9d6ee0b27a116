"""What a run computed, read once for every place that shows it: the evaluation, the statistics and the anomalies.

The console and summary.json (pipeline/metadata_reader.py), the report (pipeline/report/), the anomaly gate and the
Kubeflow run page (pipeline/kubeflow/steps/run_results/) each read TFMA's output, the statistics and the anomalies
here, and draw the charts they share (the ROC curve) with `charts`, so that the places cannot drift apart. It is in
components/ because steps read it too, and components never import dtfx.pipeline (tests/test_architecture.py).
- `evaluation`: metrics per slice and the validation result (`tfma.load_metrics`, `tfma.load_validation_result`);
- `curves`: the plots per slice (`tfma.load_plots`): curves per class, matrices, calibration buckets, `binary_matrix`;
- `statistics`: the splits' feature statistics and the anomalies data validation found;
- `charts`: inline SVG line and bar charts, the ROC chart among them.
"""
