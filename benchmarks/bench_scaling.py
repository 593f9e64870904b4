"""How the heavy B4 analyses scale with the width D, on synthetic ensembles, on the CPU and a CUDA GPU.

    python benchmarks/bench_scaling.py [--sizes 576 1024 2048 4096] [--device cpu cuda] [--layers 32]
                                       [--max-seconds 900]

Every analysis runs on a synthetic ensemble of N_s = 2.8 D pilots over `--layers` layers (a random walk whose
spread grows with the layer and falls off over coordinates), at the quick book's resample count
(`book/parameters.yml`) and again without resamples, so that the full book's count (the notebook's default)
can be projected:

- ensemble SVD: `align_bases(*ensemble_svd(X))`, the aligned bases of every Lines of Thought chapter (the
  Gram matrices and their eigenvectors on the device, the alignment on the host);
- authors' protocol: `b4_authors_protocol.authors_ensembles` (B4, the paper's protocol): the model, x(L) after a
  final norm and the structureless cloud, every resample refitting every layer's basis;
- resampled pairs: `b4_residuals.residual_nulls` (B4): held-out bases of the model and of both nulls, and the
  resampled pairs of each;
- singular expansion: `residuals.pair_statistics` of the whole ensemble in its aligned bases (B4's heatmaps).

Prints one markdown table: per size the seconds and the peak memory (resident memory above the start on the
CPU, `torch.cuda.max_memory_allocated` on CUDA), the exponent of the seconds against D (log-log least
squares over the sizes run), and each analysis's projected time for a 7B model (D = 4096, 32 layers) at the
quick and the full book's resample counts, with their sum per device. A size whose time, projected from the
sizes before it, exceeds --max-seconds is not run but projected (marked *, and listed below the table); a 7B
projection from fewer layers scales with the pairs of layers (L^2; L for the SVD).
"""

from __future__ import annotations

import argparse
import gc
import io
import math
import threading
import time
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import torch

from lotlib.book.build import book_parameters
from lotlib.book.spec import read_spec
from lotlib.chapters.b4_authors_protocol import authors_ensembles
from lotlib.chapters.b4_residuals import residual_nulls
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.residuals import (
    PairLayers,
    pair_statistics,
    singular_coordinates,
)

ROOT = Path(__file__).resolve().parents[1]
PILOTS_PER_WIDTH = 2.8
SEVEN_B = (4096, 32)  # D, layers
GIB = 2.0**30


@dataclass
class Analysis:
    """One analysis: how it runs on an ensemble, whose resample counts apply (None: it draws none) and how
    its cost grows with the layers."""

    name: str
    notebook: str | None
    layer_power: int

    def counts(self) -> tuple[int, int]:
        """The quick and the full book's resample counts."""
        if self.notebook is None:
            return 0, 0
        defaults = read_spec(ROOT / "notebooks" / f"{self.notebook}.py").defaults
        quick = defaults | book_parameters(ROOT, self.notebook, quick=True)
        return quick["n_boot"], defaults["n_boot"]


def rms_view(device: str) -> SimpleNamespace:
    """A stand-in for `ModelView` with an RMS final norm on `device`, for `authors_ensembles`."""

    def final_norm(x: torch.Tensor) -> torch.Tensor:
        return x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()

    return SimpleNamespace(device=device, final_norm=final_norm)


class Synthetic:
    """A synthetic ensemble `X` `(N, L+1, D)` and its aligned bases, computed on first use (untimed)."""

    def __init__(self, X: np.ndarray):
        self.X = X

    @cached_property
    def bases(self) -> tuple[np.ndarray, np.ndarray]:
        return align_bases(*ensemble_svd(self.X))


