'''Stand-in for the minio package (not packaged by Debian), for check.sh
only: objects put are kept in this process's memory and read back, which is
all most Back-End tests need. Everything that needs a MinIO server
(presigned URLs, multipart uploads, any other call) raises
noj_unavailable.Unavailable('MinIO'), so check_plugin reports the test as
skipped.'''
import io

from noj_unavailable import Unavailable
from .error import S3Error

__all__ = ['Minio']


class _Response(io.BytesIO):

    def release_conn(self):
        pass


class Minio:
    _objects = {}  # (bucket, name) -> bytes, shared by every client

    def __init__(self, *args, **kwargs):
        pass

    def make_bucket(self, bucket, *args, **kwargs):
        pass

    def bucket_exists(self, bucket):
        return True

    def put_object(self, bucket, name, data, length, *args, **kwargs):
        body = data.read() if length is None or length < 0 else data.read(length)
        self._objects[(bucket, name)] = bytes(body)

    def get_object(self, bucket, name, *args, **kwargs):
        try:
            return _Response(self._objects[(bucket, name)])
        except KeyError:
            raise S3Error('NoSuchKey', f'{bucket}/{name}') from None

    def remove_object(self, bucket, name, *args, **kwargs):
        self._objects.pop((bucket, name), None)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)

        def call(*args, **kwargs):
            raise Unavailable('MinIO')

        return call
