"""The queue a Ray pool of whole games fills with ``{group: (unroll, info)}`` and each group's
learner takes its own share of (``unroll_sources.SplitQueue``)."""

import queue
import threading

import pytest

from tfagents_vtrace.runtime.acting.unroll_sources import SplitQueue


def _item(k: int) -> dict:
    return {"a": ({"k": k}, {"group": "a"}), "b": ({"k": k}, {"group": "b"})}


def test_each_group_takes_its_share_of_every_item_in_order():
    split = SplitQueue(["a", "b"], maxsize=4)
    for k in range(3):
        split.put(_item(k))
    a, b = split.view("a"), split.view("b")
    # a learner takes a batch of two, then the other group's learner its two
    assert [a.get(timeout=1)[0]["k"] for _ in range(2)] == [0, 1]
    assert [b.get(timeout=1)[0]["k"] for _ in range(3)] == [0, 1, 2]
    assert a.get(timeout=1) == ({"k": 2}, {"group": "a"})
    with pytest.raises(queue.Empty):
        b.get(timeout=0.05)


def test_a_full_queue_holds_the_pool_back_until_a_group_takes_an_item():
    split = SplitQueue(["a", "b"], maxsize=1)
    split.put(_item(0))
    with pytest.raises(queue.Full):
        split.put(_item(1), timeout=0.05)
    done = threading.Event()
    threading.Thread(target=lambda: (split.put(_item(1)), done.set()), daemon=True).start()
    assert not done.wait(0.1)
    assert split.view("b").get(timeout=1)[0]["k"] == 0  # the whole item left the queue
    assert done.wait(2)
    assert split.view("a").get(timeout=1)[0]["k"] == 0
    assert split.view("a").get(timeout=1)[0]["k"] == 1
