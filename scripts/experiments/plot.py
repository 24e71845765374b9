#!/usr/bin/env python3
"""Plots of rpa's experiments (PNG, matplotlib), from the JSON in docs/results/.

  plot.py context  [--input docs/results/context.json]  [--output docs/context.png]
  plot.py capacity [--input docs/results/capacity.json] [--output docs/capacity.png]
  plot.py kld      [--input docs/results/kv_sensitivity.json] [--output docs/kld.png]
  plot.py all      (each of the above whose input exists)
  plot.py tables   (the capacity and context results as Markdown tables, to stdout)

Input shapes: context.json from scripts/experiments/run-context, capacity.json from
scripts/experiments/run-capacity, and for `kld` the output of `rpa kv-sensitivity --json`:
JSON Lines, one record per variant (runs of several dtypes may be appended to one file),
or a JSON list of records (or an object holding one under "results", "variants" or "rows"):

  {"variant": "layer:3", "layer": 3, "keys": true, "values": true,
   "kv_cache_dtype": "fp8", "kld_mean": 0.0012, "kld_stderr": 0.0001, "top1": 0.991}

Only kld_mean is required. Tolerated: `kld`/`mean_kld` for kld_mean, `top1_agreement` for
top1, `dtype` for kv_cache_dtype, a layer given only in the variant's text ("layer:3",
"layer 3", "L3"), and which tensors were in fp8 as `keys`/`values` booleans or a `tensor`
("k", "v", "kv"): K-only and V-only variants become their own series. Records without a
layer (layer absent or -1: "all:KV", "fp8-cache") are drawn to the right of the layers, one
position per variant.
"""
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "docs", "results")
COLORS = {"bfloat16": "tab:blue", "float8_e4m3fn": "tab:orange", "float8_e5m2": "tab:green",
          "float32": "tab:gray"}


def color(dtype, i=0):
    return COLORS.get(dtype, f"C{i % 10}")


