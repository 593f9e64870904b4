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

# %% tags=["parameters"]
model: str = "smollm2-135m"  # the model every run uses (the book's model)
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
chapter: str = "c2_travel_full_space"  # the chapter to sweep (a name in notebooks/)
grid: dict = {"n_k": [10, 25, 50], "seed": [0, 1, 2]}  # swept parameters
base: dict = {"n_sentences": 32, "n_boot": 500}  # fixed parameters of every run
y: str = "trip_difference"  # the summary value to plot
x: str = "n_k"  # the swept parameter on the x axis
hue: "str | None" = None  # a swept parameter drawn as separate lines (None: one line, a band over the rest)
workers: int = 2  # parallel worker processes
out: str = "sweep-demo"  # sweep folder, beside this executed notebook

# %% tags=["remove-input"]
import matplotlib.pyplot as plt
from IPython.display import HTML

from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.book.summary import record
from lotlib.book.sweep import run_sweep

plots.apply_theme()
source = project_root() / "notebooks" / f"{chapter}.py"
table = run_sweep(
    source,
    grid,
    out,
    base={**base, "model": model, "device": device, "dtype": dtype},
    workers=workers,
)
counts = table["status"].value_counts().to_dict()
print(
    f"{len(table)} runs of {chapter} on {model}: {counts}; results in {out}/results.csv"
)

# %%
values = plots.sweep_values(table[y])
HTML(
    table.assign(**{y: values})[["status", *grid, y]].to_html(
        index=False, float_format=lambda v: f"{v:.4g}"
    )
)

# %%
plots.sweep_plot(table, y, x, hue)
plt.show()
ok = table[table["status"] == "ok"].assign(**{y: values})
means = ok.groupby(x)[y].mean()
spread = ok.groupby(x)[y].std()
print(
    f"{y} by {x} (mean ± standard deviation over the other swept parameters): "
    + ", ".join(
        f"{k}: {m:.4g} ± {s:.2g}" for k, m, s in zip(means.index, means, spread)
    )
)

# %% [markdown]
# **What to notice.** Each point is the mean of the runs that share an x value (one executed notebook each)
# and the band its 95% confidence interval over those runs, here the seeds, which choose the pseudo-sentences
# a run reads. Where the bands of two x values overlap, the sweep cannot tell the settings apart at this
# size; the printed means and spreads are the figure's numbers.

# %%
record(
    {
        "runs": len(table),
        "runs_ok": counts.get("ok", 0),
        "runs_failed": counts.get("failed", 0),
        **{f"{y}_at_{x}_{k}": v for k, v in means.items()},
    }
)
