'''Stand-in for testcontainers.minio without Docker: the container "starts"
(so tests/conftest.py's session fixture completes) but names no server; the
minio stand-in keeps objects in memory and raises on calls that need a
server, which check_plugin reports as skipped.'''
from minio import Minio


class MinioContainer:

    def __init__(self, image=None, **kwargs):
        self.image = image

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_config(self):
        return {
            'endpoint': 'minio-unavailable:9000',
            'access_key': 'unavailable',
            'secret_key': 'unavailable',
        }

    def get_client(self):
        return Minio()
