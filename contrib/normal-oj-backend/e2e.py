'''End-to-end check of the Done criteria, run by check.sh inside a patched
Back-End checkout (the current directory) over mongomock:

1. In materializer mode, land sandbox results through the Back-End's own
   route (PUT /submission/<id>/complete) and methods, messily: repeated
   landings, landings that fail half-way (the object store fails before the
   submission is saved; the cache delete fails after it) and are redelivered,
   rejudges followed by a new result, one rejudge still in flight, pending
   submissions, handwritten submissions graded and re-submitted.
2. Export every collection as a mongodump directory (DIR/normal-oj/<coll>.bson).
3. Run `materializer rebuild --dump DIR --out OUT` and `verify --dump OUT`.
4. Reference: on the same documents, reset the derived fields to their
   defaults and let the Back-End (Back-End mode) land each judged
   submission's final result exactly once, in (timestamp, _id) order
   (finish_judging). A rejudge in flight lands with its stored result.
5. Compare OUT's user counts and studentStatus entries with the reference,
   field by field. Exit 0 when all are equal.

Runs on both Back-End lines: FastAPI (config.py, dfbd76a) and Flask
(mongo/config.py, the superproject's pin 0a6e25c, where outputs go to
GridFS rather than MinIO).

usage: python e2e.py MATERIALIZER_BIN WORK_DIR [SEED]
'''
import io
import os
import random
import subprocess
import sys
from datetime import datetime, timedelta
from zipfile import ZipFile

os.environ['TESTING'] = '1'
os.environ['DERIVED_DATA_OWNER'] = 'materializer'
sys.path.insert(0, os.getcwd())

import bson  # noqa: E402
import fakeredis  # noqa: E402
import mongomock.gridfs  # noqa: E402

FLASK = not os.path.exists('config.py')
import mongo.submission  # noqa: E402
from mongo import *  # noqa: E402,F401
from mongo import engine  # noqa: E402
from mongo.utils import RedisCache  # noqa: E402
from tests import utils  # noqa: E402

DB = 'normal-oj'


class FakeMinio:
    '''MinioClient stand-in: objects in a dict; `fail_at` makes the n-th
    put_object from now on raise once (a landing failing half-way).'''
    objects = {}
    puts = 0
    fail_at = None

    def __init__(self):
        self.client = self
        self.bucket = 'fake'

    def put_object(self, bucket, name, data, length, **kwargs):
        FakeMinio.puts += 1
        if FakeMinio.fail_at is not None and FakeMinio.puts >= FakeMinio.fail_at:
            FakeMinio.fail_at = None
            raise ConnectionError('object store went away')
        self.objects[name] = data.read()


class FailingOutput:
    '''Flask line: outputs are written to temporary files, then GridFS;
    `fail_at` makes the n-th output file from now on fail once.'''
    real = None
    made = 0
    fail_at = None

    @classmethod
    def make(cls, *args, **kwargs):
        cls.made += 1
        if cls.fail_at is not None and cls.made >= cls.fail_at:
            cls.fail_at = None
            raise OSError('no space left on device')
        return cls.real(*args, **kwargs)


def fail_second_output():
    '''the next landing fails at its second output, before it saves'''
    if FLASK:
        FailingOutput.fail_at = FailingOutput.made + 2
    else:
        FakeMinio.fail_at = FakeMinio.puts + 2


def set_owner(owner):
    if FLASK:
        import mongo.config
        mongo.config.DERIVED_DATA_OWNER = owner
    else:
        from config import settings
        settings.DERIVED_DATA_OWNER = owner


class FlaskClient:
    '''the calls drive() makes, on Flask's test client'''

    def __init__(self, app):
        self.app, self.client = app, app.test_client()

    def put(self, url, json):
        rv = self.client.put(url, json=json)
        rv.text = rv.get_data(as_text=True)
        return rv

    def login(self, secret):
        self.client.set_cookie('piann', secret, domain='test.test')


class Landings:
    '''Counts of what was driven, printed at the end.'''

    def __init__(self):
        self.n = {}

    def add(self, what):
        self.n[what] = self.n.get(what, 0) + 1


def code_zip(ext):
    buf = io.BytesIO()
    with ZipFile(buf, 'w') as zf:
        zf.writestr(f'main{ext}', b'%PDF-1.4' if ext == '.pdf' else b'x')
    buf.seek(0)
    return buf


def sandbox_result(problem, accepted):
    return [[{
        'exitCode': 0,
        'status': 'AC' if i in accepted else 'WA',
        'stdout': 'o',
        'stderr': '',
        'execTime': 5,
        'memoryUsage': 512,
    } for _ in range(t.case_count)]
            for i, t in enumerate(problem.test_case.tasks)]


