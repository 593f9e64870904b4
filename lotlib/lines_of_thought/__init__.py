"""Paper B, "Lines of Thought" (Sarfati et al.): the ensemble SVD, linear extrapolation, truncated
next-token distributions, residual statistics, the Langevin model, continuous lines and the null tests.
Uses `lotlib.models`, never `lotlib.traveling_words`.
"""
