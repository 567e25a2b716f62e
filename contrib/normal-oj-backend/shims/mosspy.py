'''Stand-in for mosspy (not packaged by Debian), for check.sh only: the
client API the Back-End uses (Moss(user_id, language), options, addFile,
addBaseFile, send; download_report), where every call that would reach the
MOSS server raises noj_unavailable.Unavailable('MOSS'). Tests that replace
those calls with monkeypatch run as they do with the real package.'''
from noj_unavailable import Unavailable


class Moss:

    def __init__(self, user_id, language='c'):
        self.user_id = user_id
        self.options = {'l': language, 'm': 10, 'd': 0, 'x': 0, 'c': '', 'n': 250}
        self.base_files = []
        self.files = []

    def addBaseFile(self, file_path, display_name=None):
        self.base_files.append((file_path, display_name))

    def addFile(self, file_path, display_name=None):
        self.files.append((file_path, display_name))

    def send(self, on_send=None):
        raise Unavailable('MOSS')


def download_report(url, path, connections=4, log_level=None, on_read=None):
    raise Unavailable('MOSS')
