"""What a capture under way has run on one device, and why an allocation inside it failed.

The device owns one ``CaptureTracking``. ``lf.capture`` starts it at ``graph_prepare`` (every
plan's path state reset, so the warmup takes the build path first and the steady-state path
after: docs/semantics.md, The two reproduced bugs) and stops it when the capture closes. The
engine reports each drain's plan to it; from that record it names the likely cause of an
allocation refused inside the capture (``cause``), and hands the graph the launch metadata of
the plans the capture ran (``take_metadata``).
"""
from __future__ import annotations


class CaptureTracking:
    def __init__(self, engine):
        self.engine = engine
        self.executed_keys: set | None = None  # plan keys run since graph_prepare (None: not tracking)
        self.captured_plans: list = []         # the plans drained while the capture was open

    @property
    def active(self) -> bool:
        return self.executed_keys is not None

    def start(self) -> None:
        """Called by ``graph_prepare``, before the pool turns persistent: the engine's plans lose
        their path state (``Engine.reset_path_state``) and the record starts empty."""
        with self.engine.lock:
            self.engine.reset_path_state()
            self.executed_keys = set()
            self.captured_plans = []

    def ran(self, key, plan, capturing: bool) -> None:
        """A drain ran ``plan`` (under ``key``); ``capturing``: inside the capture run itself."""
        if self.executed_keys is not None:
            self.executed_keys.add(key)
        if capturing:
            self.captured_plans.append(plan)

    def take_metadata(self) -> list:
        """Hand the launch metadata of the plans a capture ran to the graph that recorded them.

        The graph's launches read those buffers at every replay, so they must never again be
        rewritten by an eager run of the same plan: the plan allocates new metadata on its
        next steady-state launch (outside the capture, where allocating is legal).
        """
        with self.engine.lock:
            metas = []
            for plan in self.captured_plans:
                if plan.metas is not None:
                    metas.extend(plan.metas)
                    plan.metas = None
            self.captured_plans = []
            return metas

    def stop(self) -> None:
        self.executed_keys = None

    def abort(self) -> None:
        """A failed capture: its plans keep their metadata (no graph takes it)."""
        self.captured_plans = []
        self.stop()

    def cause(self, plan, build: bool) -> str:
        """The likely cause of an allocation refused while tracking (empty when not tracking):
        ``plan`` is the plan that asked (None: a new one), ``build`` whether it took the build path."""
        if self.executed_keys is None:
            return ""
        if plan is None or plan.key not in self.executed_keys:
            return ("Likely cause: the warmup never executed this plan — its outputs were dropped before they "
                    "were synced, so the lazy engine elided them and allocated nothing (hold_outputs=False?). "
                    "Hold each warmup output across lf.sync(). (Or the closure records a different program "
                    "after its first run — state created lazily, like optimizer moments: warm up at least "
                    "twice.)")
        if not build and plan.metas is None:
            return ("Likely cause: warmup too short — the warmup only took the build path for this plan, so the "
                    "capture run is its first steady-state run and allocates launch metadata "
                    "(warmup_iters=1?). Warm up at least twice (the default is 3).")
        return ("Likely cause: the capture run allocated more than the warmup did (a different shape or dtype, or "
                "an output of the warmup kept alive past its iteration).")
