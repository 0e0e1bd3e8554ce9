"""Shared helpers for the benchmark scripts: medians of repeats in one process, and ``publish``,
the one place that writes reports (JSON, Markdown and a PNG bar chart of the ratios)."""
from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import time
from datetime import date
from pathlib import Path

from lazyfuse.demo import NOISY

RESULTS = Path(__file__).resolve().parent / "results"
_settings = {"folder": RESULTS, "smoke": False, "busy": 0, "spreads": {}}
SMOKE_NOTE = ("Smoke run (`python -m lazyfuse bench --quick`): at most 3 repeats, torch.compile peers skipped "
              "(n/a: compiling them takes longer than the whole run). Not results; run without --quick for those.")
SMOKE_LABEL = "smoke run, not results"


def configure(out=None, smoke: bool = False, busy: int = 0) -> None:
    """``python -m lazyfuse bench`` options for every script: ``out``, a folder for the reports
    instead of bench/results/; ``smoke`` (``--quick``), a run that only checks that everything
    works: few repeats, no time floor, no torch.compile peer; ``busy``, how many competing
    busy processes the run had (``--busy N``), named on every page and chart."""
    _settings["folder"] = Path(out) if out is not None else RESULTS
    _settings["smoke"] = smoke
    _settings["busy"] = busy


def configure_options() -> list:
    """This process's ``configure`` settings as command-line options, for a benchmark that runs in
    processes of its own (bench/distributed.py's ranks), so that they write where it would."""
    return ["--out", str(_settings["folder"]), "--busy", str(_settings["busy"])] + \
        (["--quick"] if _settings["smoke"] else [])


class BusyProcesses:
    """``n`` processes that each keep one core busy while the block runs (``--busy N``): the
    load of another tenant, to measure how lazyfuse and its peers hold up under it."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        import sys
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        time.sleep(0.3 if self.n else 0)   # let them reach the run queue
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []


def timeit(fn, reps: int = 10, warmup: int = 2, min_time: float = 0.0, name: str = "fn") -> float:
    """Median seconds of ``fn()`` over ``reps`` calls (after ``warmup`` calls); ``name``: what the
    page's noise note calls it."""
    return timeit_interleaved({name: fn}, reps, warmup, min_time)[name]


def timeit_interleaved(fns: dict, reps: int = 10, warmup: int = 2, min_time: float = 0.0) -> dict:
    """Median seconds of each of ``fns`` (name -> callable), called round-robin: one call of
    each per round, so that a machine whose speed drifts during the run (another tenant's load,
    a clock change) weighs on every peer alike rather than on whichever ran in the slow stretch."""
    if _settings["smoke"]:
        reps, warmup, min_time = min(reps, 3), min(warmup, 1), 0.0
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    start = time.perf_counter()
    rounds = 0
    while rounds < reps or time.perf_counter() - start < min_time:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
        if rounds > 100_000:
            break
    for name, t in times.items():
        if len(t) >= 5:
            q = statistics.quantiles(t, n=10)
            spreads = _settings["spreads"]
            spreads[name] = max(spreads.get(name, 0.0), q[-1] / q[0])
    return {name: statistics.median(t) for name, t in times.items()}


def noise_note() -> list:
    """A line for the page when some peer's timed calls spread by more than NOISY (p90/p10)
    since the last page was published; the record starts again."""
    spreads, _settings["spreads"] = _settings["spreads"], {}
    worst = {k: v for k, v in spreads.items() if v > NOISY}
    if not worst:
        return []
    named = ", ".join(f"{k} {v:.1f}x" for k, v in sorted(worst.items(), key=lambda kv: -kv[1])[:4])
    return [f"The machine was noisy during this run: the timed calls of {named} spread by more than {NOISY}x "
            "(p90/p10). Treat these ratios as rough; rerun on a quiet machine."]


def cpu_info() -> dict:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
                    if ":" in line)
    except (OSError, ValueError):
        return {}
    return {k.strip(): v.strip() for k, v in info.items()}


def machine() -> dict:
    info = cpu_info()
    cpu = info.get("model name", platform.processor() or "?")
    # the model name alone does not tell CPUs apart ("AMD EPYC" is a Zen 1 and a Zen 4 here)
    simd = next((f for f in ("avx512f", "avx2", "avx", "sse4_2") if f in info.get("flags", "").split()), None)
    if "cpu family" in info:
        cpu += f" (family {info['cpu family']} model {info.get('model', '?')}" + (f", {simd}" if simd else "") + ")"
    import torch
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "date": date.today().isoformat(), "threads": threads()}
    try:
        info["cc"] = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        pass
    return info


