"""Shared timing helpers for the benchmark scripts: medians of repeats, in one process."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from datetime import date
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def timeit(fn, reps: int = 10, warmup: int = 2, min_time: float = 0.0) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls (after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < reps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) > 100_000:
            break
    return statistics.median(times)


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "date": date.today().isoformat()}
    try:
        info["cc"] = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        pass
    return info


def publish(name: str, payload: dict, lines: list) -> Path:
    """Print the Markdown report and write it, with the raw JSON, under bench/results/."""
    markdown = "\n".join(lines).rstrip("\n") + "\n"
    print(markdown)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{name}-{date.today().isoformat()}"
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown)
    print(f"written {stem}.json / .md")
    return stem


def compiled(fn):
    """Warm ``torch.compile`` of ``fn`` (default mode), or None when inductor cannot run here."""
    import torch
    try:
        return torch.compile(fn)
    except Exception:  # noqa: BLE001
        return None
