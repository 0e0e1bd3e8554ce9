"""lf.explain, lf.to_dot and the per-drain reports (``python -m lazyfuse explain``) on a
transformer block: every kernel appears exactly once, every group boundary has a reason, and
the report of what a drain ran agrees with the plan lf.explain predicts."""
import io
import os
import re
import runpy
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.explain import DrainReporter, explain_script, write_dot

ROOT = Path(__file__).resolve().parents[1]
BLOCK = runpy.run_path(str(ROOT / "examples" / "transformer_block.py"))
KERNEL_HEADER = re.compile(r"^kernel (\d+) \((\w+)(?:, config ([^)]*))?\) writes %(\d+) — boundary: (.*)$", re.M)


def block_inputs(device="cpu", d=32, tokens=8):
    p = {k: lf.tensor(v, device=device) for k, v in BLOCK["make_weights"](d).items()}
    x = lf.tensor(torch.randn(2, tokens, d, generator=torch.Generator().manual_seed(1)), device=device)
    return x, p


def check_every_kernel_once(text: str, dot: str, n_kernels: int):
    headers = KERNEL_HEADER.findall(text)
    assert [int(h[0]) for h in headers] == list(range(n_kernels))    # each kernel once, in order
    assert all(h[4].strip() for h in headers)                         # each boundary has a reason
    for k in range(n_kernels):
        assert len(re.findall(rf"subgraph cluster_{k} \{{", dot)) == 1
    labels = re.findall(r'label="kernel (\d+) \(\w+\): ([^"]+)"', dot)
    assert [int(k) for k, _ in labels] == list(range(n_kernels)) and all(r.strip() for _, r in labels)


def check_dot_is_well_formed(dot: str):
    assert dot.startswith("digraph lazyfuse {") and dot.rstrip().endswith("}")
    defined = re.findall(r"^\s*(n\d+) \[label=", dot, re.M)
    assert len(defined) == len(set(defined))                           # every IR node drawn once
    for a, b in re.findall(r"^\s*(n\d+) -> (n\d+);", dot, re.M):
        assert a in defined and b in defined


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_explain_and_dot_of_a_transformer_block(device):
    x, p = block_inputs(device)
    out = BLOCK["block_lf"](x, p, 4)
    info = lf.explain(out)
    text, dot = str(info), lf.to_dot(out)
    assert len(info.kernels) >= 8
    check_every_kernel_once(text, dot, len(info.kernels))
    check_dot_is_well_formed(dot)
    assert len(re.findall(r"^  %\d+ = ", text, re.M)) == len(info.nodes)
    reasons = {k.reason for k in info.kernels}
    assert "live result" in reasons and any("library" in r or "several kernels" in r for r in reasons)
    with lf.testing.count_launches(device) as d:   # explaining ran nothing; the real drain runs the plan
        out.numpy()
    assert d.kernels_launched == len(info.kernels)


def test_drain_report_matches_the_explained_plan():
    x, p = block_inputs()
    predicted = lf.explain(BLOCK["block_lf"](x, p, 4))
    # the explained (now dropped) block is still on the pending tape, and the plan key covers
    # dropped results too: elide it first so both runs below share one key
    lf.sync()
    stream = io.StringIO()
    reporter = DrainReporter(stream)
    from lazyfuse.runtime import engine
    saved, engine.drain_hook = engine.drain_hook, reporter
    try:
        BLOCK["block_lf"](x, p, 4).numpy()
        BLOCK["block_lf"](x, p, 4).numpy()
    finally:
        engine.drain_hook = saved
    text = stream.getvalue()
    headers = KERNEL_HEADER.findall(text)
    assert [(h[1], h[4]) for h in headers] == [(k.kind, k.reason) for k in predicted.kernels]
    assert all(h[2] for h in headers if h[1] != "matmul")   # each kernel's chosen config is shown
    assert "plan 1 again" in text and reporter.drains == 2


def test_explain_cli_on_a_transformer_block_script(tmp_path):
    script = tmp_path / "block.py"
    script.write_text(f"""import sys
sys.path.insert(0, {str(ROOT / 'examples')!r})
import torch
import lazyfuse as lf
from transformer_block import block_lf, make_weights
d = int(sys.argv[1])
p = {{k: lf.tensor(v) for k, v in make_weights(d).items()}}
x = lf.tensor(torch.randn(2, 8, d))
for _ in range(2):
    print("checksum", float(block_lf(x, p, 4).sum()))
""")
    out = subprocess.run([sys.executable, "-m", "lazyfuse", "explain", "--dot", str(tmp_path / "dot"), str(script),
                          "32"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert text.count("checksum") == 2                      # the script ran, with its argument
    first = text.split("=== drain")[1]                      # the block's plan, explained in full once
    headers = KERNEL_HEADER.findall(first)
    assert len(headers) >= 8
    for _, kind, config, _, _ in headers:
        assert kind == "matmul" or config                   # the autotune choice of every kernel
    for name in set(re.findall(r"void (k\d+)__c\d+\(", first)):
        assert len(re.findall(rf"void {name}__c\d+\(", text)) == 1   # each kernel's source once
    dots = sorted((tmp_path / "dot").glob("plan-*.dot"))
    assert dots and "plan 1 again" not in text.split("=== drain 2")[0]
    block_dot = next(d.read_text() for d in dots if d.read_text().count("subgraph cluster_") == len(headers))
    check_every_kernel_once(first, block_dot, len(headers))
    check_dot_is_well_formed(block_dot)
    assert re.search(r"=== \d+ drain\(s\), \d+ distinct plan\(s\)", text)


def test_explain_cli_refuses_a_missing_script(capsys):
    from lazyfuse.__main__ import main
    assert main(["explain", "no_such_script.py"]) == 2
    assert "no script at no_such_script.py" in capsys.readouterr().err


def test_explain_script_restores_the_hook_and_argv(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys, lazyfuse as lf\nassert sys.argv[1:] == ['a']\n(lf.ones(3) * 2).numpy()\n")
    from lazyfuse.runtime import engine
    saved = engine.drain_hook, list(sys.argv)
    reporter = explain_script(script, ["a"], stream=io.StringIO())
    assert reporter.drains == 1 and (engine.drain_hook, sys.argv) == saved


def test_debug_env_prints_each_drain():
    code = "import lazyfuse as lf; (lf.ones(4) * 3).numpy()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "LAZYFUSE_DEBUG": "1"})
    assert out.returncode == 0, out.stderr
    assert "[lazyfuse] drain (build path): 1 launch(es)" in out.stdout


def test_rendering_without_graphviz_writes_dot_and_says_how(tmp_path, monkeypatch):
    import shutil
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "dot" else which(name, *a, **k))
    y = lf.ones(4) * 2
    with pytest.warns(RuntimeWarning, match="Graphviz 'dot' is not on PATH.*apt install graphviz"):
        lf.to_dot(y, path=tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()
    assert (tmp_path / "g.dot").read_text().startswith("digraph lazyfuse {")
    np.testing.assert_array_equal(y.numpy(), [2.0] * 4)


def test_rendering_runs_graphviz_when_installed(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"      # records its arguments and stdin, as Graphviz's dot would render them
    fake.write_text('#!/bin/sh\nout=""; fmt=""\nwhile [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; '
                    '-T*) fmt="$1";; esac; shift; done\n{ echo "$fmt"; cat; } > "$out"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    written = write_dot("digraph lazyfuse {}", tmp_path / "g.svg")
    assert written == tmp_path / "g.svg"
    assert written.read_text().splitlines() == ["-Tsvg", "digraph lazyfuse {}"]
