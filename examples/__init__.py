"""Programs that use the ladder inside a model (run them from the project's root with ``python -m``)."""
