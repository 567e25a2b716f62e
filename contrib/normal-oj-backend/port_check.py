'''Which Python functions a patch series changes, and whether each one is
the same at a checkout's HEAD as at the series' base commit.

usage: python3 port_check.py REPO BASE HEAD SERIES

SERIES is the series applied on BASE (commits BASE..SERIES, one a patch).
A hunk touches the innermost function (or class, or the module) holding a
line it removes or the line an addition follows, in the file as the
commit's parent holds it. Two versions of a function are the same when their syntax trees are
(comments, blank lines and position do not count); for a class or the
module, the statements outside its functions and classes are compared.
Prints one line per touched scope: same, DIFFERS, or why it cannot tell.
Standard library only.
'''
import ast
import re
import subprocess
import sys

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def touched_lines(diff):
    '''{path: {old line}} for every modified .py file of a unified diff'''
    out = {}
    path = None
    old = 0
    for line in diff.splitlines(keepends=True):
        if line.startswith('diff --git '):
            path = None
        elif line.startswith('--- '):
            name = line[4:].strip()
            path = name[2:] if name.startswith('a/') else None
            if path is not None and not path.endswith('.py'):
                path = None
        elif path is None:
            continue
        elif m := re.match(r'@@ -(\d+)(?:,(\d+))? ', line):
            # an empty old range names the line the addition follows
            old = int(m.group(1)) + (m.group(2) == '0')
        elif line.startswith(' '):
            old += 1
        elif line.startswith('-') and not line.startswith('---'):
            out.setdefault(path, set()).add(old)
            old += 1
        elif line.startswith('+') and not line.startswith('+++'):
            # an addition follows old line (old - 1); 0 is the file's top
            out.setdefault(path, set()).add(max(old - 1, 1))
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


def innermost(named, line):
    best, size = '', None
    for name, node in named.items():
        if not name:
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if start <= line <= node.end_lineno and (size is None or node.end_lineno - start < size):
            best, size = name, node.end_lineno - start
    return best


def fingerprint(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ast.dump(node)
    # a class or the module: what it holds outside its functions and classes
    return [ast.dump(s) for s in node.body if not isinstance(s, SCOPES)]


def git(repo, *args):
    r = subprocess.run(['git', '-C', repo, *args], capture_output=True)
    return r.stdout.decode('utf-8', 'replace') if r.returncode == 0 else None


def parse(repo, rev, path):
    src = git(repo, 'show', f'{rev}:{path}')
    try:
        return None if src is None else scopes(ast.parse(src))
    except SyntaxError as e:
        return e


def main(repo, base, head, series):
    touched = {}  # (path, scope) -> {patch numbers}
    commits = git(repo, 'rev-list', '--reverse', f'{base}..{series}').split()
    for number, commit in enumerate(commits, 1):
        diff = git(repo, 'diff', f'{commit}^', commit)
        for path, lines in touched_lines(diff).items():
            named = parse(repo, f'{commit}^', path)
            for line in lines:
                scope = innermost(named, line)
                touched.setdefault((path, scope), set()).add(f'{number:04d}')
    trees = {}
    for path, scope in sorted(touched):
        for rev in (base, head):
            if (rev, path) not in trees:
                trees[rev, path] = parse(repo, rev, path)
        then, now = trees[base, path], trees[head, path]
        label = f'{path} {scope or "(module level)"}'
        if then is None or isinstance(then, SyntaxError) or scope not in then:
            continue  # added by an earlier patch of the series: nothing to compare
        if isinstance(then[scope], ast.ClassDef):
            label += ' (class body outside its methods)'
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


if __name__ == '__main__':
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
