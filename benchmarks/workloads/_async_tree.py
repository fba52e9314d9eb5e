"""Shared by the async_tree wrappers: run one variant of pyperformance's bm_async_tree."""

import asyncio

import _pyperformance


def run(variant: str, per_unit_scale: int) -> None:
    module = _pyperformance.load("async_tree")
    tree_class = module.BENCHMARKS[variant]
    for _ in range(_pyperformance.iterations(per_unit_scale)):
        # A fresh tree (and so a fresh memo cache and random seed) per iteration, as pyperf's
        # runner gets per process; gather-based, no eager task factory: the pyperformance default.
        asyncio.run(tree_class(use_task_groups=False).run())
