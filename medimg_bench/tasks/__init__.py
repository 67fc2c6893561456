"""Tasks tie a dataset, a model adapter and metrics together for the engine."""
