'''Stand-in for testcontainers.minio without Docker: the container "starts"
(so tests/conftest.py's session fixture completes) but names no server; the
minio stand-in raises on every call, so tests that need MinIO are reported
as skipped by check_plugin.'''
from noj_unavailable import stand_in


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
        client = stand_in('MinIO')()
        client.make_bucket = lambda *args, **kwargs: None
        return client
