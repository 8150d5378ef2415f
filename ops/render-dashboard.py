#!/usr/bin/env python3
"""Renders ops/grafana/wasmkeep.json from a Prometheus as a PNG.

Each panel's queries run against the Prometheus given (its HTTP API,
`/api/v1/query_range`) over the window given, with the dashboard's
variables at "All" and `$__rate_interval` as Grafana would take it for a
scrape interval of `--scrape` seconds; the panels are drawn where the
dashboard's grid puts them. It is how docs/images/dashboard.png is made
from a load run (docs/observability.md says how), and a way to look at the
dashboard without a Grafana.

    pip install matplotlib
    python3 ops/render-dashboard.py --prometheus http://127.0.0.1:9090 \\
        --start 1764600000 --end 1764600600 --out dashboard.png
"""

import argparse
import json
import math
import pathlib
import re
import sys
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

BACKGROUND = "#111217"
PANEL = "#181b1f"
TEXT = "#ccccdc"
GRID = "#2c3235"
COLOURS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0", "#37872d"]


def query_range(prometheus, expr, start, end, step):
    args = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{args}", timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise SystemExit(f"{expr}: {body.get('error', body)}")
    return body["data"]["result"]


def legend(fmt, labels):
    if not fmt:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)


def si(value, suffix=""):
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{suffix}".rstrip()
    return f"{value:.3g}{' ' + suffix if suffix else ''}"


def formatter(unit):
    def seconds(v):
        if v == 0:
            return "0"
        for factor, name in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(v) >= factor:
                return f"{v / factor:.3g} {name}"
        return f"{v * 1e9:.3g} ns"

    def bytes_(v):
        for factor, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(v) >= factor:
                return f"{v / factor:.3g} {name}"
        return f"{v:.0f} B"

    table = {
        "s": seconds,
        "bytes": bytes_,
        "percentunit": lambda v: f"{v * 100:.3g}%",
        "reqps": lambda v: si(v, "req/s"),
        "ops": lambda v: si(v, "ops/s"),
    }
    return FuncFormatter(lambda v, _pos: table.get(unit, si)(v))


def main():
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090")
    parser.add_argument("--start", type=float, required=True, help="unix seconds")
    parser.add_argument("--end", type=float, required=True, help="unix seconds")
    parser.add_argument("--step", type=float, default=5, help="seconds between points")
    parser.add_argument("--scrape", type=float, default=5, help="the scrape interval, seconds")
    parser.add_argument("--dashboard", default=str(here / "grafana" / "wasmkeep.json"))
    parser.add_argument("--title", default="")
    parser.add_argument("--out", default="dashboard.png")
    args = parser.parse_args()

    dashboard = json.loads(pathlib.Path(args.dashboard).read_text())
    # Grafana's $__rate_interval: at least four scrapes, at least a step
    # and a scrape.
    rate = f"{int(max(4 * args.scrape, args.step + args.scrape))}s"
    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_w, unit_h = 0.62, 0.42
    figure = plt.figure(figsize=(24 * unit_w, rows * unit_h + 0.8), facecolor=BACKGROUND)
    height = rows * unit_h + 0.8
    title = args.title or dashboard.get("title", "")
    figure.text(0.01, 1 - 0.35 / height, title, color=TEXT, fontsize=14, weight="bold", va="center")
    empty = []
    for panel in panels:
        g = panel["gridPos"]
        pad_x, pad_top, pad_bottom = 0.012, 0.55 / height, 0.35 / height
        # Room on the left for the y axis' labels ("5.5 kreq/s").
        left = g["x"] / 24 + pad_x * 4
        width = g["w"] / 24 - pad_x * 5
        top = 1 - (0.8 + g["y"] * unit_h) / height
        bottom = 1 - (0.8 + (g["y"] + g["h"]) * unit_h) / height
        frame = figure.add_axes((g["x"] / 24 + 0.003, bottom + 0.002, g["w"] / 24 - 0.006, top - bottom - 0.004))
        frame.set_facecolor(PANEL)
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color(GRID)
        frame.text(0.015, 0.96, panel["title"], color=TEXT, fontsize=10, weight="bold", va="top",
                   transform=frame.transAxes)
        ax = figure.add_axes((left, bottom + pad_bottom + 0.25 / height, width, top - bottom - pad_top - pad_bottom - 0.25 / height))
        ax.set_facecolor(PANEL)
        ax.tick_params(colors=TEXT, labelsize=7)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.grid(color=GRID, linewidth=0.6)
        ax.yaxis.set_major_formatter(formatter(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
        drawn = 0
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", rate)
            expr = expr.replace("$tenant", ".*").replace("$app", ".*")
            for series in query_range(args.prometheus, expr, args.start, args.end, args.step):
                points = [(float(t), float(v)) for t, v in series["values"] if not math.isnan(float(v))]
                if not points:
                    continue
                # Matplotlib's dates are days since the Unix epoch.
                xs = [t / 86400 for t, _ in points]
                # As Grafana's legend with "hide zero": a series that stayed
                # at zero is drawn, not named.
                zero = all(v == 0 for _, v in points)
                name = None if zero else legend(target.get("legendFormat"), series["metric"])
                ax.plot(xs, [v for _, v in points], linewidth=1.2, color=COLOURS[drawn % len(COLOURS)], label=name)
                drawn += 1
        ax.set_xlim(args.start / 86400, args.end / 86400)
        if drawn:
            ax.set_ylim(bottom=0)
            named = len([h for h in ax.get_legend_handles_labels()[1]])
            if named:
                ax.legend(loc="upper left", fontsize=6.5, frameon=False, labelcolor=TEXT, ncol=min(3, named))
        else:
            empty.append(panel["title"])
            ax.text(0.5, 0.5, "No data", color="#8e8e8e", ha="center", va="center", transform=ax.transAxes)
    figure.savefig(args.out, dpi=110, facecolor=BACKGROUND)
    print(f"{args.out}: {len(panels)} panels, {len(empty)} without data{': ' + ', '.join(empty) if empty else ''}")


if __name__ == "__main__":
    sys.exit(main())
