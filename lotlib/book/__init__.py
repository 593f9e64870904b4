"""The execution engine: chapters run as notebooks (kernels, forked zygotes, local workers or Dask), the book
built from them, sweeps over parameter grids, notebooks exported for Colab and the build's profile. It uses every
room below it; only the command line uses it."""
