"""The training example (examples/train_ctr.py) end to end on the session's
stack: the JAX CTR model trained on a SIG pipeline's batches read through
Flight; its log loss falls, to below a constant prediction's."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import END, EVENTS, START

pytest.importorskip("jax")  # the example trains a JAX model (extra "jax")

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_ctr.py")


def test_train_ctr_loss_falls(stack):
    spec = importlib.util.spec_from_file_location("train_ctr", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = []
    with stack.client() as c:
        res = mod.train(c, pipeline="train-example", start=START, end=END, epochs=5, log=lines.append)
    assert res["rows"] == 5 * EVENTS
    ep = res["epochs"]
    assert all(b < a for a, b in zip(ep, ep[1:])), f"epoch losses {ep} do not fall"
    assert ep[-1] < ep[0] - 0.03 and ep[-1] < res["base"], (ep, res["base"])
    assert any(line.startswith("sig: ") and "0 pending" in line for line in lines), lines
