"""Fault-injection suite: shared fixtures and the closing count.

Every test in tests/faults injects one or more faults into a real smbd and
a real smbtuned, then checks the promises that hold whatever happens:
a clear journal line, no probe file left in the share, no shadow smbd
left running, and smb.conf either its old bytes or a complete candidate
that testparm accepts with every other line byte-identical.

`faults.record(kind, outcome)` counts one injected fault and what the
daemon made of it (a short word: "restored", "held", "kept", "refused",
...). The suite prints the counts at the end, so that a run shows how many
faults it really injected, not only how many tests passed.
"""

import collections
import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE))

# The integration suite's fixtures (smbd_factory, smbd, smbtuned) and
# helpers, loaded under a name of their own: both files are "conftest".
_spec = importlib.util.spec_from_file_location(
    "integration_conftest", HERE.parent / "integration" / "conftest.py")
integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(integration)
smbd_factory = integration.smbd_factory
smbd = integration.smbd
smbtuned = integration.smbtuned
copy_fixture = integration.copy_fixture
run_editor = integration.run_editor
samba_value = integration.samba_value
pytest_configure = integration.pytest_configure

_COUNTS = collections.Counter()


def pytest_sessionfinish(session, exitstatus):
    # Under pytest-xdist (scripts/test runs this suite two at a time) each
    # worker counts its own faults; it hands them to the controller, which
    # prints the sum (pytest_testnodedown below).
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_counts"] = [[k, o, n] for (k, o), n in _COUNTS.items()]
    integration.pytest_sessionfinish(session, exitstatus)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent without -n
def pytest_testnodedown(node, error):
    for kind, outcome, n in getattr(node, "workeroutput", {}).get("fault_counts", []):
        _COUNTS[(kind, outcome)] += n


class FaultLog:
    def record(self, kind, outcome):
        _COUNTS[(kind, outcome)] += 1


@pytest.fixture
def faults():
    return FaultLog()


def pytest_terminal_summary(terminalreporter):
    if not _COUNTS:
        return
    tr = terminalreporter
    tr.section("injected faults")
    for (kind, outcome), n in sorted(_COUNTS.items()):
        tr.write_line(f"{n:5d}  {kind}: {outcome}")
    tr.write_line(f"{sum(_COUNTS.values()):5d}  faults injected in all")
