"""Every public name of lazyfuse documents itself: the ``lf`` namespace, ``lf.nn.functional``,
``lf.graph`` and ``lf.testing`` (names defined in lazyfuse; re-exported imports are skipped)."""
import inspect
import types

import pytest

import lazyfuse as lf

NAMESPACES = {"lf": lf, "lf.nn.functional": lf.nn.functional, "lf.graph": lf.graph, "lf.testing": lf.testing}


def public_callables():
    for label, module in NAMESPACES.items():
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or isinstance(obj, types.ModuleType) or not callable(obj):
                continue
            owner = getattr(obj, "__module__", "") or ""
            if not owner.startswith(module.__name__):
                continue        # an import, not the module's own name (documented where it is defined)
            if owner.startswith("lazyfuse"):
                yield f"{label}.{name}", obj


def test_the_public_surface_is_what_the_spec_lists():
    names = {n for n, _ in public_callables()}
    for spec_name in ("lf.device", "lf.sync", "lf.tensor", "lf.from_dlpack", "lf.capture", "lf.explain", "lf.to_dot",
                      "lf.stats", "lf.Tensor", "lf.nn.functional.scaled_dot_product_attention", "lf.graph.capture"):
        assert spec_name in names


@pytest.mark.parametrize("name,obj", list(public_callables()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_callable_has_a_docstring(name, obj):
    doc = inspect.getdoc(obj)
    inherited = isinstance(obj, type) and doc in (inspect.getdoc(b) for b in obj.__mro__[1:])
    assert doc and doc.strip() and not inherited, f"{name} has no docstring of its own"


def public_tensor_attributes():
    """Every public method, property and slot of ``lf.Tensor`` (operator dunders excepted)."""
    for name in sorted(vars(lf.Tensor)):
        attr = inspect.getattr_static(lf.Tensor, name)
        if not name.startswith("_") and isinstance(attr, (types.FunctionType, property, types.MemberDescriptorType)):
            yield f"lf.Tensor.{name}", attr


def test_the_tensor_surface_is_what_the_spec_lists():
    names = {n.rsplit(".", 1)[1] for n, _ in public_tensor_attributes()}
    spec = ("shape dtype device ndim numel numpy torch item tolist abs exp log sqrt rsqrt sin cos tanh sigmoid relu "
            "gelu silu neg reciprocal pow clamp sum mean amax amin max min var std argmax argmin softmax log_softmax "
            "reshape view permute transpose T unsqueeze squeeze expand flatten contiguous to float half bfloat16 int "
            "long bool copy_ add_ sub_ mul_ div_ zero_ fill_ backward grad requires_grad detach").split()
    assert set(spec) <= names, f"not checked: {sorted(set(spec) - names)}"


@pytest.mark.parametrize("name,attr", list(public_tensor_attributes()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_tensor_attribute_has_a_docstring(name, attr):
    doc = inspect.getdoc(attr)     # a slot's docstring is its value in Tensor.__slots__
    assert doc and doc.strip(), f"{name} has no docstring"
