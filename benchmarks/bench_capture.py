"""Throughput and peak memory of `lotlib.capture` against two references, from one run.

    python benchmarks/bench_capture.py [--model smollm2-135m] [--n-s 384] [--batch-size 32] [--rounds 3]
                                        [--passes 1] [--device cpu]

Methods, each over the same Walden batches (N_k = 50):
  capture  lotlib.capture: base model + forward hooks, last position of every block
  bare     the base model's forward alone (no hooks, nothing kept): the ceiling
  hf       AutoModelForCausalLM(..., output_hidden_states=True), keeping the last position of each
           hidden state (the authors' method; it also computes logits at every position)
Each method runs in its own child process (so peak RSS is its own), `--rounds` times interleaved
with the order rotated; inside a child the corpus is timed `--passes` times after a warm-up batch, and the
best pass per method is kept (on a GPU one pass of 2048 sequences takes about a second, shorter than the
noise between child processes: use several). Targets: capture/bare >= 0.95, capture/hf >= 1.3.
When torch sees a CUDA GPU and the main comparison is not already on it, capture and the bare forward are
also timed there (synchronized), with the peak GPU memory of each: capture copies each batch's states to
the host as it goes, so the GPU holds one batch.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(method: str, model_name: str, n_s: int, batch_size: int, device: str = "cpu", passes: int = 1) -> dict:
    """One method's fastest of `passes` timed passes over the corpus, with its peak memory."""
    import torch

    import lotlib

    torch.set_grad_enabled(False)
    lm = lotlib.load_model(model_name, device=device)
    ids = lotlib.walden(lm.tokenizer, n_k=50, n_s=n_s).ids
    batches = [torch.from_numpy(ids[i:i + batch_size]).to(lm.device) for i in range(0, len(ids), batch_size)]
    lm.view.base(input_ids=batches[0], use_cache=False)  # warm-up
    on_gpu = lm.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        loaded = torch.cuda.memory_allocated()
    base_rss = _rss_mb()
    seconds = min(_timed_pass(method, lm, ids, batches, batch_size) for _ in range(passes))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu = (torch.cuda.max_memory_allocated() - loaded) / 2**20 if on_gpu else None
    return {"method": method, "seconds": seconds, "sequences_per_s": len(ids) / seconds,
            "peak_rss_mb": peak, "peak_above_loaded_mb": peak - base_rss, "gpu_peak_above_loaded_mb": gpu}


def _timed_pass(method: str, lm, ids, batches: list, batch_size: int) -> float:
    """Seconds for one pass of `method` over the corpus, synchronized on a GPU."""
    import numpy as np
    import torch

    import lotlib

    start = time.perf_counter()
    if method == "capture":
        lotlib.capture(lm, ids, batch_size=batch_size, progress=False)
    elif method == "bare":
        with torch.inference_mode():
            for b in batches:
                lm.view.base(input_ids=b, use_cache=False)
    elif method == "hf":
        kept = []
        with torch.inference_mode():
            for b in batches:
                hs = lm.hf(input_ids=b, output_hidden_states=True, use_cache=False).hidden_states
                kept.append(np.stack([h[:, -1].cpu().numpy() for h in hs], axis=1))
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n-s", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=1, help="timed passes over the corpus in each child")
    parser.add_argument("--device", default="cpu", help="device of the main comparison (cuda is added when present)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.model, args.n_s, args.batch_size, args.device, args.passes)))
        return
    best = _best_of(["capture", "bare", "hf"], args, args.device)
    cap, bare, hf = best["capture"], best["bare"], best["hf"]
    print(f"\n{args.model}, {args.n_s} pseudo-sentences of 50 tokens, batch {args.batch_size}, best of {args.rounds} x {args.passes} passes")
    for m in (cap, bare, hf):
        print(f"  {m['method']:8s} {m['sequences_per_s']:7.1f} seq/s   peak RSS {m['peak_rss_mb']:6.0f} MB "
              f"({m['peak_above_loaded_mb']:+.0f} MB above the loaded model)")
    print(f"throughput capture / bare forward = {cap['sequences_per_s'] / bare['sequences_per_s']:.3f} (target >= 0.95)")
    print(f"throughput capture / hf hidden states = {cap['sequences_per_s'] / hf['sequences_per_s']:.3f} (target >= 1.3)")
    print(f"bound from the work hf adds (LM head over every position, as multiply-adds per token): "
          f"{_head_bound(args.model):.3f}")
    _cuda_comparison(args)


def _best_of(methods: list[str], args, device: str) -> dict[str, dict]:
    """Each method `args.rounds` times in child processes, the order rotated; the fastest run per method."""
    best: dict[str, dict] = {}
    for r in range(args.rounds):
        for method in methods[r % len(methods):] + methods[:r % len(methods)]:  # no method always runs first
            out = subprocess.run([sys.executable, __file__, "--child", method, "--model", args.model, "--n-s",
                                  str(args.n_s), "--batch-size", str(args.batch_size), "--device", device,
                                  "--passes", str(args.passes)],
                                 check=True, capture_output=True, text=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            print(f"round {r + 1} {device} {method:8s} {result['seconds']:7.2f} s  peak RSS "
                  f"{result['peak_rss_mb']:7.0f} MB", flush=True)
            if method not in best or result["seconds"] < best[method]["seconds"]:
                best[method] = result
    return best


def _cuda_comparison(args) -> None:
    """Capture against the bare forward on the GPU, when torch sees one."""
    import torch

    if args.device == "cuda":
        return  # the main comparison already ran there
    if not torch.cuda.is_available():
        print("\nno CUDA GPU visible to torch: the cuda comparison (capture vs bare forward on the GPU) is skipped")
        return
    best = _best_of(["capture", "bare"], args, "cuda")
    cap, bare = best["capture"], best["bare"]
    print(f"\ncuda ({torch.cuda.get_device_name()}): capture {cap['sequences_per_s']:.1f} seq/s, bare "
          f"{bare['sequences_per_s']:.1f} seq/s, ratio {cap['sequences_per_s'] / bare['sequences_per_s']:.3f}; "
          f"peak GPU memory above the loaded model: capture {cap['gpu_peak_above_loaded_mb']:.0f} MB, "
          f"bare {bare['gpu_peak_above_loaded_mb']:.0f} MB")


def _head_bound(model_name: str) -> float:
    """(blocks + LM head) / blocks in multiply-adds per token: the speed-up that skipping the head can give."""
    import lotlib

    view = lotlib.load_model(model_name).view
    blocks = sum(p.numel() for b in view.blocks for p in b.parameters() if p.dim() == 2)
    return (blocks + view.W_U.numel()) / blocks


if __name__ == "__main__":
    main()
