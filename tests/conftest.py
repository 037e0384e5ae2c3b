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
        # as dfg starts its own: workers at this process's priority, importing dfg from
        # this checkout like the test process does
        from dfg.executor.distributed import prepare_local_ray

        prepare_local_ray()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def fresh_plan_cache(monkeypatch):
    """Each test starts with no optimized graph kept by an earlier one
    (executor/plan_cache.py): a test of a Session's first step sees a first step, whatever
    ran before it; tests/test_plan_cache.py tests the cache itself. No disk cache either."""
    from dfg.executor import plan_cache

    plan_cache.clear()
    monkeypatch.delenv("DFG_PLAN_CACHE", raising=False)


# modules whose tests build graphs with dfg's builder: every GraphDef they emit must pass
# `dfg validate` (no error diagnostics), checked after each test
BUILDER_MODULES = ("test_builder", "test_while_gradients", "test_autograph")


@pytest.fixture(autouse=True)
def builder_graphs_validate(request, monkeypatch):
    """In builder test modules: validate (graphdef/validate.py) each GraphDef that
    ``builder.Graph.as_graph_def`` returns during the test; the test fails naming the
    diagnostics. A test that builds an invalid graph on purpose is marked
    ``@pytest.mark.invalid_builder_graph``."""
    mod = request.module.__name__.rpartition(".")[2]
    if (not mod.startswith(BUILDER_MODULES)
            or request.node.get_closest_marker("invalid_builder_graph")):
        yield
        return
    from dfg.graphdef.builder import core
    from dfg.graphdef.graph import Graph as IndexedGraph
    from dfg.graphdef.validate import validate

    emitted = []
    original = core.Graph.as_graph_def

    def as_graph_def(self):
        gd = original(self)
        emitted.append(gd)
        return gd
    monkeypatch.setattr(core.Graph, "as_graph_def", as_graph_def)
    yield
    monkeypatch.undo()
    for gd in emitted:
        errors = [str(d) for d in validate(IndexedGraph(gd)) if d.is_error]
        assert not errors, "a builder graph fails dfg validate:\n" + "\n".join(errors)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "invalid_builder_graph: the test builds a graph dfg validate rejects, "
                   "on purpose (builder_graphs_validate skips it)")
