"""The train step's Kubernetes training job: its manifest, the API that creates and watches it, the step's launcher."""
