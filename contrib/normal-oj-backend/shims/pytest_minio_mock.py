'''Stand-in for the pytest-minio-mock plugin (not packaged by Debian) that
the Flask-line Back-End's tests/conftest.py uses: its `minio_mock` fixture
gives each test an empty object store of the minio stand-in. check.sh loads
it with -p when the real plugin is missing.'''
import pytest
from minio import Minio


@pytest.fixture
def minio_mock():
    Minio._objects.clear()
    yield
    Minio._objects.clear()