def run(analysis: Analysis, ens: Synthetic, device: str, n_boot: int) -> None:
    """`analysis` on the synthetic ensemble `ens` with `n_boot` resamples on `device`."""
    X, L = ens.X, ens.X.shape[1] - 1
    if analysis.name == "ensemble SVD":
        align_bases(*ensemble_svd(X, device=device))
    elif analysis.name == "authors' protocol":
        authors_ensembles(X, rms_view(device), n_boot, progress=False, device=device)
    elif analysis.name == "resampled pairs":
        residual_nulls(X, PairLayers.of(L, "synthetic"), n_boot, device=device)
    else:
        U, S = ens.bases
        Y = singular_coordinates(X, U, device)
        pair_statistics(Y, S, np.arange(1, L + 1), progress=False, device=device)


ANALYSES = [
    Analysis("ensemble SVD", None, 1),
    Analysis("authors' protocol", "b4_authors_protocol", 2),
    Analysis("resampled pairs", "b4_residuals", 2),
    Analysis("singular expansion", None, 2),
]


def synthetic_ensemble(D: int, layers: int, seed: int = 0) -> np.ndarray:
    """N_s = 2.8 D trajectories `(N_s, layers + 1, D)` float32: a random walk over the layers (lines to
    extrapolate) with coordinate variances falling as 1 / (1 + i / 8) and a spread growing as e^(0.2 t)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(
        (math.ceil(PILOTS_PER_WIDTH * D), layers + 1, D), dtype=np.float32
    )
    np.cumsum(X, axis=1, out=X)
    X *= (1.0 + np.arange(D, dtype=np.float32) / 8) ** -0.5
    X *= np.exp(0.1 * np.arange(layers + 1, dtype=np.float32))[:, None]
    X += 1.0
    return X


class PeakResident:
    """The process's peak resident memory above its level on entry, sampled every few milliseconds."""

    def __enter__(self) -> PeakResident:
        self.process, self.done = psutil.Process(), threading.Event()
        self.base = self.peak = self.process.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def above(self) -> int:
        return self.peak - self.base


def measure(
    analysis: Analysis, ens: Synthetic, device: str, n_boot: int
) -> tuple[float, float]:
    """Seconds and peak memory (bytes) of one run; progress bars silenced."""
    gc.collect()
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with PeakResident() as resident, redirect_stderr(io.StringIO()):
        start = time.perf_counter()
        run(analysis, ens, device, n_boot)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds, (
        torch.cuda.max_memory_allocated() - base if cuda else resident.above
    )


@dataclass
class Cell:
    """One analysis at one size: seconds with the quick resamples and with none, peak memory, projected?"""

    seconds: float
    bare: float
    memory: float
    projected: bool = False


@dataclass
class Row:
    """One analysis on one device: its cells by width D."""

    analysis: Analysis
    device: str
    cells: dict[int, Cell] = field(default_factory=dict)

    def measured(self) -> list[int]:
        return [D for D, c in self.cells.items() if not c.projected]

    def exponent(self, attr: str = "seconds") -> float | None:
        """Log-log least-squares slope of `attr` against D over the sizes run (None below two)."""
        sizes = self.measured()
        values = [getattr(self.cells[D], attr) for D in sizes]
        if len(sizes) < 2 or min(values) <= 0:
            return None
        return float(np.polyfit(np.log(sizes), np.log(values), 1)[0])

    def project(self, D: int, layers: int = 0, to_layers: int = 0) -> Cell:
        """The cell at width D (and `to_layers` layers, from `layers`) from the largest size run, by the
        exponents (cubic in D where only one size ran, memory quadratic)."""
        ref, p, m = max(self.measured()), self.exponent(), self.exponent("memory")
        cell, p, m = self.cells[ref], 3.0 if p is None else p, 2.0 if m is None else m
        scale = (D / ref) ** p * (
            (to_layers / layers) ** self.analysis.layer_power if layers else 1.0
        )
        return Cell(
            cell.seconds * scale,
            cell.bare * scale,
            cell.memory * (D / ref) ** m,
            projected=True,
        )


