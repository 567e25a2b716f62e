'''Which Python functions a patch series changes, whether each one is the
same at a checkout's HEAD as at the series' base commit, and which other
functions write the derived grading data.

usage: python3 port_check.py REPO BASE HEAD SERIES [AGAINST]

SERIES is the series applied on BASE (commits BASE..SERIES, one a patch);
the touched scopes are compared between AGAINST (default BASE; SERIES for
a checkout that holds the series already) and HEAD.

A removed line is booked to the innermost function (or class, or the
module) holding it, in the file as the commit's parent holds it; a changed
`def` line to the function it defines. Added lines that replace removed
ones go with them; inserted lines go to the scope they are indented into,
and decorators inserted above a `def` to that function. Two versions of a
function are the same when their syntax trees are (comments, blank lines
and position do not count); a class is compared without its methods (its
header, decorators and the statements outside its methods), each method on
its own; the module likewise.

Then every function at HEAD that writes user.submission,
user.AC_submission, user.AC_problem_ids or studentStatus (outside tests/
and outside the scopes the series changes) is listed: `known` when it
wrote them at BASE and is the same, `CHANGED` when it differs, `NEW` when it
did not write them at BASE. Exit 5 when any is CHANGED or NEW.
Standard library only.
'''
import ast
import re
import subprocess
import sys

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
USER_FIELDS = {'submission', 'AC_submission', 'AC_problem_ids'}
DERIVED = USER_FIELDS | {'student_status'}
UPDATE_CALLS = {
    'update', 'modify', 'update_one', 'update_many', 'find_one_and_update',
    'upsert_one'
}
MUTATORS = {
    'append', 'extend', 'insert', 'remove', 'pop', 'clear', 'update',
    'setdefault', 'popitem'
}
KWARG = re.compile(r'^(?:[a-z_]+?__)?(' + '|'.join(sorted(DERIVED)) +
                   r')(?:__.*)?$')


def touched_lines(diff):
    '''{path: [(kind, old line, text)]} for every modified .py file of a
    unified diff: kind '-' a removed line, '+' an inserted line (old line:
    the one it precedes)'''
    out = {}
    path = None
    old = 0
    removed = False  # the current run of -/+ lines removed something
    for line in diff.splitlines():
        if line.startswith('diff --git '):
            path, old = None, 0
        elif line.startswith('--- ') and (path is None or old == 0):
            old = 0
            name = line[4:].strip()
            path = name[2:] if name.startswith('a/') else None
            if path is not None and not path.endswith('.py'):
                path = None
        elif path is None or line.startswith('+++ ') and old == 0:
            continue  # not a .py file, or the header's new name
        elif m := re.match(r'@@ -(\d+)(?:,(\d+))? ', line):
            # an empty old range names the line the addition follows
            old = int(m.group(1)) + (m.group(2) == '0')
            removed = False
        elif line.startswith(' '):
            old += 1
            removed = False
        elif line.startswith('-'):
            out.setdefault(path, []).append(('-', old, line[1:]))
            old += 1
            removed = True
        elif line.startswith('+') and not removed:
            out.setdefault(path, []).append(('+', old, line[1:]))
    return out


def scopes(tree):
    '''{qualified name: node} for every function and class, and '' for the module'''
    out = {'': tree}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, SCOPES):
                name = prefix + child.name
                out.setdefault(name, child)
                walk(child, name + '.')
            elif not isinstance(child, (ast.expr, ast.stmt)) or hasattr(child, 'body'):
                walk(child, prefix)

    walk(tree, '')
    return out


def start(node):
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def innermost(named, line):
    best, size = '', None
    for name, node in named.items():
        if name and start(node) <= line <= node.end_lineno and (
                size is None or node.end_lineno - start(node) < size):
            best, size = name, node.end_lineno - start(node)
    return best


