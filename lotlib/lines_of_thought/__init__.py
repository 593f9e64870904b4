"""Paper B, "Lines of Thought" (Sarfati et al.): its building blocks (bases, Eq. 1, truncation, residuals, the
Langevin model, continuous lines, nulls); the chapters' studies are in `lotlib.chapters`."""