def match_threads() -> None:
    """Give torch as many threads as lazyfuse's C kernels get now (the cores other processes
    leave free, measured over one window), so the peers are compared like for like."""
    import torch
    import lazyfuse as lf
    budget = lf.device("cpu").threads
    if budget is not None:
        torch.set_num_threads(budget.measure())


def settle_threads() -> None:
    """Decide the kernels' thread count afresh over one quiet window. A build runs the C compiler,
    another process, so the count decided just after it is the cores that process left free: up
    to one window (``runtime.threads.SAMPLE_S``) of a steady state timed right after its compile
    would run on fewer threads than the rest."""
    import lazyfuse as lf
    budget = lf.device("cpu").threads
    if budget is not None:
        budget.measure()


def threads() -> dict:
    import torch
    import lazyfuse as lf
    budget = lf.device("cpu").threads
    return {"torch": torch.get_num_threads(), "lazyfuse": budget.threads if budget is not None else None}


def heading(title: str, info: dict, *details: str) -> list:
    """The first lines of every results page: the title with the date, then the machine, the
    thread counts of torch and lazyfuse, and the ``details`` named ("torch": its version, "cc":
    the C compiler's banner)."""
    named = {"torch": f"torch {info['torch']}", "cc": info.get("cc", "")}
    t = info.get("threads") or {}
    machine_line = "; ".join([f"Machine: {info['cpu']}, {info['cores']} cores",
                              f"threads: torch {t.get('torch')}, lazyfuse {t.get('lazyfuse')}"] +
                             [named[d] for d in details])
    return [f"# lazyfuse {title} ({info['date']})", "", machine_line, ""]


def publish(name: str, payload: dict, lines: list, ratios: dict | None = None) -> Path:
    """Print the Markdown report and write it, with the raw JSON, under the output folder
    (bench/results/ unless ``configure`` chose another); ``ratios`` (label -> how many times
    faster lazyfuse is, > 1 meaning faster) also become a PNG bar chart."""
    if _settings["busy"]:
        lines = [*lines, "", f"Run with {_settings['busy']} competing busy process(es) (`--busy "
                 f"{_settings['busy']}`): numbers under load, not a quiet machine's."]
    noise = noise_note()
    if noise:
        lines = [*lines, "", *noise]
    if _settings["smoke"]:
        lines = [*lines, "", SMOKE_NOTE]
    # a NaN (a peer that did not run: "nan", "nanx faster") is "n/a" in tables, null in JSON, and no
    # bar in the chart; a cell that only starts with the letters (an op named nan_to_num) stays
    markdown = "\n".join(re.sub(r"(?<=\|) ?nan(?![_a-wyz])[^|]*(?=\|)", " n/a ", ln) if ln.startswith("|") else ln
                         for ln in lines).rstrip("\n") + "\n"
    print(markdown)
    folder = _settings["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{name}-{date.today().isoformat()}"
    stem.with_suffix(".json").write_text(json.dumps(_without_nan(payload), indent=2, allow_nan=False) + "\n")
    ratios = {k: v for k, v in (ratios or {}).items() if v == v}
    stem.with_suffix(".md").write_text(markdown)
    written = ".json / .md"
    if ratios:
        bar_chart(ratios, f"lazyfuse {name} benchmarks ({date.today().isoformat()})", stem.with_suffix(".png"))
        written += " / .png"
    print(f"written {stem}{written}")
    return stem


def _without_nan(value):
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_nan(v) for v in value]
    return value


def bar_chart(ratios: dict, title: str, path: Path) -> None:
    """A horizontal bar per ratio on a log axis, with a line at 1 (parity with the peer)."""
    import matplotlib
    matplotlib.use("Agg")   # files only: no display needed
    import matplotlib.pyplot as plt
    labels = list(ratios)
    values = [ratios[k] for k in labels]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.4))
    colors = ["#2a9d8f" if v >= 1 else "#e76f51" for v in values]
    ax.barh(range(len(labels)), values, color=colors)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("lazyfuse speed ratio (> 1: lazyfuse faster)")
    ax.set_title(title)
    for i, v in enumerate(values):
        ax.annotate(f"{v:.2f}x", (v, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    notes = ([SMOKE_LABEL] if _settings["smoke"] else []) + \
        ([f"under load: {_settings['busy']} busy process(es)"] if _settings["busy"] else [])
    if notes:   # on the picture itself: a chart travels without its page
        fig.text(0.5, 0.5, "\n".join(notes), ha="center", va="center", fontsize=20, color="#c0392b", alpha=0.45,
                 rotation=12, transform=fig.transFigure)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def compiled(fn):
    """Warm ``torch.compile`` of ``fn`` (default mode), or None when inductor cannot run here
    (or in a smoke run)."""
    import torch
    if _settings["smoke"]:
        return None
    try:
        return torch.compile(fn)
    except Exception:  # noqa: BLE001
        return None
