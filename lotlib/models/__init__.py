"""Models and what they read: loading (embedded GGUF, folder, hub), the model-agnostic view, capture of
trajectories with their disk cache, corpora and data files, and the bounds a parameter must fit.

`view.py` is the only place in lotlib that knows which architecture a model is.
"""
