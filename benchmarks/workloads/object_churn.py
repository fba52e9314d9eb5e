"""Allocator and GC pressure: create and drop many small objects, dicts and lists.

Usage: python object_churn.py [SCALE]   (SCALE=1.0 is about 2-4 s on the reference machine)
"""

import sys


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


class Event:
    def __init__(self, kind, payload):
        self.kind = kind
        self.payload = payload


def build_tree(width, depth, key=0):
    node = Node(key, {"depth": depth, "label": str(key)})
    if depth > 0:
        node.children = [build_tree(width, depth - 1, key * width + i) for i in range(width)]
    return node


def count(node):
    return 1 + sum(count(child) for child in node.children)


def churn_events(n):
    kept = 0
    window = []
    for i in range(n):
        window.append(Event(i % 5, {"i": i, "sq": [i, i * i]}))
        if len(window) > 1000:
            kept += sum(1 for event in window if event.kind == 0)
            window = []
    return kept


def main(scale):
    rounds = max(1, int(80 * scale))
    nodes = 0
    for _ in range(rounds):
        nodes += count(build_tree(4, 7))
    kept = churn_events(max(1000, int(4_000_000 * scale)))
    print(f"object_churn: {nodes} nodes, {kept} events kept")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
