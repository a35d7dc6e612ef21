"""The test tiers hold: a test that reaches a real component without its marker fails, and
the tests of one shared component run on one xdist worker."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import REPO

pytest_plugins = ["pytester"]

# The suites under test run with this project's own hooks.
CONFTEST = """
from tests.conftest import (
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("CI", raising=False)
    pytester.makeconftest(CONFTEST)
    return pytester


def test_a_test_that_reaches_a_component_without_its_marker_fails(suite: pytest.Pytester):
    suite.makepyfile(
        """
        import pytest
        from tests import components

        def test_unmarked():
            components.require("slurm")

        @pytest.mark.slurm
        def test_marked():
            components.require("slurm")
        """
    )
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_unmarked uses slurm*not marked @pytest.mark.slurm*"])


def workers(suite: pytest.Pytester, tests: list[str]) -> set[str]:
    """The xdist workers (of two) that ran these test functions, each passed."""
    suite.makepyfile("import pytest\n\n" + "\n".join(tests))
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v"
    )
    result.assert_outcomes(passed=len(tests))
    return set(re.findall(r"\[(gw\d)\].*PASSED", result.stdout.str()))


def test_the_tests_of_one_shared_component_run_on_one_worker(suite: pytest.Pytester):
    tests = [f"@pytest.mark.slurm\ndef test_on_the_cluster_{n}():\n    pass\n" for n in range(8)]
    assert len(workers(suite, tests)) == 1


def test_a_test_of_two_shared_components_runs_with_the_first_in_their_order(
    suite: pytest.Pytester,
):
    """PostgreSQL before Slurm: the store outage, which stops PostgreSQL and also uses the
    Slurm cluster, runs on the worker of every other PostgreSQL test, never beside one."""
    tests = [
        f"@pytest.mark.postgres\ndef test_on_the_database_{n}():\n    pass\n" for n in range(6)
    ]
    tests.append(
        "@pytest.mark.slurm\n@pytest.mark.postgres\ndef test_stops_the_database():\n    pass\n"
    )
    assert len(workers(suite, tests)) == 1
