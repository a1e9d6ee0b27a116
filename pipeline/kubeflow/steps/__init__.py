"""The code that runs in a step's pod on Kubeflow (and in `dtfx rehearse`'s step processes): never the compile side."""
