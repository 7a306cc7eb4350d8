"""How `make test` shares the suite between its pytest-xdist workers (each with a broker, a Spark
Connect server and a PostgreSQL server of its own): a test module is one unit of work, so its
module-scoped stacks start once, and the tests on Spark's standalone cluster are one unit together,
so only one worker starts that cluster. Units go out in collection order (see
``pytest_collection_modifyitems`` in conftest.py), each to the first worker that runs short of work."""

from __future__ import annotations

from typing import Final

from xdist.scheduler import LoadScopeScheduling

CLUSTER_TESTS: Final = "tests/cluster/"


class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type hints
    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return CLUSTER_TESTS if path.startswith(CLUSTER_TESTS) else path
