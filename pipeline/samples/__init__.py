"""Sample data sets made on this machine (nothing is downloaded): `dtfx sample-data NAME DIR`."""
