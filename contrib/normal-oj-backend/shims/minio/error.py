class S3Error(Exception):
    '''minio.error.S3Error stand-in: code and resource.'''

    def __init__(self, code, resource):
        self.code = code
        super().__init__(f'{code}: {resource}')
