"""Figures of Part II (Lines of Thought): each takes measured arrays and returns or draws one figure in the
book's theme (`lotlib.plots.apply_theme`), so that a chapter's cell is the one call a reader would copy."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

# --- B1 lines of thought, B2 ensemble SVD, C3 continuous lines -----------------------------------------

# --- B3 extrapolation, B4 residuals -------------------------------------------------------------------

# --- B5 Langevin, C4 null tests, C5 other models -------------------------------------------------------
