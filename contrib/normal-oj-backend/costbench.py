'''What the Back-End's own finish_judging costs MongoDB per landing,
run inside an UNPATCHED Back-End checkout (the current
directory) over mongomock, with Normal-OJ's real code.

Workload (the same as cmd/onlinebench's anchor rows): one course of
STUDENTS students, one homework of PROBLEMS problems whose deadline is now,
EARLIER earlier submissions per student (spread evenly over the homework's
problems; their documents and the studentStatus entries they produced are
written directly, as finish_judging would have left them: submissionIds,
rawScore, score, problemStatus), then LANDINGS landings within ten minutes
either side of the deadline: each a submission document with its result
(inserted outside the count), then Submission(id).finish_judging() counted.

Counted per landing, at the collection level (mongomock.collection.
Collection's public methods; calls mongomock makes internally are not
counted): collection calls and which of them write; documents returned by
find/find_one/aggregate cursors and their BSON size (bson.encode); for
writes, the BSON size of the filter and of the update (or inserted or
replacement document) sent. The Redis cache delete is not counted.

usage: python costbench.py OUT.json [STUDENTS PROBLEMS EARLIER LANDINGS SEED]
'''
import json
import os
import random
import sys
from collections import Counter
from datetime import datetime, timedelta

os.environ['TESTING'] = '1'
sys.path.insert(0, os.getcwd())

import bson  # noqa: E402
import fakeredis  # noqa: E402
import mongomock.collection as mc  # noqa: E402

from mongo import *  # noqa: E402,F401
from mongo import engine  # noqa: E402
from mongo.utils import RedisCache  # noqa: E402
from tests import utils  # noqa: E402


class Cost:
    on = False
    depth = 0
    calls = Counter()
    writes = 0
    docs = 0
    bytes_read = 0
    bytes_written = 0


def size(x):
    if isinstance(x, list):
        x = {'pipeline': x}
    if not isinstance(x, dict):
        return 0
    return len(bson.encode(x))


READS = ('find', 'find_one', 'aggregate', 'count_documents', 'estimated_document_count', 'distinct')
WRITES = ('insert_one', 'insert_many', 'update_one', 'update_many', 'replace_one', 'delete_one',
          'delete_many', 'find_one_and_update', 'find_one_and_replace', 'find_one_and_delete', 'bulk_write')


def wrap(name):
    orig = getattr(mc.Collection, name)

    def counted(self, *args, **kwargs):
        if not Cost.on or Cost.depth:
            return orig(self, *args, **kwargs)
        Cost.depth += 1
        try:
            Cost.calls[f'{self.name}.{name}'] += 1
            if name in WRITES:
                Cost.writes += 1
                for key, a in zip(('filter', 'update'), args):
                    Cost.bytes_written += size(kwargs.get(key, a))
                for key in ('filter', 'update', 'replacement', 'document'):
                    if key in kwargs:
                        Cost.bytes_written += size(kwargs[key])
            out = orig(self, *args, **kwargs)
        finally:
            Cost.depth -= 1
        if name in ('find', 'aggregate') and isinstance(out, mc.Cursor):
            out._cost_counted = True
        elif name in ('find_one', 'find_one_and_update', 'find_one_and_replace') and out is not None:
            Cost.docs += 1
            Cost.bytes_read += size(out)
        return out

    setattr(mc.Collection, name, counted)


def wrap_cursor():
    orig = mc.Cursor.__next__

    def counted_next(self):
        doc = orig(self)
        if Cost.on and getattr(self, '_cost_counted', False):
            Cost.docs += 1
            Cost.bytes_read += size(doc)
        return doc

    mc.Cursor.__next__ = counted_next
    mc.Cursor.next = counted_next


