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
