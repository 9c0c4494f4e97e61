"""The marginal cost of more records: what a long-running service pays per record, start-up and
warm-up (a JVM's JIT compilation) left out, from ``loadtest.throughput --json`` rows of two run
lengths.

    python -m loadtest.throughput --engine kafka -n 1000000 --peer kstreams --json runs.jsonl
    python -m loadtest.throughput --engine kafka -n 3000000 --peer kstreams --json runs.jsonl
    python -m loadtest.marginal runs.jsonl

For each engine and variant, between the shortest and the longest run (medians over reps): the
process CPU per extra input record, (cpu_long - cpu_short) / (n_long - n_short), and the rate of
the extra records, (n_long - n_short) / (first_to_last_long - first_to_last_short). Whatever both
runs spend alike (start-up, first polls, JIT compilation of the hot path, the final commit) cancels
out. Ratios as in ``loadtest.throughput``'s steady state: iqmesh ÷ peer for the rate, peer ÷ iqmesh
for the CPU, so above 1 is iqmesh ahead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

Row = dict[str, object]
#: (mode, guarantee, cache)
VariantKey = tuple[str, str, bool]


@dataclass(frozen=True)
class Marginal:
    """One engine's cost of the records the longer run had on top of the shorter one."""

    n_short: int
    n_long: int
    cpu_us: float  # process CPU per extra record
    rate: float  # extra records per second of processing


def variant_of(row: Row) -> VariantKey:
    return str(row["mode"]), str(row["guarantee"]), bool(row.get("cache", False))


def _median(rows: list[Row], field: str) -> float:
    return statistics.median(float(r[field]) for r in rows)  # type: ignore[arg-type]


def marginal(rows: list[Row]) -> Marginal | None:
    """The marginal cost over ``rows`` of one engine and variant, or None without two run lengths."""
    by_n: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r.get("ok", True) and r.get("cpu_s") is not None and r.get("first_to_last_s"):
            by_n[int(r["n"])].append(r)  # type: ignore[call-overload]
    if len(by_n) < 2:
        return None
    short, long = min(by_n), max(by_n)
    extra = long - short
    cpu = _median(by_n[long], "cpu_s") - _median(by_n[short], "cpu_s")
    wall = _median(by_n[long], "first_to_last_s") - _median(by_n[short], "first_to_last_s")
    return Marginal(short, long, cpu / extra * 1e6, extra / wall if wall > 0 else float("nan"))


def table(rows: list[Row], peer: str = "kafka-streams") -> list[str]:
    """One line per variant: iqmesh's and the peer's marginal rate and CPU, and the ratios."""
    groups: dict[tuple[str, VariantKey], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(str(r["lib"]), variant_of(r))].append(r)
    variants = list(dict.fromkeys(v for (_lib, v) in groups))
    out = [f"{'variant (run lengths)':66} {'iqmesh /s, µs':>20} {peer + ' /s, µs':>26} {'rate, cpu ratios':>18}"]
    for v in variants:
        ours, theirs = marginal(groups.get(("iqmesh", v), [])), marginal(groups.get((peer, v), []))
        label = f"{v[0]} {v[1]}" + (" (record cache on)" if v[2] else "")
        if ours is None:
            continue
        label += f" ({ours.n_short:,} → {ours.n_long:,})"
        line = f"{label:66} {ours.rate:>11.0f} / {ours.cpu_us:>5.2f}"
        if theirs is not None:
            line += (f" {theirs.rate:>17.0f} / {theirs.cpu_us:>5.2f}"
                     f" {ours.rate / theirs.rate:>9.2f}, {theirs.cpu_us / ours.cpu_us:>6.2f}")
        out.append(line)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, help="loadtest.throughput --json rows of at least two run lengths")
    ap.add_argument("--peer", default="kafka-streams", help="the engine to compare with (lib field)")
    args = ap.parse_args()
    try:
        rows = [json.loads(x) for x in args.runs.read_text().splitlines() if x.strip()]
    except (OSError, ValueError) as e:
        ap.error(f"{args.runs}: {e}")
    lines = table(rows, args.peer)
    if len(lines) < 2:
        print(f"{args.runs}: no variant of iqmesh ran at two lengths; run loadtest.throughput with two -n",
              file=sys.stderr)
        return 2
    print("marginal cost of the records between the shortest and the longest run (records/s, process CPU "
          "µs per record; word count: input lines)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
