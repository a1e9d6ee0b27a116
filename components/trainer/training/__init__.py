"""What one training process is made of: its input, network, devices, signatures, measurements."""