def load(path):
    """A JSON document, or JSON Lines (one object per line) as a list."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def plot_context(data, output):
    runs = data["runs"]
    fig, (ax_tps, ax_attn, ax_share) = plt.subplots(1, 3, figsize=(17, 4.8))
    max_ctx = None
    batches = sorted({r["batch"] for r in runs})
    styles = ["-", "--", ":", "-."]
    for run in runs:
        res = run["results"]
        x = [r["context"] for r in res]
        style = styles[batches.index(run["batch"]) % len(styles)]
        label = f"{run['kv_cache_dtype']}, batch {run['batch']}"
        c = color(run["kv_cache_dtype"])
        ax_tps.plot(x, [r["decode_tokens_per_s"] for r in res], style, marker="o", color=c,
                    label=label)
        ax_attn.plot(x, [r["attention_ms_median"] for r in res], style, marker="o", color=c,
                     label=label)
        ax_share.plot(x, [100 * r["attention_share"] for r in res], style, marker="o", color=c,
                      label=label)
        max_ctx = run.get("max_context", max_ctx)
    for ax in (ax_tps, ax_attn, ax_share):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length (tokens)")
        ax.grid(True, which="both", alpha=0.3)
        all_x = sorted({r["context"] for run in runs for r in run["results"]})
        ax.set_xticks(all_x)
        ax.set_xticklabels([f"{v // 1024}K" if v >= 1024 else str(v) for v in all_x])
        if max_ctx and all_x and all_x[-1] > max_ctx:
            ax.axvspan(max_ctx, all_x[-1] * 1.05, color="gray", alpha=0.12,
                       label=f"beyond max context ({max_ctx}): timing only")
    ax_tps.set_ylabel("decode tokens/s")
    ax_tps.set_ylim(bottom=0)
    ax_tps.set_title("Decode throughput vs context")
    ax_attn.set_yscale("log")
    ax_attn.set_ylabel("attention ms per step, all layers (log)")
    ax_attn.set_title("Attention kernel time per decode step")
    ax_share.set_ylabel("attention share of step time (%)")
    ax_share.set_ylim(0, 100)
    ax_share.set_title("Attention (kernel) share of the decode step")
    ax_share.legend(fontsize=8, loc="upper left", handlelength=3.5)
    fig.suptitle(f"{data.get('model', '')}: synthetic KV of each length, medians of "
                 f"{runs[0].get('steps', '?')} steps")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def plot_capacity(data, output):
    runs = data["runs"]
    w = data["workload"]
    names = [r["kv_cache_dtype"] for r in runs]
    colors = [color(n, i) for i, n in enumerate(names)]
    panels = [
        ("KV tokens that fit", "kv_capacity_tokens", "{:.0f}"),
        ("peak concurrent sequences", "peak_concurrent_seqs", "{:.0f}"),
        ("throughput: prompt + generated tok/s", "total_tokens_per_s", "{:.1f}"),
        ("preemptions", "preemptions", "{:.0f}"),
        ("prompt tokens computed\n(recomputation included)", "prompt_tokens_computed", "{:.0f}"),
        ("engine steps (forward passes)", "steps", "{:.0f}"),
        ("TTFT p99 (s)", "ttft_p99_ms", "{:.1f}"),
        ("ITL median (s)", "itl_median_ms", "{:.2f}"),
    ]
    panels = [p for p in panels if p[1] in runs[0]]  # older bench-serve JSON lacks some
    cols = (len(panels) + 1) // 2
    fig, axes = plt.subplots(2, cols, figsize=(3.4 * cols, 7.5))
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, key, fmt) in zip(axes.flat, panels):
        values = [r[key] / (1000 if key.endswith("_ms") else 1) for r in runs]
        bars = ax.bar(names, values, color=colors)
        for b, v in zip(bars, values):
            ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=9)
        if "repeats_" + key in runs[0]:  # the mean's individual runs
            for b, r in zip(bars, runs):
                reps = r["repeats_" + key]
                ax.plot([b.get_x() + b.get_width() / 2] * len(reps), reps, "k.", ms=5)
            title += f"\n(mean of {len(runs[0]['repeats_' + key])} runs, dots)"
        if key == "kv_capacity_tokens":
            ax.axhline(w["total_context_tokens"], color="black", ls="--", lw=1)
            ax.annotate("all requests' context", (0.02, w["total_context_tokens"]),
                        xycoords=("axes fraction", "data"), ha="left", va="top", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.15)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"{w['model']}, KV budget {w['kv_cache_memory']}: {w['requests']} requests x "
                 f"({w['prompt_len']} prompt + {w['gen_len']} generated), max {w['max_num_seqs']}"
                 f" seqs")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def first(record, *keys):
    for k in keys:
        if k in record and record[k] is not None:
            return record[k]
    return None


def kld_records(data):
    """Normalizes `rpa kv-sensitivity --json` output (see the module doc) to a list of
    {series, layer (int or None), label, kld, kld_err, top1}; skips records without a KLD."""
    if isinstance(data, dict):
        data = first(data, "results", "variants", "rows") or []
    out = []
    for rec in data:
        if not isinstance(rec, dict):
            continue
        kld = first(rec, "kld_mean", "kld", "mean_kld")
        if kld is None:
            continue
        variant = str(first(rec, "variant", "name") or "")
        layer = first(rec, "layer")
        if layer is None:
            m = re.search(r"(?:layer[\s:]*|\bL)(\d+)\b", variant, re.IGNORECASE)
            layer = int(m.group(1)) if m else None
        if layer is not None and int(layer) < 0:  # -1: every layer
            layer = None
        dtype = str(first(rec, "kv_cache_dtype", "dtype") or "?")
        tensor = first(rec, "tensor")
        keys, values = rec.get("keys"), rec.get("values")
        if tensor is None and keys is not None and values is not None and keys != values:
            tensor = "k" if keys else "v"
        if tensor is not None and str(tensor).lower() == "kv":
            tensor = None
        out.append({"series": dtype + (f" ({tensor})" if tensor else ""), "dtype": dtype,
                    "tensor": str(tensor).lower() if tensor else None,
                    "layer": None if layer is None else int(layer),
                    "label": variant or dtype, "kld": float(kld),
                    "kld_err": first(rec, "kld_stderr"),
                    "top1": first(rec, "top1", "top1_agreement")})
    return out


# kv_cache_dtype strings as users give them -> the dtype they name (for colors).
DTYPE_ALIASES = {"fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
                 "bf16": "bfloat16"}


def plot_kld(data, output):
    recs = kld_records(data)
    if not recs:
        raise SystemExit("plot.py kld: no record with a kld_mean in the input")
    dtypes = list(dict.fromkeys(r["dtype"] for r in recs))
    dtype_color = {d: color(DTYPE_ALIASES.get(d, d), i) for i, d in enumerate(dtypes)}
    series = list(dict.fromkeys(r["series"] for r in sorted(recs, key=lambda r: r["series"])))
    layers = sorted({r["layer"] for r in recs if r["layer"] is not None})
    # Whole-model variants (no layer) go to the right of the layers, one x position each.
    wholes = list(dict.fromkeys(r["label"] for r in recs if r["layer"] is None))
    xpos = {("layer", l): i for i, l in enumerate(layers)}
    base = len(layers) + (1 if layers else 0)
    xpos.update({("whole", w): base + i for i, w in enumerate(wholes)})
    ticks = [str(l) for l in layers] + ([""] if layers else []) + wholes
    has_top1 = any(r["top1"] is not None for r in recs)
    fig, axes = plt.subplots(1, 2 if has_top1 else 1, figsize=(15 if has_top1 else 9, 4.8),
                             squeeze=False)
    panels = [("kld", "mean KL divergence vs the reference (log)")]
    if has_top1:
        panels.append(("top1", "top-1 agreement with the reference"))
    for ax, (key, title) in zip(axes[0], panels):
        for s in series:
            mine = [r for r in recs if r["series"] == s and r[key] is not None]
            if not mine:
                continue
            c = dtype_color[mine[0]["dtype"]]
            # K-only / V-only variants share their dtype's color, told apart by line style.
            ls, marker = {"k": ("--", "s"), "v": (":", "^")}.get(mine[0]["tensor"], ("-", "o"))
            per_layer = sorted([r for r in mine if r["layer"] is not None],
                               key=lambda r: r["layer"])
            for group, line in ((per_layer, ls), ([r for r in mine if r["layer"] is None], "")):
                if not group:
                    continue
                xs = [xpos[("layer", r["layer"]) if r["layer"] is not None else ("whole",
                                                                                  r["label"])]
                      for r in group]
                errs = [r["kld_err"] or 0 for r in group] if key == "kld" else None
                ax.errorbar(xs, [r[key] for r in group],
                            yerr=errs if errs and any(errs) else None, color=c, ls=line or "none",
                            marker=marker if line else "D", ms=4 if line else 6, capsize=2,
                            label=s if group is per_layer or not per_layer else None)
        if layers and wholes:
            ax.axvline(len(layers), color="gray", lw=0.8)
        ax.set_xticks(range(len(ticks)))
        ax.set_xticklabels(ticks, fontsize=7 if len(ticks) > 20 else 9,
                           rotation=0 if not wholes else None)
        for label in ax.get_xticklabels()[base:]:
            label.set_rotation(45)
            label.set_ha("right")
        if layers:
            ax.set_xlabel("layer in the dtype alone (others at the reference dtype) | whole model")
        if key == "kld":
            ax.set_yscale("log")
        else:
            # Agreement sits near 1: zoom to the data so differences between layers show.
            low = min(r["top1"] for r in recs if r["top1"] is not None)
            ax.set_ylim(max(0.0, low - 0.25 * (1 - low) - 0.005), 1.0)
        ax.set_title(title)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def markdown_tables(results_dir):
    """The results as Markdown tables, for docs/experiments.md after a rerun."""
    lines = []
    cap = os.path.join(results_dir, "capacity.json")
    if os.path.exists(cap):
        d = load(cap)
        lines += ["| KV dtype | tokens that fit (pages) | peak seqs | preemptions | prompt tokens "
                  "computed | steps | total tok/s | generated tok/s | TTFT p50 / p99 (s) | "
                  "ITL p50 / p99 (ms) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in d["runs"]:
            lines.append(
                f"| {r['kv_cache_dtype']} | {r['kv_capacity_tokens']} ({r['kv_capacity_pages']}) | "
                f"{r['peak_concurrent_seqs']} | {r['preemptions']} | "
                f"{r.get('prompt_tokens_computed', '?')} | {r.get('steps', '?')} | "
                f"{r['total_tokens_per_s']:.1f} | {r['generated_tokens_per_s']:.1f} | "
                f"{r['ttft_median_ms'] / 1e3:.1f} / {r['ttft_p99_ms'] / 1e3:.1f} | "
                f"{r['itl_median_ms']:.0f} / {r['itl_p99_ms']:.0f} |")
        lines.append("")
    ctx = os.path.join(results_dir, "context.json")
    if os.path.exists(ctx):
        d = load(ctx)
        runs = d["runs"]
        lines += ["| batch | context | " + " | ".join(
                      f"{r['kv_cache_dtype']} tok/s (attn %)" for r in runs if r["batch"] ==
                      runs[0]["batch"]) + " |",
                  "|---|---|" + "---|" * sum(r["batch"] == runs[0]["batch"] for r in runs)]
        for batch in sorted({r["batch"] for r in runs}):
            group = [r for r in runs if r["batch"] == batch]
            for i, res in enumerate(group[0]["results"]):
                cells = [f"{g['results'][i]['decode_tokens_per_s']:.2f} "
                         f"({100 * g['results'][i]['attention_share']:.0f}%)" for g in group]
                mark = " *" if res["beyond_max_context"] else ""
                lines.append(f"| {batch} | {res['context']}{mark} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


PLOTS = {
    "context": (plot_context, "context.json", "context.png"),
    "capacity": (plot_capacity, "capacity.json", "capacity.png"),
    "kld": (plot_kld, "kv_sensitivity.json", "kld.png"),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("which", choices=list(PLOTS) + ["all", "tables"])
    p.add_argument("--input", help="JSON file (default docs/results/<experiment>.json)")
    p.add_argument("--output", help="PNG file (default docs/<experiment>.png)")
    args = p.parse_args()
    if args.which == "tables":
        print(markdown_tables(os.path.dirname(args.input) if args.input else RESULTS))
        return 0
    if args.which == "all":
        if args.input or args.output:
            p.error("--input/--output need a single plot")
        for name, (fn, json_name, png_name) in PLOTS.items():
            path = os.path.join(RESULTS, json_name)
            if os.path.exists(path):
                fn(load(path), os.path.join(ROOT, "docs", png_name))
                print(f"wrote docs/{png_name}")
        return 0
    fn, json_name, png_name = PLOTS[args.which]
    output = args.output or os.path.join(ROOT, "docs", png_name)
    fn(load(args.input or os.path.join(RESULTS, json_name)), output)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
