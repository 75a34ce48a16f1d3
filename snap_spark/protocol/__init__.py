"""Pure-Python SNAP protocol rules. No Spark import here: notebooks and services use it too."""