def book(named, changes):
    '''the scopes a file's changes (from touched_lines) touch'''
    out = set()
    inserted = {}  # old line -> inserted lines before it
    for kind, line, text in changes:
        if kind == '-':
            out.add(innermost(named, line))
        else:
            inserted.setdefault(line, []).append(text)
    for before, texts in inserted.items():
        code = [t for t in texts if t.strip() and not t.strip().startswith('#')]
        following = [n for n, node in named.items() if n and start(node) == before]
        if following and not any(re.match(r'\s*(async\s+def|def|class)\b', t) for t in code):
            # decorators (or lines) inserted above a def belong to it
            out.add(following[0])
            continue
        for text in code:
            # the scope the line is indented into, from the one holding the
            # line it follows outwards
            indent = len(text) - len(text.lstrip())
            name = innermost(named, max(before - 1, 1))
            while name and named[name].col_offset >= indent:
                name = name.rpartition('.')[0]
            out.add(name)
    return out


def fingerprint(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ast.dump(node)
    # a class or the module: its header and what it holds outside its
    # functions and classes (they are compared on their own)
    body = [ast.dump(s) for s in node.body if not isinstance(s, SCOPES)]
    if isinstance(node, ast.ClassDef):
        header = [ast.dump(x) for x in (*node.bases, *node.keywords, *node.decorator_list)]
        return [node.name, header, body]
    return body


def git(repo, *args):
    r = subprocess.run(['git', '-C', repo, *args], capture_output=True)
    return r.stdout.decode('utf-8', 'replace') if r.returncode == 0 else None


def parse(repo, rev, path):
    src = git(repo, 'show', f'{rev}:{path}')
    try:
        return None if src is None else scopes(ast.parse(src))
    except SyntaxError as e:
        return e


# --- writers of derived data ----------------------------------------------


def mentions(node, tainted):
    '''node reads the studentStatus field or a name holding part of it'''
    return any(
        isinstance(n, ast.Attribute) and n.attr == 'student_status' or
        isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node))


def derived_target(node, tainted):
    '''the derived field a store to node (or a mutating call on it) writes'''
    if isinstance(node, ast.Attribute) and node.attr in DERIVED:
        return node.attr
    if isinstance(node, (ast.Subscript, ast.Name)):
        root = node
        while isinstance(root, ast.Subscript):
            root = root.value
        if isinstance(root, ast.Attribute) and root.attr == 'student_status':
            return 'student_status'
        if isinstance(root, ast.Name) and root.id in tainted and root is not node:
            return 'student_status'
        if isinstance(root, ast.Name) and root.id in tainted and isinstance(node, ast.Name):
            return None  # rebinding a name writes nothing
    return None


def names(target):
    '''the names a binding target binds (x, or x, y), not a store into
    another object (x[k] = ...)'''
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*map(names, target.elts))
    return set()


def own(scope):
    '''the nodes of a scope's own code, not of the functions and classes
    it holds'''
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        if not isinstance(n, SCOPES):
            yield n
            todo.extend(ast.iter_child_nodes(n))


