"""One BLAS thread around many small per-series problems, from one reused controller.

A fit is many p × p solves and small products: BLAS worker threads would only spin (5× the CPU
of an in-process Prophet fit on 2 cores, BENCHMARKS.md). ``threadpool_limits`` builds a new
`ThreadpoolController` per call, which inspects every loaded library (≈ 1 ms, a refit of the
cheap forecasters' whole cost); the controller is built once, after numpy's BLAS is loaded.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cache
from typing import Any


@cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any]:
    """``with one_blas_thread(): …`` runs the block with BLAS limited to one thread."""
    return _controller().limit(limits=1, user_api="blas")
