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
#   needs: [readout]
# ---

# %% [markdown]
# # Sweeps: a chapter over a grid of parameters
#
# **What you will see.** A real sweep, run while this page was built: one chapter executed over the
# cartesian product of a small grid, each run in its own folder with its executed notebook and its summary,
# then one table of every run and one figure of a chosen quantity against a swept parameter, with a 95%
# confidence band over the runs that differ only by their seed.
#
# **Why it matters.** The papers report single numbers for single settings. How a measurement moves with
# N_k, τ, the layer, the model or the seed is what a reader most often wants next, and the spread over seeds
# says how much of a difference between two settings is noise. The same command runs any chapter:
#
# ```bash
# lotlib sweep c2_travel_full_space -p n_k 10,25,50 -p seed 0,1,2 --quick --plot trip_difference
# lotlib sweep b4_residuals --grid my_grid.yml --workers 2          # a YAML file: name -> list of values
# lotlib sweep b3_extrapolation -p model smollm2-135m,gemma3-270m --scheduler tcp://10.0.0.5:8786  # Dask
# ```
#
# Runs go to parallel worker processes (or a Dask cluster); a run that finished is skipped when the sweep
# is started again, a run that fails records its error and the others go on, and the shared trajectory
# cache is locked so that two runs never compute the same entry twice.

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # the model every run uses (the book's model)
device: str = "auto"  # where the model runs: auto, cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
chapter: str = "c2_travel_full_space"  # the chapter to sweep (a name in notebooks/)
grid: dict = {"n_k": [10, 25, 50], "seed": [0, 1, 2]}  # swept parameters
base: dict = {"n_sentences": 32, "n_boot": 500}  # fixed parameters of every run
y: str = "trip_difference"  # the summary value to plot
x: str = "n_k"  # the swept parameter on the x axis
hue: "str | None" = None  # a swept parameter drawn as lines (None: a band over all)
workers: int = 2  # parallel worker processes
out: str = "sweep-demo"  # sweep folder, beside this executed notebook

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.book.sweep import run_sweep, sweep_summary
from lotlib.summary import glue, record

plots.apply_theme()

# %% [markdown]
# The sweep is one call: the chapter's source, the grid, the folder, and the parameters every run shares.
# Each run is a real execution of the chapter by papermill, in its own folder; its values are read from its
# executed notebook, never from a file another run could have written.

# %%
source = project_root() / "notebooks" / f"{chapter}.py"
common = {**base, "model": model, "device": device, "dtype": dtype}
table = run_sweep(source, grid, out, base=common, workers=workers)
table[["status", *grid, y]]

# %% [markdown]
# One row per run: whether it finished, the swept parameters it ran with, and the value it recorded (the
# full table, `results.csv`, has every recorded value, an Estimate as three columns: value, `_lo`, `_hi`).
# A run is named by its parameters, so the same grid started again finds its finished runs and skips them;
# a changed chapter, parameter or lotlib module makes a run stale, and it runs again.
#
# {glue:text}`runs` runs of {glue:text}`chapter` on {glue:text}`model`: {glue:text}`runs_ok` finished,
# {glue:text}`runs_failed` failed; their executed notebooks and `results.csv` are in the folder
# {glue:text}`out` beside this page's notebook. A failed run would show its error in the table and leave
# the others standing; started again, the sweep would run only what did not finish.

# %%
plots.sweep_plot(table, y, x, hue)
plt.show()
# %% tags=["remove-input"]
values, by_x = sweep_summary(table, x, y)
glue("chapter", chapter), glue("model", model), glue("out", out), glue("by_x", by_x)
record(values)

# %% [markdown]
# The figure is `lotlib.plots.sweep_plot`, seaborn's line with its 95% band over repeated runs; the command
# line draws the same with `--plot VALUE`.
#
# **What to notice.** Each point is the mean of the runs that share an x value (one executed notebook each)
# and the band its 95% confidence interval over those runs, here the seeds, which choose the pseudo-sentences
# a run reads. Where the bands of two x values overlap, the sweep cannot tell the settings apart at this
# size. The means and standard deviations over the other swept parameters, by x: {glue:text}`by_x`.
#
# **Going further.** The grid may name any parameter of the chapter, the model included, and several at
# once: the runs are the cartesian product. On one machine the runs share its cores through the worker
# pool; with `--scheduler` they go to a Dask cluster, and the trajectory cache (locked, keyed by the model,
# its dtype and the corpus) is shared so that no two runs compute the same forward pass.