def main():
    out_path = sys.argv[1]
    students, problems, earlier, landings, seed = (int(a) for a in (sys.argv[2:] + ['80', '5', '100', '200', '1'][len(sys.argv) - 2:]))
    rng = random.Random(seed)
    redis = fakeredis.FakeStrictRedis()
    RedisCache.client = property(lambda self: redis)
    from app import _seed_db
    _seed_db()
    for n in READS + WRITES:
        if hasattr(mc.Collection, n):
            wrap(n)
    wrap_cursor()

    deadline = datetime.now().replace(microsecond=0)
    course = utils.course.create_course(students=students)
    names = sorted(s for s in course.student_nicknames)
    info = {'language': 0, 'fillInTemplate': '',
            'tasks': [{'caseCount': 1, 'taskScore': 100, 'memoryLimit': 65536, 'timeLimit': 1000}]}
    probs = [utils.problem.create_problem(course=course, test_case_info=info) for _ in range(problems)]
    Homework.add(user=course.teacher, course_name=course.course_name, hw_name='rush',
                 problem_ids=[p.problem_id for p in probs], markdown='', scoreboard_status=0,
                 start=(deadline - timedelta(days=7)).timestamp(), end=int(deadline.timestamp()),
                 penalty='score = score * 8 // 10 if overtime < 2 else score // 2')
    db = engine.Submission._get_db()
    hw = db.homework.find_one({'homeworkName': 'rush'})

    # Earlier submissions and the entries finish_judging left for them.
    docs, status = [], hw['studentStatus']
    for u in names:
        for j in range(earlier):
            p = probs[j % len(probs)]
            st = rng.choice([0, 0, 1, 1, 2, 3, 5])
            score = 100 if st == 0 else rng.randrange(0, 100, 10)
            ts = deadline - timedelta(days=6) + timedelta(seconds=rng.randrange(6 * 86400))
            d = {'_id': bson.ObjectId(), 'problem': p.problem_id, 'user': u, 'languageType': 0,
                 'timestamp': ts, 'status': st, 'score': score, 'tasks': [], 'runTime': 5,
                 'memoryUsage': 512, 'codeMinioPath': None, 'lastSend': ts, 'ip_addr': '127.0.0.1'}
            docs.append(d)
            e = status[u][str(p.problem_id)]
            e.setdefault('rawScore', 0)
            e['submissionIds'].append(str(d['_id']))  # as finish_judging stores it (str of the id)
            e['rawScore'] = max(e['rawScore'], score)
            if score >= e['score']:
                e['score'], e['problemStatus'] = score, st
    db.submission.insert_many(docs)
    db.homework.update_one({'_id': hw['_id']}, {'$set': {'studentStatus': status}})
    hw_size = size(db.homework.find_one({'_id': hw['_id']}))

    total = Counter()
    for i in range(landings):
        u, p = rng.choice(names), rng.choice(probs)
        st = rng.choice([0, 0, 1, 1, 2, 3, 5])
        ts = deadline + timedelta(seconds=rng.randrange(-600, 600))
        d = {'_id': bson.ObjectId(), 'problem': p.problem_id, 'user': u, 'languageType': 0,
             'timestamp': ts, 'status': st, 'score': 100 if st == 0 else rng.randrange(0, 100, 10),
             'tasks': [], 'runTime': 5, 'memoryUsage': 512, 'codeMinioPath': None, 'lastSend': ts,
             'ip_addr': '127.0.0.1'}
        db.submission.insert_one(d)
        sub = Submission(d['_id'])
        Cost.on = True
        try:
            sub.finish_judging()
        finally:
            Cost.on = False
    n = landings
    calls = sum(Cost.calls.values())
    out = {
        'source': f'contrib/normal-oj-backend/costbench.py (mongomock, unpatched finish_judging)',
        'calls': calls / n, 'writes': Cost.writes / n, 'docs_read': Cost.docs / n,
        'kib_read': Cost.bytes_read / n / 1024, 'kib_written': Cost.bytes_written / n / 1024,
        'homework_kb': hw_size / 1024, 'landings': n, 'students': students,
        'earlier_per_student': earlier,
        'calls_by_kind': {k: v / n for k, v in sorted(Cost.calls.items())},
    }
    with open(out_path, 'w') as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == '__main__':
    main()
