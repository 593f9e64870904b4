# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Sweeps: a chapter over a grid of parameters
#
# **What you will see.** A real sweep, run while this page was built: one chapter notebook executed
# over the cartesian product of a small grid, each run in its own folder with its executed notebook and
# its summary, then one table of every run and one figure of a chosen quantity against a swept
# parameter.
#
# **Why it matters.** The papers report single numbers for single settings. How the ensemble's
# dimension, the noise law's λ or the extrapolation accuracy move with the model, N_k, τ, the layer or
# the seed is what a reader most often wants next. The same command runs any chapter:
#
# ```bash
# lotlib sweep lines_of_thought -p n_k 10,25,50 -p seed 0,1 --quick --plot k90_over_d_last_layer --hue seed
# lotlib sweep b4_residuals --grid my_grid.yml --workers 2          # a YAML file: name -> list of values
# lotlib sweep b3_extrapolation -p model smollm2-135m,gemma3-270m --scheduler tcp://10.0.0.5:8786  # Dask
# ```
#
# Runs go to parallel worker processes (or a Dask cluster); a run that finished is skipped when the
# sweep is started again, a run that fails records its error and the others go on, and the shared
# trajectory cache is locked so that two runs never compute the same entry twice.

# %% tags=["parameters"]
notebook: str = "lines_of_thought"  # the chapter to sweep (a name in notebooks/)
grid: dict = {"n_k": [10, 25, 50], "seed": [0, 1]}  # swept parameters
base: dict = {"n_s": 300, "n_pilots": 60}  # fixed parameters of every run
y: str = "k90_over_d_last_layer"  # the summary value to plot
x: str = "n_k"  # the swept parameter on the x axis
hue: "str | None" = "seed"  # a swept parameter drawn as separate lines (None: one line)
workers: int = 2  # parallel worker processes
out: str = "sweep-demo"  # sweep folder, beside this executed notebook

# %%
import matplotlib.pyplot as plt
from IPython.display import HTML

from lotlib.book.pipeline import project_root
from lotlib.plots import sweep_plot
from lotlib.book.summary import record
from lotlib.book.sweep import run_sweep

source = project_root() / "notebooks" / f"{notebook}.py"
table = run_sweep(source, grid, out, base=base, workers=workers)
counts = table["status"].value_counts().to_dict()
print(f"{len(table)} runs of {notebook}: {counts}; results in {out}/results.csv")

# %%
columns = ["status", *grid, y]
HTML(table[columns].to_html(index=False, float_format=lambda v: f"{v:.4g}"))

# %%
sweep_plot(table, y, x, hue)
plt.show()
ok = table[table["status"] == "ok"]
means = ok.groupby(x)[y].mean()
print(f"{y} by {x} (mean over the other parameters): "
      + ", ".join(f"{k}: {v:.4g}" for k, v in means.items()))

# %% [markdown]
# **What to notice.** Each point is the mean of the runs that share an x value (one executed notebook
# each), and its error bar the spread over the other swept parameters, if any. The printed means are
# the figure's numbers: for this chapter, how the share of directions needed for 90% of the last layer's
# squared norm moves with the pseudo-sentence length.

# %%
record({"runs": len(table), "runs_ok": counts.get("ok", 0), "runs_failed": counts.get("failed", 0),
        **{f"{y}_at_{x}_{k}": v for k, v in means.items()}})
