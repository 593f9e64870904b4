"""Paper A's building blocks ("Traveling Words", Molina): vocabulary, norms, head probes and SVD, lens, reachability, travel, UMAP."""
