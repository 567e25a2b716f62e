'''pytest plugin loaded by check.sh (-p check_plugin) with the shims: a test
that fails after it touched a stand-in (MinIO, MOSS) is reported as skipped
with the reason, since it could not run here; a failure that touched none is
a real failure. Tests that pass are reported as passed either way.'''
import pytest
import noj_unavailable


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    noj_unavailable.touched.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and noj_unavailable.touched:
        what = ', '.join(sorted(noj_unavailable.touched))
        report.outcome = 'skipped'
        report.longrepr = (str(item.fspath), item.location[1] or 0,
                           f'needs {what} (not available to check.sh)')
