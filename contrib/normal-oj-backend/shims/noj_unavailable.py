'''Stand-ins for the Back-End's dependencies that Debian does not package
(minio, mosspy, testcontainers), used only by check.sh on a machine without
PyPI or Docker. They make the Back-End importable and keep what needs no
server (objects put into MinIO are kept in memory); anything that needs a
server raises Unavailable and is recorded, so check_plugin reports a test
that failed after touching one as skipped ("needs MinIO"), never as passed.
'''

touched = set()


class Unavailable(RuntimeError):
    '''A service or package check.sh cannot provide here.'''

    def __init__(self, what):
        touched.add(what)
        super().__init__(f'{what} is not available in check.sh '
                         '(no PyPI package, no Docker): test not runnable here')


def stand_in(what):
    '''A class whose instances raise Unavailable(what) on any method call.'''

    class StandIn:

        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            if name.startswith('__'):
                raise AttributeError(name)

            def call(*args, **kwargs):
                raise Unavailable(what)

            return call

    StandIn.__name__ = StandIn.__qualname__ = what.replace(' ', '')
    return StandIn
