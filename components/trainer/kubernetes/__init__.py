"""Training in the pods of a Kubernetes job (TFJob or TrainJob), as the train step does on Kubeflow."""