def drive(rng, client, stats):
    '''step 1; returns the course'''
    now = datetime.now().replace(microsecond=0)
    course = utils.course.create_course(students=20)
    teacher = course.teacher.username
    info = {
        'language': 0,
        'fillInTemplate': '',
        'tasks': [
            {'caseCount': 1, 'taskScore': 30, 'memoryLimit': 65536,
             'timeLimit': 1000},
            {'caseCount': 2, 'taskScore': 70, 'memoryLimit': 65536,
             'timeLimit': 1000},
        ],
    }
    p1, p2, p3 = [
        utils.problem.create_problem(course=course, test_case_info=info)
        for _ in range(3)
    ]
    # hw1 ended two days ago (late submissions, a penalty); p2 is in both
    # homeworks, so a penalised score carries over to hw2
    for name, probs, end, penalty in (
        ('hw1', [p1, p2], now - timedelta(days=2),
         'score = score * 8 // 10 if overtime < 2 else score // 2'),
        ('hw2', [p2, p3], now + timedelta(days=30), None),
    ):
        Homework.add(user=course.teacher,
                     course_name=course.course_name,
                     hw_name=name,
                     problem_ids=[p.problem_id for p in probs],
                     markdown='',
                     scoreboard_status=0,
                     start=(now - timedelta(days=9)).timestamp(),
                     end=int(end.timestamp()),
                     penalty=penalty)
    problems = [p1, p2, p3]
    in_flight_left = False

    def land(submission, problem, accepted):
        '''one landing through the route, possibly messy'''
        token = Submission.assign_token(submission.id)
        kind = rng.choice(['once', 'once', 'repeat', 'fail-before-save',
                           'fail-after-save', 'duplicate-call'])
        stats.add(f'landing: {kind}')
        tasks = lambda: sandbox_result(problem, accepted)
        url = f'/submission/{submission.id}/complete'
        if kind == 'fail-before-save':
            # the second output fails: nothing of the result is saved
            fail_second_output()
            rv = client.put(url, json={'tasks': tasks(), 'token': token})
            assert rv.status_code == 500, rv.text
        elif kind == 'fail-after-save':
            # the submission is saved, then finish_judging fails
            real = RedisCache.delete

            def failing(self, key):
                if key.startswith('PROBLEM_'):
                    raise ConnectionError('cache went away')
                return real(self, key)

            RedisCache.delete = failing
            try:
                rv = client.put(url, json={'tasks': tasks(), 'token': token})
            finally:
                RedisCache.delete = real
            assert rv.status_code == 500, rv.text
        elif kind == 'duplicate-call':
            # two deliveries racing past the token check
            Submission(submission.id).process_result(tasks())
        rv = client.put(url, json={'tasks': tasks(), 'token': token})
        assert rv.status_code == 200, rv.text
        if kind == 'repeat':
            rv = client.put(url, json={'tasks': tasks(), 'token': token})
            assert rv.status_code == 403, rv.text

    for username in sorted(course.student_nicknames):
        for _ in range(rng.randint(1, 5)):
            problem = rng.choice(problems)
            ts = now - timedelta(seconds=rng.randint(0, 6 * 86400))
            handwritten = rng.random() < 0.1
            lang = 3 if handwritten else 0
            s = Submission.add(problem_id=problem.problem_id,
                               username=username,
                               lang=lang,
                               timestamp=ts)
            Submission(s.id).submit(code_zip('.pdf' if handwritten else '.c'))
            if handwritten:
                stats.add('handwritten graded (older ones deleted)')
                if FLASK:
                    client.login(User(teacher).secret)
                else:
                    client.cookies.set('piann', User(teacher).secret)
                rv = client.put(f'/submission/{s.id}/grade',
                                json={'score': rng.choice([0, 60, 100])})
                assert rv.status_code == 200, rv.text
                continue
            if rng.random() < 0.1:
                stats.add('left pending')
                continue
            land(s, problem, set(rng.sample([0, 1], rng.randint(0, 2))))
            if rng.random() < 0.3:
                stats.add('rejudge + new result')
                Submission(s.id).rejudge()
                land(s, problem, set(rng.sample([0, 1], rng.randint(0, 2))))
            if not in_flight_left and rng.random() < 0.2:
                stats.add('rejudge still in flight')
                Submission(s.id).rejudge()
                in_flight_left = True
    return course


def export(dump_dir):
    '''step 2: one BSON file per collection, as mongodump writes them'''
    db = engine.Submission._get_db()
    out = os.path.join(dump_dir, DB)
    os.makedirs(out)
    for name in db.list_collection_names():
        with open(os.path.join(out, f'{name}.bson'), 'wb') as f:
            for doc in db[name].find():
                f.write(bson.encode(doc))


def read_bson(path):
    with open(path, 'rb') as f:
        return bson.decode_all(f.read())


