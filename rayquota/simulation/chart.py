"""The simulation report as a chart (PNG): utilisation and pending workloads over time, and
the wait to admission per workload class and per ClusterQueue.

Bars of one group stand side by side, never on top of each other (a translucent bar over
another mixes their colours and the legend no longer matches), and every bar carries its
value, so a class that waited one second while others waited an hour is still readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rayquota.queueing.topology.fit import level_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure

CLASS_PERCENTILES = ("p50", "p90", "p99")
QUEUE_STATS = ("mean", "p90")
MOST_QUEUES_AS_BARS = 30


def seconds_label(value: float) -> str:
    """A wait as a bar's label: tenths below ten seconds, whole seconds above."""
    if value < 10:
        return f"{value:.1f}".rstrip("0").rstrip(".") or "0"
    return f"{value:,.0f}"


def _label(ax: Axes, bars: BarContainer, values: Sequence[float]) -> None:
    ax.bar_label(bars, labels=[seconds_label(v) for v in values], padding=2, fontsize=7)


def _title_and_legend(ax: Axes, title: str) -> None:
    """The legend above the panel, beside its title: never over a bar."""
    ax.set_title(title, loc="left")
    ax.legend(fontsize=8, ncol=3, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _utilisation(ax: Axes, report: dict[str, Any], times: list[float]) -> None:
    for resource in report["utilisation_mean"]:
        ax.step(
            times,
            [100 * p["utilisation"].get(resource, 0) for p in report["timeline"]],
            where="post",
            label=f"{resource} (mean {100 * report['utilisation_mean'][resource]:.0f}%)",
        )
    ax.set_title("Quota in use (% of all nominal quota)")
    ax.set_xlabel("time (s)")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower right", fontsize=8)


def _classes(ax: Axes, report: dict[str, Any]) -> None:
    classes = list(report["classes"])
    width = 0.8 / len(CLASS_PERCENTILES)
    for i, key in enumerate(CLASS_PERCENTILES):
        values = [float(report["classes"][c]["wait_s"][key]) for c in classes]
        offset = (i - (len(CLASS_PERCENTILES) - 1) / 2) * width
        bars = ax.bar([x + offset for x in range(len(classes))], values, width, label=key)
        _label(ax, bars, values)
    ax.set_xticks(
        range(len(classes)),
        [
            f"{c}\nmean {seconds_label(report['classes'][c]['wait_s']['mean'])} s\n"
            f"{report['classes'][c]['preemptions']} preempted"
            for c in classes
        ],
    )
    ax.margins(y=0.12)  # room for the labels above the tallest bars
    _title_and_legend(ax, "Wait to admission per class (s)")


def _queues(ax: Axes, report: dict[str, Any]) -> None:
    queues = sorted(report["queues"].items(), key=lambda kv: kv[1]["wait_s"]["p90"])
    if len(queues) <= MOST_QUEUES_AS_BARS:
        height = 0.8 / len(QUEUE_STATS)
        for i, key in enumerate(QUEUE_STATS):
            values = [float(q["wait_s"][key]) for _, q in queues]
            offset = (i - (len(QUEUE_STATS) - 1) / 2) * height
            bars = ax.barh([y + offset for y in range(len(queues))], values, height, label=key)
            _label(ax, bars, values)
        ax.set_yticks(range(len(queues)), [name for name, _ in queues])
        ax.tick_params(axis="y", labelsize=7)
        ax.margins(x=0.12)
    else:
        for key in QUEUE_STATS:
            ax.plot(range(len(queues)), [q["wait_s"][key] for _, q in queues], label=key)
        ax.set_xlabel("ClusterQueues, sorted by p90 wait")
    _title_and_legend(ax, "Wait to admission per ClusterQueue (s)")


def chart(report: dict[str, Any]) -> Figure:
    """Four panels: utilisation over time, pending over time, waits per class, waits per queue."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    domains = report.get("domains")
    rows = 3 if domains else 2
    fig, axes = plt.subplots(rows, 2, figsize=(13, 4.25 * rows), squeeze=False)
    fig.suptitle(
        f"{report['scenario']}: makespan {report['makespan_s']:.1f} s "
        f"(capacity bound {report['capacity_bound_s']:.1f} s), "
        f"{report['preemptions']} preemptions, {report['workloads']} workloads",
        fontsize=12,
    )
    times = [p["t"] for p in report["timeline"]]
    _utilisation(axes[0][0], report, times)
    ax = axes[0][1]
    ax.step(times, [p["pending"] for p in report["timeline"]], where="post", color="tab:orange")
    ax.set_title("Pending workloads")
    ax.set_xlabel("time (s)")
    _classes(axes[1][0], report)
    _queues(axes[1][1], report)
    if domains:
        _domains(axes[2][0], domains)
        axes[2][1].axis("off")
    fig.tight_layout()
    return fig


def _domains(ax: Axes, domains: dict[str, Any]) -> None:
    """Mean and peak use of each topology domain (a rack, say) of its resource."""
    names = list(domains["per_domain"])
    mean = [100 * d["utilisation_mean"] for d in domains["per_domain"].values()]
    peak = [100 * d["utilisation_peak"] for d in domains["per_domain"].values()]
    positions = range(len(names))
    bars = ax.bar(positions, mean, color="tab:blue", label="mean")
    _label(ax, bars, mean)
    ax.plot(positions, peak, "v", color="tab:red", label="peak")
    ax.set_xticks(list(positions), names, rotation=30, ha="right")
    ax.set_ylim(0, 110)
    _title_and_legend(ax, f"{domains['resource']} use per {level_name(domains['level'])} (%)")


def write_chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = chart(report)
    fig.savefig(path, dpi=100)
    plt.close(fig)