def benchmark(
    rows: list[Row], sizes: list[int], layers: int, max_seconds: float
) -> None:
    """Fill `rows` size by size (one ensemble per size), projecting every cell whose time projected from the
    sizes before it exceeds `max_seconds`."""
    for D in sizes:
        ens = None
        for row in rows:
            if row.cells:
                guess = row.project(D)
                if guess.seconds + guess.bare > max_seconds:
                    row.cells[D] = guess
                    continue
            ens = Synthetic(synthetic_ensemble(D, layers)) if ens is None else ens
            if row.analysis.name == "singular expansion":
                _ = ens.bases  # its input, computed before the timing
            quick, _ = row.analysis.counts()
            seconds, memory = measure(row.analysis, ens, row.device, quick)
            bare, bare_memory = (
                measure(row.analysis, ens, row.device, 0)
                if quick
                else (seconds, memory)
            )
            row.cells[D] = Cell(seconds, bare, max(memory, bare_memory))
        del ens
        gc.collect()


def seven_b(row: Row, layers: int) -> tuple[float, float]:
    """Projected seconds for a 7B model at the quick and the full book's resample counts."""
    quick, full = row.analysis.counts()
    D7, L7 = SEVEN_B
    cell = (
        row.cells[D7]
        if D7 in row.cells and layers == L7
        else row.project(D7, layers, L7)
    )
    extra = (cell.seconds - cell.bare) * (full / quick) if quick else 0.0
    return cell.seconds, (cell.bare + extra if quick else cell.seconds)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def size(nbytes: float) -> str:
    if nbytes >= GIB:
        return f"{nbytes / GIB:.3g} GiB"
    return f"{nbytes / 2**20:.3g} MiB"


def table(rows: list[Row], sizes: list[int], layers: int) -> str:
    """The markdown table of `rows`."""
    head = ["analysis", "device"] + [
        f"D = {D} (N_s = {math.ceil(PILOTS_PER_WIDTH * D):,})" for D in sizes
    ]
    head += ["exponent", "7B quick", "7B full"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    totals: dict[str, list[float]] = {}
    for row in rows:
        cells = []
        for D in sizes:
            c = row.cells[D]
            mark = "*" if c.projected else ""
            cells.append(f"{duration(c.seconds)}{mark}, {size(c.memory)}{mark}")
        p = row.exponent()
        quick, full = seven_b(row, layers)
        total = totals.setdefault(row.device, [0.0, 0.0])
        total[0] += quick
        total[1] += full
        exponent = "—" if p is None else f"{p:.2f}"
        lines.append(
            "| "
            + " | ".join(
                [
                    row.analysis.name,
                    row.device,
                    *cells,
                    exponent,
                    duration(quick),
                    duration(full),
                ]
            )
            + " |"
        )
    for device, (quick, full) in totals.items():
        blank = [""] * (len(sizes) + 1)
        lines.append(
            "| "
            + " | ".join(["all four", device, *blank, duration(quick), duration(full)])
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[576, 1024, 2048, 4096])
    parser.add_argument(
        "--device",
        nargs="+",
        default=["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"],
    )
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    # warm every path (imports, CUDA context, kernels) on a small ensemble before timing
    small = Synthetic(synthetic_ensemble(32, 3))
    rows = []
    for analysis in ANALYSES:
        for device in args.device:
            with redirect_stderr(io.StringIO()):
                run(analysis, small, device, 1)
            rows.append(Row(analysis, device))
    benchmark(rows, sizes, args.layers, args.max_seconds)
    print(
        f"{args.layers} layers, N_s = {PILOTS_PER_WIDTH} D pilots; resamples (quick, full): "
        + ", ".join(f"{a.name} {a.counts()}" for a in ANALYSES if a.notebook)
    )
    print()
    print(table(rows, sizes, args.layers))
    projected = [(r, D) for r in rows for D in sizes if r.cells[D].projected]
    print()
    if projected:
        print(
            "Projected, not run (*): "
            + "; ".join(
                f"{r.analysis.name} on {r.device} at D = {D}" for r, D in projected
            )
        )
    print(
        f"7B: D = {SEVEN_B[0]}, {SEVEN_B[1]} layers, N_s = {PILOTS_PER_WIDTH} D, from the largest size run "
        "by its exponent; full: the resamples' share of the quick time scaled to the full count."
    )


if __name__ == "__main__":
    main()