def writes(scope):
    '''the derived fields a scope's own code writes'''
    nodes = list(own(scope))
    tainted = set()
    for _ in range(3):  # names holding studentStatus, to a fixpoint
        for n in nodes:
            if isinstance(n, ast.Assign) and mentions(n.value, tainted):
                for t in n.targets:
                    tainted |= names(t)
            elif isinstance(n, (ast.For, ast.comprehension)) and mentions(n.iter, tainted):
                tainted |= names(n.target)
            elif isinstance(n, ast.NamedExpr) and mentions(n.value, tainted):
                tainted |= names(n.target)
    out = set()

    def add(node, field):
        if field:
            out.add('studentStatus' if field == 'student_status' else field)

    for n in nodes:
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            for t in targets:
                for x in ast.walk(t):
                    add(n, derived_target(x, tainted) if isinstance(x, (ast.Attribute, ast.Subscript)) else None)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr in MUTATORS:
                add(n, derived_target(n.func.value, tainted) or
                    (n.func.value.attr if isinstance(n.func.value, ast.Attribute)
                     and n.func.value.attr in DERIVED else None))
                if isinstance(n.func.value, ast.Name) and n.func.value.id in tainted:
                    add(n, 'student_status')
            if n.func.attr in UPDATE_CALLS:
                for k in n.keywords:
                    if k.arg and (m := KWARG.match(k.arg)):
                        add(n, m.group(1))
        elif isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                # {'$set': {'AC_submission': ...}} or {'$inc': {...}}
                if isinstance(k, ast.Constant) and str(k.value).startswith('$') and isinstance(v, ast.Dict):
                    for kk in v.keys:
                        if isinstance(kk, ast.Constant) and str(kk.value).split('.')[0] in USER_FIELDS | {'studentStatus'}:
                            add(n, str(kk.value).split('.')[0])
        if isinstance(n, (ast.Constant, ast.JoinedStr)):
            first = n.values[0] if isinstance(n, ast.JoinedStr) and n.values else n
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith('studentStatus.'):
                add(n, 'studentStatus')
    return out


def writers(repo, rev):
    '''{(path, scope): (fields, fingerprint)} of every writer at rev'''
    out = {}
    for path in (git(repo, 'ls-tree', '-r', '--name-only', rev) or '').split('\n'):
        if not path.endswith('.py') or path.startswith('tests/') or '/tests/' in path:
            continue
        named = parse(repo, rev, path)
        if not isinstance(named, dict):
            continue
        for scope, node in named.items():
            if fields := writes(node):
                out[path, scope] = (fields, fingerprint(node))
    return out


def main(repo, base, head, series, against=None):
    against = against or base
    touched = {}  # (path, scope) -> {patch numbers}
    commits = git(repo, 'rev-list', '--reverse', f'{base}..{series}').split()
    for number, commit in enumerate(commits, 1):
        diff = git(repo, 'diff', f'{commit}^', commit)
        for path, changes in touched_lines(diff).items():
            named = parse(repo, f'{commit}^', path)
            if not isinstance(named, dict):
                continue
            for scope in book(named, changes):
                touched.setdefault((path, scope), set()).add(f'{number:04d}')
    trees = {}
    for path, scope in sorted(touched):
        for rev in (base, against, head):
            if (rev, path) not in trees:
                trees[rev, path] = parse(repo, rev, path)
        first, then, now = trees[base, path], trees[against, path], trees[head, path]
        label = f'{path} {scope or "(module level)"}'
        if not isinstance(first, dict) or scope not in first:
            continue  # added by an earlier patch of the series: nothing to compare
        if isinstance(then[scope], ast.ClassDef):
            label += ' (class, without its methods)'
        label += f'  [{", ".join(sorted(touched[path, scope]))}]'
        if now is None:
            print(f'gone     {label}: no {path} at HEAD')
        elif isinstance(now, SyntaxError):
            print(f'?        {label}: cannot parse {path} at HEAD ({now})')
        elif scope not in now:
            print(f'gone     {label}: not at HEAD (renamed or moved?)')
        elif fingerprint(now[scope]) == fingerprint(then[scope]):
            print(f'same     {label}')
        else:
            print(f'DIFFERS  {label}')

    print('writers of derived data outside them: known (as at the base), '
          'CHANGED or NEW (review them)')
    before, after = writers(repo, base), writers(repo, head)
    flagged = 0
    for (path, scope), (fields, fp) in sorted(after.items()):
        if (path, scope) in touched:
            continue
        was = before.get((path, scope))
        status = 'NEW' if was is None else 'known' if was[1] == fp else 'CHANGED'
        flagged += status != 'known'
        print(f"{status:8s} {path} {scope or '(module level)'}  writes "
              f'{", ".join(sorted(fields))}')
    return 5 if flagged else 0


if __name__ == '__main__':
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
