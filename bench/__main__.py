"""Run the benchmarks: ``python -m bench [--quick] [section ...]``; prints one Markdown table."""

from __future__ import annotations

import argparse
import importlib
import sys

from .common import markdown_table

SECTIONS = {
    "kernel": "bench.bench_kernel",
    "linear": "bench.bench_linear",
    "discriminant": "bench.bench_discriminant",
    "bayes_em": "bench.bench_bayes_em",
    "bayes_mcmc": "bench.bench_bayes_mcmc",
}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the chosen sections and print their rows as one table."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"any of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {unknown}; choose from {sorted(SECTIONS)}")
    rows = []
    for name in args.sections or list(SECTIONS):
        module = importlib.import_module(SECTIONS[name])
        rows.extend(module.run(quick=args.quick))
        sys.stderr.write(f"[bench] {name} done\n")
    sys.stdout.write(markdown_table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
