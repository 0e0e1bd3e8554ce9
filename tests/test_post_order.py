"""ir.node.post_order, the one graph walk (tape entry, trace, kernel expressions, autograd order)."""
import sys

from lazyfuse.ir.node import post_order


class N:
    def __init__(self, name, *srcs):
        self.name, self.srcs = name, srcs


def names(nodes):
    return [n.name for n in nodes]


def test_each_node_once_after_everything_it_reads():
    a = N("a")
    b = N("b", a)
    c = N("c", a, b)
    d = N("d", c, b)
    order = post_order([d], lambda n: n.srcs)
    assert names(order) == ["a", "b", "c", "d"]   # the last source is explored first
    assert names(post_order([d, c, N("e", a)], lambda n: n.srcs)) == ["a", "b", "c", "d", "e"]


def test_seen_nodes_are_left_out_with_what_only_they_reach():
    a = N("a")
    b = N("b", a)
    c = N("c", b)
    seen = {id(b)}
    assert names(post_order([c], lambda n: n.srcs, seen)) == ["c"]
    assert seen == {id(b), id(c)}   # the walk records what it visited


def test_a_graph_deeper_than_the_recursion_limit():
    node = N(0)
    for i in range(1, sys.getrecursionlimit() * 3):
        node = N(i, node)
    order = post_order([node], lambda n: n.srcs)
    assert names(order) == list(range(sys.getrecursionlimit() * 3))
