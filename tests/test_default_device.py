"""The default device, as torch's: ``with lf.device(d):`` (torch's ``with torch.device(d):``) and
``lf.set_default_device(d)`` choose where factories without ``device=`` put their tensors, in
this thread, innermost block first; ``lf.get_default_device()`` says which."""
import threading

import numpy as np
import pytest
import torch

import lazyfuse as lf

FACTORIES = {
    "zeros": lambda: lf.zeros(3),
    "ones": lambda: lf.ones(2, 2),
    "full": lambda: lf.full((2,), 7.0),
    "arange": lambda: lf.arange(4),
    "tensor": lambda: lf.tensor([1.0, 2.0]),
    "randn": lambda: lf.randn(3),
    "eye": lambda: lf.eye(2),
    "rand": lambda: lf.rand(2, 3),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_device_block_is_every_factorys_default(name):
    assert FACTORIES[name]().device is lf.device("cpu")
    with lf.device("interpreter") as dev:
        assert dev is lf.device("interpreter") and lf.get_default_device() is dev
        made = FACTORIES[name]()
        assert made.device is dev
        with lf.device("cpu"):
            assert FACTORIES[name]().device is lf.device("cpu")   # the innermost block wins
        assert FACTORIES[name]().device is dev
    assert FACTORIES[name]().device is lf.device("cpu")


def test_values_made_in_a_block_are_torchs():
    with lf.device("interpreter"):
        got = (lf.arange(6.0).reshape(2, 3) * 2 + lf.ones(3)).numpy()
    np.testing.assert_array_equal(got, (torch.arange(6.0).reshape(2, 3) * 2 + 1).numpy())


def test_set_default_device_and_its_reset():
    try:
        lf.set_default_device("interpreter")
        assert lf.zeros(2).device is lf.device("interpreter") and lf.get_default_device().kind == "interpreter"
        with lf.device("cpu"):
            assert lf.zeros(2).device is lf.device("cpu")
    finally:
        lf.set_default_device(None)
    assert lf.zeros(2).device is lf.device("cpu")


def test_a_block_is_this_threads_only():
    seen = []
    with lf.device("interpreter"):
        worker = threading.Thread(target=lambda: seen.append(lf.zeros(1).device))
        worker.start()
        worker.join()
    assert seen == [lf.device("cpu")]


def test_a_bad_default_is_refused_naming_the_device():
    with pytest.raises(lf.DeviceError, match="tpu"):
        lf.set_default_device("tpu")
    assert lf.zeros(1).device is lf.device("cpu")
