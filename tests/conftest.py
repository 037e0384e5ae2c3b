import os
import sys
from pathlib import Path

import pytest

# tests share helpers (conformance.py) as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the whole run (2 CPUs, no dashboard), shut down at the end.

    Tests that need Ray take this fixture; without the `ray` extra they are skipped. Its
    address (GCS) lets a `dfg` subprocess join the same instance with `--address`.
    """
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # workers import dfg from this checkout like the test process does
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield ray
    ray.shutdown()
