"""`numa-agent simulate SCENARIO.yaml`: place a scenario's pods and print where they ran.

Exit 0 when the scenario ran (refused containers are part of its result), 1 when
the scenario file is invalid, a CRI call other than a container's creation failed,
or the --html file cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent.simulate.driver import SimulationError, simulate_file
from agent.simulate.output import render_explanations, render_text, to_html, to_json
from agent.simulate.scenario import ScenarioError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="place a scenario's pods with the real policy on an in-memory runtime",
        description=(
            "Run the pods of a scenario file through the agent's CRI handling against an "
            "in-memory runtime and print the final placement (see docs/simulate.md)."
        ),
    )
    parser.add_argument("scenario", metavar="SCENARIO.yaml", help="the scenario file")
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"containers": [...], "errors": [...]} instead of text',
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print each placement decision's candidates and scores (to stderr with --json)",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        type=Path,
        help="also write the machine map after the scenario's events to FILE "
        "(one self-contained HTML page)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        result = simulate_file(args.scenario)
    except (ScenarioError, SimulationError) as exc:
        print(f"numa-agent simulate: {exc}", file=sys.stderr)
        return 1
    if args.html is not None:
        try:
            args.html.write_text(to_html(result), encoding="utf-8")
        except OSError as exc:
            print(f"numa-agent simulate: cannot write {args.html}: {exc}", file=sys.stderr)
            return 1
    if args.explain:
        # JSON on stdout stays exactly the documented shape; explanations go aside.
        out = sys.stderr if args.json else sys.stdout
        out.write(render_explanations(result))
        if not args.json:
            out.write("\n")
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        sys.stdout.write(render_text(result))
    return 0
