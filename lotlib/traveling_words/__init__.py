"""Paper A, "Traveling Words" (Molina): the geometry of the norms (A1-A2), reachable tokens (A3), head
probes and their rates (A4-A5), SVD tables (A6), the logit lens and the UMAP map (A7), travel in the full
space. Uses `lotlib.models`, never `lotlib.lines_of_thought`.
"""
