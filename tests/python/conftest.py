"""Shared fixtures: the frontend on sys.path (no install needed), clean Dynamo/dyngen state."""

import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for p in (REPO / "frontends" / "python", REPO / "frontends" / "python" / "tools"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

warnings.filterwarnings("ignore", module="thunder")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: minutes-long checks (the issue's full-size 30-token-count loop, the "
        "second-process disk cache); they run by default, `-m 'not slow'` skips them",
    )


@pytest.fixture
def fresh():
    """Resets Dynamo's caches (including automatic-dynamic state) and dyngen's counters."""
    import dyngen

    torch._dynamo.reset()
    dyngen.reset_stats()
    yield
    torch._dynamo.reset()


def _with_executor(name):
    from dyngen.options import options, set_options

    saved = options()
    set_options(executor=name)
    return saved


@pytest.fixture(params=["reference", "emulate"])
def executor(request):
    """Each test once on the ATen executor and once on the generated kernels under host
    emulation, whatever DYNGEN_EXECUTOR says."""
    from dyngen.options import set_options

    saved = _with_executor(request.param)
    yield request.param
    set_options(**saved.__dict__)


@pytest.fixture
def reference_executor():
    """The ATen executor (dyngen's CPU default; DYNGEN_EXECUTOR=reference) whatever the suite's
    DYNGEN_EXECUTOR says: the generated kernels under host emulation would take minutes for
    whole training runs, and short cases run through them (test_grouped_experts.py)."""
    from dyngen.options import set_options

    saved = _with_executor("reference")
    yield
    set_options(**saved.__dict__)
