"""The counters of ``lf.stats()``: what the engine recorded, elided, fused and launched."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Stats:
    ops_recorded: int = 0          # compute ops recorded by the Tensor API
    ops_elided: int = 0            # recorded ops never executed: their results were dropped before a drain
    kernels_launched: int = 0      # kernel (and library-call) launches, graph replays excluded
    fusion_cache_hits: int = 0     # drains that found their plan cached (steady-state path)
    fusion_cache_misses: int = 0   # drains that planned, compiled and tuned (build path)
    autotune_runs: int = 0         # kernels actually benchmarked (a cached choice counts 0)
    fresh_allocations: int = 0     # pool requests that allocated new memory
    pooled_allocations: int = 0    # pool requests served from a kept block
    graph_replays: int = 0         # Graph.replay() calls that dispatched a recorded graph
    plan_cache_evictions: int = 0  # plans dropped because the plan cache was full
    compiler_runs: int = 0         # C compiler invocations and Triton module builds (a cached one counts 0)
    plans_built: int = 0           # build paths that ran the planner
    plans_rebound: int = 0         # build paths that took a known structure's plan at new sizes (no planner, no compiler)
    plans_loaded: int = 0          # build paths that took a plan an earlier process stored (runtime.plan_store)
    extern_launches: int = 0       # torch calls of extern nodes (ops with no native lowering), replays excluded

    def snapshot(self) -> "Stats":
        return Stats(**self.as_dict())

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __getitem__(self, name: str) -> int:
        return getattr(self, name)

    def __sub__(self, other: "Stats") -> "Stats":
        return Stats(**{k: v - getattr(other, k) for k, v in self.as_dict().items()})

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)
