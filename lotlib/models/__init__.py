"""Models and what they read: loading (embedded GGUF, folder, hub), the model-agnostic view (`view.py`, the only
place in lotlib that knows which architecture a model is), capture of trajectories with their disk cache,
corpora and data files, and the bounds a parameter must fit."""