def reference(stats):
    '''step 4: every judged submission's final result landed once'''
    set_owner('backend')
    db = engine.Submission._get_db()
    db.user.update_many({}, {
        '$set': {
            'submission': 0,
            'AC_submission': 0,
            'AC_problem_ids': []
        }
    })
    for hw in db.homework.find():
        status = {
            u: {p: Homework.default_problem_status()
                for p in entries}
            for u, entries in hw.get('studentStatus', {}).items()
        }
        db.homework.update_one({'_id': hw['_id']},
                               {'$set': {
                                   'studentStatus': status
                               }})
    subs = sorted(db.submission.find(), key=lambda d: (d['timestamp'], d['_id']))
    for d in subs:
        judged = d['status'] not in (-1, -2) or (d['status'] == -1 and
                                                 d['score'] >= 0)
        if judged:
            stats.add('reference: judged submissions landed once')
            Submission(d['_id']).finish_judging()
    users = {u['_id']: u for u in db.user.find()}
    homeworks = {h['_id']: h for h in db.homework.find()}
    for h in homeworks.values():
        for entries in h.get('studentStatus', {}).values():
            for e in entries.values():
                if e.get('rawScore', 0) != e['score']:
                    stats.add('reference: entries where a penalty applied')
                if e['problemStatus'] == -1:
                    stats.add('reference: entries showing a rejudge in flight')
    return users, homeworks


def compare(ref_users, ref_homeworks, out_dir, quiet=False):
    got_users = {u['_id']: u for u in read_bson(f'{out_dir}/user.bson')}
    got_homeworks = {
        h['_id']: h
        for h in read_bson(f'{out_dir}/homework.bson')
    }
    fields = diffs = 0
    for uid, ref in ref_users.items():
        for f in ('submission', 'AC_submission', 'AC_problem_ids'):
            fields += 1
            want, got = ref.get(f), got_users[uid].get(f)
            if want != got:
                diffs += 1
                quiet or print(f'  DIFF user {uid} {f}: single landing {want!r}, '
                      f'materializer {got!r}')
    entries = 0
    for hid, ref in ref_homeworks.items():
        got_status = got_homeworks[hid].get('studentStatus', {})
        for u, per_problem in ref.get('studentStatus', {}).items():
            for p, want in per_problem.items():
                entries += 1
                got = got_status.get(u, {}).get(p)
                for f in sorted(set(want) | set(got or {})):
                    fields += 1
                    w = want.get(f, '<absent>')
                    g = (got or {}).get(f, '<absent>')
                    if w != g:
                        diffs += 1
                        quiet or print(f'  DIFF homework {hid} studentStatus.{u}.{p}'
                              f'.{f}: single landing {w!r}, materializer {g!r}')
    return len(ref_users), entries, fields, diffs


def main():
    materializer, work = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = random.Random(seed)
    redis = fakeredis.FakeStrictRedis()
    RedisCache.client = property(lambda self: redis)
    mongo.submission.MinioClient = FakeMinio
    mongomock.gridfs.enable_gridfs_integration()
    stats = Landings()
    if FLASK:
        FailingOutput.real = mongo.submission.NamedTemporaryFile
        mongo.submission.NamedTemporaryFile = FailingOutput.make
        from app import app as make_app
        app = make_app()
        # a route's exception is answered 500, as on the site
        app.config.update(TESTING=True, SERVER_NAME='test.test',
                          PROPAGATE_EXCEPTIONS=False)
        with app.app_context():
            drive(rng, FlaskClient(app), stats)
            finish(materializer, work, stats)
        return
    from starlette.testclient import TestClient
    from app import app
    with TestClient(app, raise_server_exceptions=False) as client:
        drive(rng, client, stats)
    finish(materializer, work, stats)


def finish(materializer, work, stats):
    '''steps 2 to 5'''
    dump_dir, out_dir = f'{work}/dump', f'{work}/out'
    export(dump_dir)
    for argv in ([materializer, 'rebuild', '--dump', dump_dir, '--out',
                  out_dir], [materializer, 'verify', '--dump', out_dir]):
        print('$', ' '.join(argv[1:]), flush=True)
        subprocess.run(argv, check=True, stderr=subprocess.STDOUT)
    users, homeworks = reference(stats)
    n_users, n_entries, n_fields, n_diffs = compare(users, homeworks,
                                                    f'{out_dir}/{DB}')
    # control: the dump the patched Back-End left holds no derived value
    # (materializer mode), so it must differ from the single landing
    *_, raw_diffs = compare(users, homeworks, f'{dump_dir}/{DB}', quiet=True)
    for what, n in sorted(stats.n.items()):
        print(f'  {what}: {n}')
    print(f'e2e control: the Back-End\'s own dump differs from the single '
          f'landing in {raw_diffs} fields (it wrote no derived value)')
    print(f'e2e: {n_users} users, {n_entries} studentStatus entries, '
          f'{n_fields} fields compared, {n_diffs} differ')
    sys.exit(1 if n_diffs or not raw_diffs else 0)


if __name__ == '__main__':
    main()
