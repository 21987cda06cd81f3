"""``rayquota simulate SCENARIO.yaml [--out DIR]``: run a scenario, write report.json and report.png."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .chart import write_chart
from .report import build_report, summary
from .scenario import ScenarioError, load_scenario
from .simulator import Simulation


def main(scenario: Path, out: Path | None) -> int:
    try:
        parsed = load_scenario(scenario)
    except (OSError, ScenarioError, KeyError, TypeError) as exc:
        print(f"rayquota simulate: {scenario}: {exc}", file=sys.stderr)
        return 2
    result = Simulation(parsed).run()
    report = build_report(result)
    out_dir = out if out is not None else Path("simulation-out") / parsed.name
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    write_chart(report, out_dir / "report.png")
    print(summary(report))
    print(f"  wrote {out_dir / 'report.json'} and {out_dir / 'report.png'}")
    return 0
