#!/usr/bin/env python3
"""Generate cpython_extra.jsonl: differential test cases for package penalty.

Every expected outcome is computed here, by CPython, the way Normal-OJ's
Back-End runs a penalty program:

    d = {"score": score, "overtime": overtime}
    exec(program, d)
    result = int(d["score"])

after Back-End's whitelist (check_penalty). One JSON object per line:

    {"program", "score", "overtime", "want"}      CPython's int result
    {"program", "score", "overtime", "error"}     how it failed

error is "illegal" (whitelist), CPython's exception class name (subclasses
of SyntaxError are reported as "SyntaxError"), or "range" (the int does not
fit in int64). When exec completes, "value" also records the exact final
d["score"] before int(): "int:<hex()>", "float:<float.hex()>",
"complex:<real.hex()>,<imag.hex()>" or "tuple", so that float and complex
arithmetic is checked to the last bit, not only through int().

Two error kinds record the documented deviations of the Go package,
decided here from CPython's own view of the program, never from the Go
code:

  "limit"        an intermediate int would exceed 65,536 bits. Detected by
                 running an AST-instrumented copy of the program that checks
                 every int an operator produces (and refuses, before
                 computing, the ** << * whose result must be too large).
  "unsupported"  the program is valid and contains an annotated assignment
                 or the Ellipsis literal; "note" records what CPython did.

Cases where CPython fails with RecursionError or MemoryError are not kept.
For every case that is not "limit", the uninstrumented program is run too
and must agree with the instrumented run.

Usage: python3 gen_extra.py > cpython_extra.jsonl   (CPython 3.11.7; the
output is deterministic)

With arguments "SEED NPROGRAMS" it writes only random cases, for larger
ad-hoc differential runs (the committed file uses the defaults).
"""

import ast
import json
import random
import sys
import warnings

LIMIT_BITS = 65536
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_penalty(penalty):
    """Back-End's whitelist check, verbatim in behaviour."""
    allowed_chars = ["+", "-", "*", "/", "=", ".", "(", ")", ":", ">", "<"]
    allowed_words = ["score", "overtime", "if", "else"]
    checkstring = ""
    for i in penalty:
        checkstring += " " if i in allowed_chars else i
    for i in checkstring.split():
        if i not in allowed_words:
            try:
                int(i)
            except Exception:
                return False
    return True


class Limit(Exception):
    pass


def _isint(v):
    return isinstance(v, int)  # bool included


def _chk(v):
    if _isint(v) and v.bit_length() > LIMIT_BITS:
        raise Limit
    return v


def _bin(op, a, b):
    if op == "Pow" and _isint(a) and _isint(b) and b > 0 and abs(a) >= 2:
        m = abs(a).bit_length()
        if b > LIMIT_BITS or (m - 1) * b + 1 > LIMIT_BITS:
            raise Limit
    if op == "LShift" and _isint(a) and _isint(b) and b >= 0 and a != 0:
        if b > LIMIT_BITS or a.bit_length() + b > LIMIT_BITS:
            raise Limit
    if op == "Mult" and _isint(a) and _isint(b) and a and b:
        if a.bit_length() + b.bit_length() - 1 > LIMIT_BITS:
            raise Limit
    if op == "Add":
        r = a + b
    elif op == "Sub":
        r = a - b
    elif op == "Mult":
        r = a * b
    elif op == "Div":
        r = a / b
    elif op == "FloorDiv":
        r = a // b
    elif op == "Pow":
        r = a**b
    elif op == "LShift":
        r = a << b
    elif op == "RShift":
        r = a >> b
    else:
        raise AssertionError(op)
    return _chk(r)


class Instrument(ast.NodeTransformer):
    """Route every int-producing operation through _bin/_chk."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        return ast.Call(
            func=ast.Name("_bin", ast.Load()),
            args=[ast.Constant(type(node.op).__name__), node.left, node.right],
            keywords=[],
        )

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        return ast.Call(func=ast.Name("_chk", ast.Load()), args=[node], keywords=[])

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node  # attribute targets fail at the load
        load = ast.Name(node.target.id, ast.Load())
        value = ast.Call(
            func=ast.Name("_bin", ast.Load()),
            args=[ast.Constant(type(node.op).__name__), load, node.value],
            keywords=[],
        )
        return ast.Assign(targets=[node.target], value=value)


def encode_value(v):
    """The exact final value of score, before int(): ints in hex (not
    subject to the int/str digit limit), floats as float.hex(), complex as
    two float.hex() parts."""
    if isinstance(v, int):
        return "int:" + hex(v)
    if isinstance(v, float):
        return "float:" + v.hex()
    if isinstance(v, complex):
        return "complex:" + v.real.hex() + "," + v.imag.hex()
    if v == ():
        return "tuple"
    return "other:" + type(v).__name__


def outcome_of(run):
    """Returns ((kind, value), encoded final score or None)."""
    try:
        d = run()
    except Limit:
        return ("error", "limit"), None
    except SyntaxError:
        return ("error", "SyntaxError"), None
    except (RecursionError, MemoryError):
        return ("skip", None), None
    except (ZeroDivisionError, OverflowError, TypeError, ValueError, AttributeError) as e:
        return ("error", type(e).__name__), None
    final = encode_value(d["score"])
    try:
        r = int(d["score"])
    except (OverflowError, TypeError, ValueError) as e:
        return ("error", type(e).__name__), final
    if not INT64_MIN <= r <= INT64_MAX:
        return ("error", "range"), final
    return ("want", r), final


def classify(program, score, overtime):
    """Returns ((kind, value), note, final): CPython's outcome, what CPython
    did for an "unsupported" case, and the encoded final score if exec
    completed."""
    if not check_penalty(program):
        return ("error", "illegal"), None, None
    try:
        code = compile(program, "<string>", "exec")
    except SyntaxError:
        return ("error", "SyntaxError"), None, None
    except (RecursionError, MemoryError):
        return ("skip", None), None, None
    try:
        tree = ast.parse(program)
        tree = ast.fix_missing_locations(Instrument().visit(tree))
        icode = compile(tree, "<instrumented>", "exec")
    except (RecursionError, MemoryError):
        return ("skip", None), None, None

    def run_instrumented():
        d = {"score": score, "overtime": overtime, "_bin": _bin, "_chk": _chk}
        exec(icode, d)
        return d

    def run_plain():
        d = {"score": score, "overtime": overtime}
        exec(code, d)
        return d

    got, final = outcome_of(run_instrumented)
    if got != ("error", "limit") and got[0] != "skip":
        plain = outcome_of(run_plain)
        if plain != (got, final):
            raise AssertionError(f"instrumentation changed {program!r}: {plain} vs {got}")
    unsupported = any(
        isinstance(n, ast.AnnAssign)
        or (isinstance(n, ast.Constant) and n.value is Ellipsis)
        for n in ast.walk(tree)
    )
    if unsupported and got[0] != "skip":
        return ("error", "unsupported"), got, None
    return got, None, final


# ---------------------------------------------------------------- programs

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 20240601
NPROGRAMS = int(sys.argv[2]) if len(sys.argv) > 2 else 1600
R = random.Random(SEED)

INT_LITS = ["0", "1", "2", "3", "5", "7", "10", "42", "100", "1_000", "000", "0_0",
            "9223372036854775807", "9223372036854775808", "4611686018427387904",
            "18446744073709551616", "9007199254740993", "123456789012345678901234567890"]
FLOAT_LITS = ["0.5", ".25", "1.", "2.0", "0.1", "0.9", "0.75", "1.5", "00.5", "1_0.5", "0.0",
              "0.8", "0.99", "3.0", "100.5", "9007199254740993.0", "9223372036854775807.0",
              "9223372036854775808.0", "0.000_1", "1" + "0" * 400 + ".0"]
NAMES = ["score", "overtime"]
BINOPS = ["+", "-", "*", "/", "//", "**", "<<", ">>"]
BINOP_W = [6, 6, 6, 4, 3, 3, 1, 1]
CMPOPS = ["<", ">", "==", "<=", ">="]
AUGOPS = ["+=", "-=", "*=", "/=", "//=", "**=", "<<=", ">>="]
AUG_W = [5, 5, 5, 3, 3, 2, 1, 1]


def gen_atom():
    r = R.random()
    if r < 0.45:
        return R.choice(NAMES)
    if r < 0.7:
        return R.choice(INT_LITS[:10]) if R.random() < 0.85 else R.choice(INT_LITS)
    if r < 0.93:
        return R.choice(FLOAT_LITS[:13]) if R.random() < 0.85 else R.choice(FLOAT_LITS)
    if r < 0.96:
        return "()"
    return "(" + R.choice(NAMES) + ")"


def gen_expr(depth):
    if depth <= 0 or R.random() < 0.3:
        return gen_atom()
    r = R.random()
    if r < 0.5:
        op = R.choices(BINOPS, BINOP_W)[0]
        left, right = gen_expr(depth - 1), gen_expr(depth - 1)
        if op == "**":
            # keep exponents mostly small so that results stay interesting
            right = R.choice(["2", "3", "0.5", "overtime", "(overtime + 1)", "-1", "0", "-0.5", right])
        if op in ("<<", ">>"):
            right = R.choice(["1", "2", "overtime", "3", "-1", right])
        return f"{left} {op} {right}"
    if r < 0.62:
        return "(" + gen_expr(depth - 1) + ")"
    if r < 0.7:
        operand = gen_expr(depth - 1) if R.random() < 0.5 else gen_atom()
        if R.random() < 0.2:
            return "-(-" + operand + ")"
        return R.choice(["-", "+", "- ", "--"]) + operand
    if r < 0.82:
        n = R.choice([1, 1, 1, 2, 3])
        parts = [gen_expr(depth - 1) for _ in range(n + 1)]
        out = parts[0]
        for p in parts[1:]:
            out += f" {R.choice(CMPOPS)} {p}"
        return out
    if r < 0.93:
        return f"({gen_expr(depth - 1)} if {gen_expr(depth - 1)} else {gen_expr(depth - 1)})"
    rr = R.random()
    if rr < 0.3:
        return f"({R.choice(NAMES)} := {gen_expr(depth - 1)})"
    if rr < 0.5:
        return gen_atom() + R.choice(["()", "(1)", "(*())", "(**())", "(score=1)", "(1/0)"])
    if rr < 0.65:
        return gen_atom() + ".score"
    return f"{gen_expr(depth - 1)} if {gen_expr(depth - 1)} else {gen_expr(depth - 1)}"


def gen_stmt(depth, indent, unit):
    r = R.random()
    pad = unit * indent
    if r < 0.45:
        t = R.choice(["score", "score", "overtime", "(score)", "score = overtime"])
        return [pad + f"{t} = {gen_expr(3)}"]
    if r < 0.75:
        t = R.choice(["score", "score", "overtime", "(score)"])
        return [pad + f"{t} {R.choices(AUGOPS, AUG_W)[0]} {gen_expr(2)}"]
    if r < 0.8:
        return [pad + gen_expr(2)]
    if r < 0.84:
        return [pad + f"if {gen_expr(2)}: score = {gen_expr(2)}"]
    if depth <= 0:
        return [pad + f"score = {gen_expr(2)}"]
    lines = [pad + f"if {gen_expr(2)}:"]
    for _ in range(R.choice([1, 1, 2])):
        lines += gen_stmt(depth - 1, indent + 1, unit)
    if R.random() < 0.5:
        lines.append(pad + "else:")
        for _ in range(R.choice([1, 1, 2])):
            lines += gen_stmt(depth - 1, indent + 1, unit)
    return lines


def gen_program():
    unit = R.choice(["    ", "    ", "  ", "\t", " "])
    lines = []
    for _ in range(R.choice([1, 1, 2, 2, 3, 4])):
        lines += gen_stmt(2, 0, unit)
    return "\n".join(lines)


MUTATION_ALPHABET = [" ", " ", "\t", "\n", "\r", "\r\n", "\f", "\v", "\xa0", "\u3000", "\x1c",
                     "\u0661", "\uff11", "_", "0", "1", "9", ".", "..", "(", ")", ":", "=", "<", ">",
                     "+", "-", "*", "/", "**", "//", "if", "else", "score", "overtime", " if ",
                     " else ", ":=", "<>", "->", "...", "\n    ", "\n\t", "  "]


def mutate(p):
    for _ in range(R.choice([1, 1, 1, 2, 3])):
        i = R.randrange(len(p) + 1)
        r = R.random()
        if r < 0.45:
            p = p[:i] + R.choice(MUTATION_ALPHABET) + p[i:]
        elif r < 0.75:
            p = p[:i] + p[i + 1:]
        else:
            p = p[:i] + R.choice(MUTATION_ALPHABET) + p[i + 1:]
    return p


def gen_indentation_program():
    """Blocks with random space/tab/formfeed indentation."""
    pieces = [" ", "  ", "    ", "\t", " \t", "\t ", "        ", "\f", "\f ", "\t\t"]
    lines = []
    for _ in range(R.choice([2, 3, 4, 5])):
        ind = "".join(R.choice(pieces) for _ in range(R.choice([0, 0, 1, 1, 2])))
        stmt = R.choice(["if score:", "if overtime > 1:", "else:", "score += 1", "score = score * 2",
                         "overtime -= 1", "", "score //= 2"])
        lines.append(ind + stmt)
    return "\n".join(lines)


ARG_POOL = [(60, 1), (100, 0), (50, 3), (99, 7), (10, 30), (1, 1), (0, 0), (33, 2), (5, 10), (70, 60),
            (-5, 2), (100, -1), (7, 400)]
BIG_ARGS = [(2**62, 1), (2**63 - 1, 1), (-(2**63), 2), (2**63 - 1, 0), (123456789, 99999),
            (2**64, 1), (-(2**70), 3), (2**200, 0), (5, 2**64), (2**53 + 1, 3)]


def args_for_random():
    if R.random() < 0.12:
        return R.choice(BIG_ARGS)
    return R.choice(ARG_POOL)


def fixed_programs():
    """Hand-picked edge cases (each run with a few argument pairs)."""
    inf = "1" + "0" * 400 + ".0"
    out = []
    # penalties used in practice, over a range of days
    for o in list(range(0, 61)) + [100, 200, 365, 400, 1000, 3000, 3500]:
        out.append(("score = score * 0.8 ** overtime", [(100, o), (97, o), (33, o)]))
        out.append(("score = score * 0.9 ** overtime", [(100, o)]))
        out.append(("score = score * (1 - 0.1) ** (overtime + 1)", [(100, o)]))
        out.append(("score = score * 0.95 ** overtime if overtime < 30 else 0", [(100, o)]))
    for s in list(range(0, 121)) + [10**6, 2**53 - 1, 2**53 + 1, 2**62]:
        out.append(("score = score ** 0.5", [(s, 0)]))
        out.append(("score = score * 0.5 ** 0.5", [(s, 3)]))
        out.append(("score = score / 3 * 3", [(s, 0)]))
        out.append(("score = score * 0.7", [(s, 0)]))
        out.append(("score = score / 7", [(s, 0)]))
        out.append(("score = (score + 0.5) // 1", [(s, 0)]))
    # floats near the int64 boundary and exact int/float comparison
    for lit in ["9223372036854775807.0", "9223372036854775808.0", "9223372036854774784.0",
                "-9223372036854775808.0", "-9223372036854777856.0", "-9223372036854775809.0",
                "9223372036854775295.9", "0.9999999999999999", "-0.9999999999999999", "-0.5",
                "4503599627370495.5", "4503599627370496.5", "1" + "0" * 30 + ".5", inf, "-" + inf,
                "(" + inf + " - " + inf + ")"]:
        out.append((f"score = {lit}", [(1, 1)]))
        out.append((f"score = score < {lit}", [(2**63 - 1, 1), (-(2**63), 1), (0, 0)]))
        out.append((f"score = score == {lit}", [(2**63 - 1, 1), (-(2**63), 1), (2**63, 1)]))
    for p in ["score = score == score * 1.0", "score = score < score + 0.0", "score = score * 1.0",
              "score = score + 0.5", "score = score - 0.5", "score = score / 1", "score = score // 1.0",
              "score = score * 1.0 == score", "score = score + 1 > score * 1.0",
              "score = 9007199254740993 == 9007199254740992.0", "score = 9007199254740993 > 9007199254740992.0",
              "score = (score * 1.0 < score) + (score * 1.0 > score) * 2"]:
        out.append((p, [(2**53 + 1, 0), (2**63 - 1, 0), (-(2**63) + 1, 0), (2**64 + 1, 0), (3, 0),
                        (2**1023, 0), (2**1024, 0), (-(2**1100), 0)]))
    # true division of ints: rounding, subnormals, overflow
    for p in ["score = (2 ** 1024 - 2 ** 970) / 1", "score = (2 ** 1024 - 2 ** 970 - 1) / 1",
              "score = (2 ** 1024 - 2 ** 971) / 1 > 0", "score = 2 ** 1024 / 2", "score = 2 ** 1025 / 3",
              "score = 1 / 2 ** 1074 > 0", "score = 1 / 2 ** 1075 > 0", "score = 3 / 2 ** 1076 > 0",
              "score = 1 / 2 ** 1075 * 2 ** 1074", "score = (1 / 2 ** 1074) * 2 ** 1000 * 2 ** 74",
              "score = (3 / 2 ** 1076) * 2 ** 1000 * 2 ** 76", "score = (2 ** 60 + 1) / 3 * 3",
              "score = score / overtime", "score = (score * 10 ** 20 + 1) / 10 ** 20 * 3",
              "score = -(2 ** 70) / 3 * 3", "score = 0 / -5 == 0", "score = (10 ** 400) / (10 ** 399)",
              "score = (10 ** 400 + 1) / 3 / 10 ** 300", "score = 1 / -(2 ** 2000) * 0 == 0",
              "score = 10 ** 400 * 1.0", "score = 10 ** 400 + 0.5", "score = 0.5 ** 10 ** 400",
              "score = (2 ** 1024 - 2 ** 970) * 1.0", "score = (2 ** 1024 - 2 ** 970 - 1) * 1.0 > 0",
              "score = (2 ** 1024 - 2 ** 971) + 0.0 > 0"]:
        out.append((p, [(100, 3), (2**80 + 1, 7), (-(2**70) - 3, 9)]))
    # int / int near the float limits: overflow, rounding ties, subnormals
    rnd = random.Random(5)
    divs = []
    for k in [1023, 1024, 1025]:
        divs += [f"(2 ** {k} - 2 ** {k - 54}) / 1", f"(2 ** {k} - 2 ** {k - 54} - 1) / 1",
                 f"(2 ** {k} - 2 ** {k - 53}) / 1", f"(2 ** {k + 5} - 2 ** {k - 49}) / 32"]
    for k in [1021, 1022, 1023, 1070, 1073, 1074, 1075, 1076, 1077, 1100]:
        divs += [f"1 / 2 ** {k}", f"3 / 2 ** {k}", f"(2 ** 60 + 1) / 2 ** {k + 60}",
                 f"(2 ** 60 - 1) / 2 ** {k + 60}", f"5 / (2 ** {k} + 1)", f"-7 / 2 ** {k}"]
    for _ in range(80):
        a = rnd.getrandbits(rnd.randrange(1, 2500))
        b = rnd.getrandbits(rnd.randrange(1, 2500)) or 1
        divs.append(f"{a} / {b}")
    for _ in range(40):
        a = rnd.randrange(2**53, 2**63)
        b = rnd.randrange(1, 2**63)
        divs.append(f"{a} / {b}")
        divs.append(f"{b} / -{a}")
    for d in divs:
        out.append((f"score = {d}", [(1, 1)]))
    # complex power whose phase is infinite: glibc's cos(inf) sets EDOM,
    # which complex_pow reports as ZeroDivisionError
    e200 = "1" + "0" * 200 + ".0"
    out.append((f"score = ((-2.5) ** 0.1) ** (((-{e200}) ** (1 / 3)) * (718.496 ** score))", [(100, 0), (10, 0)]))
    out.append((f"score = ((-2.5) ** 0.1) ** ((-{e200}) ** 0.5 * {e200} ** 2)", [(100, 0)]))
    # float floor division and float pow special cases
    nan = f"({inf} - {inf})"
    for a in ["score", "-score", "0.1", "-0.7", "5.5", inf, "-" + inf, nan, "0.0", "-0.0", "1e0".replace("e0", ".0")]:
        for b in ["0.1", "-0.7", "3", "-3", "0.0", inf, "-" + inf, nan, "overtime", "2.5"]:
            out.append((f"score = ({a}) // ({b})", [(7, 2)]))
            out.append((f"score = (({a}) // ({b})) * 0 == 0", [(7, 2)]))
            out.append((f"score = ({a}) ** ({b})", [(7, 2)]))
            out.append((f"score = ({a}) ** ({b}) == 0", [(7, 2)]))
    for p in ["score = 0.0 ** 0", "score = (-0.0) ** 3 == 0", "score = (-0.0) ** 0.5", "score = 0.0 ** -1",
              "score = 0 ** -1", "score = (-0.0) ** -2", "score = 10.0 ** 400", "score = 10.0 ** -400",
              "score = (-10.0) ** 309", "score = (-10.0) ** 308 > 0", "score = 2.0 ** 1023.5",
              "score = 0.5 ** 1075", "score = 0.5 ** 1074 > 0", "score = (-1) ** 0.5 == 0",
              "score = (-1.0) ** (2 ** 60 + 1)", "score = 1.0 ** (2 ** 2000)", "score = (-8) ** (1 / 3) == 2",
              "score = 2 ** -1 * 4", "score = (-2) ** -3 * 16", "score = 10 ** -400 == 0",
              "score = (-1) ** (2 ** 100 + 1)", "score = 1 ** (2 ** 100)", "score = 0 ** (2 ** 100)",
              "score = 2 ** (2 ** 100)", "score = score ** 0.5 ** 2", "score = overtime ** -overtime * 100",
              "score = 1.0000001 ** 10 ** 9", "score = 0.9999999 ** 10 ** 9 * 10 ** 9",
              "score = 1.5 ** 1767", "score = 1.5 ** 1751 > 0", "score = (-1.5) ** 1751 < 0"]:
        out.append((p, [(100, 3), (0, 0)]))
    # complex intermediates
    c = "((-8) ** 0.5)"
    d = "((-2) ** 0.5)"
    for p in [f"score = {c} == {c}", f"score = {c} ** 2 == -8", f"score = {d} * {d} == -2",
              f"score = {d} * {d} + 2 == 0", f"score = ({d} + 1) / {c} == 0", f"score = {c} / 0",
              f"score = {c} / ({c} - {c})", f"score = ({c} - {c}) ** -1", f"score = ({c} - {c}) ** 0 == 1",
              f"score = ({c} - {c}) ** 0.5 == 0", f"score = ({c} - {c}) ** {c}", f"score = {c} ** {c} == 0",
              f"score = {c} ** {d} == {d} ** {c}", f"score = {c} ** 101 == 0", f"score = {c} ** 100 == 2 ** 150",
              f"score = {c} ** -3 == 0", f"score = {c} ** 0", f"score = {c} ** 0.5 == 2 ** 0.75",
              f"score = 0 * {c} == 0", f"score = {c} < 1", f"score = {c} // 1", f"score = {c} << 1",
              f"score = {c}", f"score = {c} - {c}", f"score = {c} == 8 ** 0.5", f"score = {c} * 0 == 0",
              f"score = ({c} * 0).score", f"score = -{c} == 0", f"score = +{c} == {c}",
              f"score = ((-1e300) ** 0.5) ** 3", f"score = ((-1e300) ** 0.5) ** 2 == 0".replace("1e300", "1" + "0" * 300 + ".0"),
              f"score = ((-1" + "0" * 300 + ".0) ** 0.5) ** 3 == 0",
              f"score = ((-1" + "0" * 300 + ".0) ** 0.5) * ((-1" + "0" * 300 + ".0) ** 0.5) == 0",
              f"score = {c} ** (10 ** 400)", f"score = {c} + 10 ** 400", f"score = {c} == 10 ** 400",
              f"score = {c} ** 2.0 == -8", f"score = (1 + {c}) ** 50 == 0", f"score = {c} ** (0 - 101) == 0",
              f"score = (-score) ** (overtime / 3) == score", f"score = ((-score) ** 0.5 + 1) ** 2 == 0",
              f"score = {c} == ()", f"score = () == {c}", f"score = {c} * ()", f"score = {c} / {inf} == 0",
              f"score = {c} * {inf} == 0", f"score = ({c} * {nan}) == 0", f"score = {c} / {nan} == 0",
              f"score = ({c} * {inf}) ** 2", f"score = ({inf} * {c}) / ({inf} * {c}) == 0",
              f"score = {c} ** -1 * {c} == 1", f"score = 1 / {c} == {c} ** -1", f"score = (1 + {c}) ** (2 + {c}) == 0"]:
        out.append((p, [(100, 3), (9, 2)]))
    # empty tuple
    for p in ["score = ()", "score = (())", "score = () == ()", "score = () < ()", "score = () <= ()",
              "score = () > ()", "score = () >= ()", "score = () < 1", "score = 1 < ()", "score = () == 1",
              "score = 1 == ()", "score = () * 3 == ()", "score = () * score == ()", "score = score * () == ()",
              "score = () * 2 ** 63", "score = () * 2 ** 62 == ()", "score = 2 ** 63 * ()", "score = () * -5 == ()",
              "score = () * 1.0", "score = () + ()", "score = () + () == ()", "score = () + 1", "score = 1 + ()",
              "score = -()", "score = +()", "score = () - ()", "score = () ** 2", "score = 2 ** ()",
              "score = () << 1", "score = () / 1", "score = () // 1", "score = 1 if () else 2", "() = ()",
              "(()) = ()", "() = 1", "score = () = ()", "score = overtime = ()", "() += ()", "score = () * (1 < 2) == ()",
              "score = ().score", "score = ()()", "score = () * 10 ** 400"]:
        out.append((p, [(5, 1)]))
    # shifts
    for p in ["score = score << overtime", "score = score >> overtime", "score = -score >> overtime",
              "score = 1 << 65535 > 0", "score = 1 << 65536 > 0", "score = (1 << 65535) >> 65530",
              "score = score << -1", "score = 0 << -1", "score = 0 << 2 ** 100", "score = 1 >> 2 ** 100",
              "score = -1 >> 2 ** 100", "score = -score >> 2 ** 100", "score = 1.0 << 1", "score = 1 << 1.0",
              "score = score >> 63", "score = -score >> 63", "score = score << 62", "score = score << 63",
              "score = (score << 100) >> 99", "score = 3 << 65534 > 0", "score = -3 << 65534 < 0",
              "score = (2 ** 65535) >> 65535", "score = -(2 ** 65535) >> 65536"]:
        out.append((p, [(5, 3), (-7, 64), (2**62, 1), (-(2**63), 1), (0, 5), (3, 70)]))
    # big ints and the 65,536-bit limit
    for p in ["score = 2 ** 63 - 1", "score = 2 ** 63", "score = -2 ** 63", "score = -(2 ** 63) - 1",
              "score = 2 ** 63 - 1 + score", "score = 2 ** 64 // score", "score = -(-2 ** 63)",
              "score = score * 2 ** 62", "score = 2 ** 65535 > 0", "score = 2 ** 65536 > 0",
              "score = (-2) ** 65535 < 0", "score = (-2) ** 65536 > 0", "score = 3 ** 41000 > 0",
              "score = 3 ** 41350 > 0", "score = 3 ** 41347 > 0", "score = 3 ** 41348 > 0", "score = 9 ** 9 ** 9",
              "score = (2 ** 65535) * 2 > 0", "score = (2 ** 65535 - 1) * 2 > 0", "score = (2 ** 65535) + 2 ** 65535 > 0",
              "score = (2 ** 65535 - 1) + 2 ** 65535 > 0", "score = -(2 ** 65535) - 2 ** 65535 < 0",
              "score = (2 ** 65535) // (2 ** 65534)", "score = (2 ** 32768) * (2 ** 32767) > 0",
              "score = (2 ** 32768) * (2 ** 32768) > 0", "score = (2 ** 32768 - 1) * (2 ** 32768 - 1) > 0",
              "score = (2 ** 40000) ** 2 > 0", "score = (2 ** 30000) ** 2 > 0", "score = 10 ** 19728 > 0",
              "score = 10 ** 19729 > 0", "score = 7 ** 23000 // 7 ** 22999", "score = (-score) ** 63",
              "score = score ** 64", "score = (-2) ** 63", "score = (-2) ** 64", "score = 2 ** 62 * 2 - 1",
              "score = -(2 ** 62) * 2", "score = (2 ** 63) // -1", "score = -(2 ** 63) // -1",
              "score = (-(2 ** 63)) // (-1)", "score = score // -1", "score = -score // 7", "score = score // -7",
              "score = (2 ** 100 + 1) // -(2 ** 50)", "score = -(2 ** 100) // 3 + 2 ** 100 // 3",
              "score = 2 ** 1000 - 2 ** 1000 + score", "score = score - 2 ** 63", "score = score + 2 ** 63",
              "score = 1 ** (2 ** 1000)", "score = 1_000_000 ** 3", "score = 1_000_000 ** 4 // 10 ** 12",
              "score = 9223372036854775807 + 1 - 1", "score = 9223372036854775808 - 1",
              "score = -9223372036854775808", "score = -9223372036854775809 + 1",
              "score = 123456789012345678901234567890 // 10 ** 20", "score = (score * 10 ** 30) // 10 ** 30"]:
        out.append((p, [(5, 3), (-(2**63), 1), (2**63 - 1, 2)]))
    # tokenizer corners
    for p in ["score = 1.if 1 else 2", "score = 1.if 0 else 2", "score = (1.if 0 else 2)", "score = 1.else",
              "score = 1 if 0 else 1.else", "score = 0 if 1.else 2", "score = 1.score", "score = 1.overtime",
              "score = 1..score", "score = 1 .score", "score = 0.if 1 else 2", "score = 00.if 1 else 2",
              "score = 007.if 1 else 2", "score = 1_0.if 1 else 2", "score = 1.5.score", "score = .5.if 1 else 0",
              "score = 007", "score = 007.5", "score = 0_7", "score = 0_0", "score = 000", "score = 00.5",
              "score = 1_0.5", "score = 1__0", "score = 1_", "score = 1_.5", "score = 0_.5", "score = 0._5",
              "score = 1_000_000.000_001 * 10", "score = 0_0_0.5 * 4", "score = 0000_1", "score = 00_00",
              "score = score->1", "score = 1 <> 2", "score = ...", "score = ....score", "score: 1 = 2",
              "score: 1", "(score): 1 = 3", "score.score: 1 = 2", "(): 1", "score = score if ... else 1",
              "score = (score := 7) + 1", "if score := 0:\n score = 9", "if (score := 0):\n score = 9",
              "score := 3", "score = score := 3", "(score) := 3", "(score := 3)", "((score) := 3)",
              "score = (score := overtime := 3)", "score = ((overtime := 4) + overtime)",
              "score = score(x := 1)".replace("x", "overtime"), "score = (score := 1) if 0 else score",
              "score = score((overtime := 5)) if 0 else overtime", "score = 1 if 1 else 2 if 1 else 3",
              "score = 1 if 2 if 3 else 4 else 5", "if 1 if 0 else 0:\n score = 3", "score = score ==",
              "score = (", "score = )", "score = ((1)", "score = (1))", "(score) = 4", "((score)) = 4",
              "score = (overtime) = 6", "score.score = 1", "score().score = 1", "(1).score = 1", "1 .score = 1",
              "(1/0).score = 1/0", "score.x = 1".replace("x", "overtime"), "score.score += 1",
              "score() = 1", "score() += 1", "1 = score", "score + 1 = 2", "-score = 1", "*score = 1",
              "score = *score", "*score", "score = (*score)", "score(*score)", "score(**score)", "score(*())",
              "score(**())", "score(score=1)", "score(1=1)", "score((score)=1)", "score(if=1)", "score(*)",
              "score()", "score(1)", "score(1/0)", "(1/0)()", "score()()", "score(score)(1/0)",
              "score = score.if", "score = score.else", "score = score.score", "score = (1/0).score",
              "score = 1(2)", "score = score(", "score = score)", "score = score((1))",
              "if score: score = 1\nelse: score = 2", "if score: score = 1 else: score = 2",
              "if score:\n\nscore = 1", "if score:\n  \n  score = 1", "if score:", "else:\n score = 1",
              "if 1:\n score = 1\n  score = 2", "if 1:\n  score = 1\n score = 2", "if 1:\n score = 1\nscore += 1",
              "if 0:\n score = 1\nelse:\n score = 2\nelse:\n score = 3", "if 0: if 1: score = 2",
              "score = 1\n\n\n", "\n\nscore = 1", "   ", "", "\n", "\r\n", "\r", "score = 1\r\nscore += 1\rscore += 1",
              "score = 1\f", "\fscore = 1", "  \f score = 1", "\f  score = 1", "if 1:\n  score=1\n\f  score = 3",
              "if 1:\n\tscore = 1\n        score = 2", "if 1:\n        score = 1\n\tscore = 2",
              "if 1:\n\tscore = 1\n\tscore = 2", "if 1:\n \tscore = 1\n\tscore = 2", "if 1:\n\t score = 3",
              "if 1:\n  \tscore = 3\n\tscore += 1", "if 1:\n\tif 1:\n\t\tscore = 3\n\tscore += 1",
              "if 1:\n    if 1:\n\tscore = 3", "if 1:\n\tif 1:\n\t        score = 3\n\tscore = 5",
              "score = (\n1\n+\n 2)", "score = (1 +\n\t\t2)", "score = (\n  1)\n  ", "score = (1\n", "score = 1 +\n 2",
              "score = score\v", "score = 1\vscore", "score = 1\x1c", "score\xa0= 1", "score = 1\u3000",
              "score = \u0661", "score = 1\u0661", "score = \uff11", "score =\u20001",
              "score = " + "(" * 199 + "1" + ")" * 199, "score = " + "(" * 200 + "1" + ")" * 200,
              "score = " + "(" * 201 + "1" + ")" * 201, "score = " + "(-" * 200 + "1" + ")" * 200,
              "score = " + "- " * 300 + "1", "score = " + "-" * 301 + "1", "score = " + "+1" * 500,
              "score = 1" + " < 1" * 300, "score = " + "1 if 0 else " * 100 + "7",
              "score = " + "2 ** " * 20 + "1", "score = " + "score." * 3 + "score",
              "score = 1 # comment", "score = 1; score = 2", "score = 'a'", "Score = 1", "score = score != 1",
              "score = 1e3", "score = 0x10", "score = 1j", "score = True", "score = max(0, score)",
              "score = \x00", "score = 1" + "1" * 4299, "score = 1" + "1" * 4300, "score = 0" * 1 + "0" * 4300,
              "score = " + "1_" * 4299 + "1", "score = " + "1_" * 4300 + "1", "score = _1", "score = 1 _",
              "score = " + "1" * 4300 + ".5", "score = 0." + "1" * 4300, "score = 0." + "1" * 4301]:
        out.append((p, [(5, 3)]))
    # assorted corners
    for p in ["score = 2 ** -(2 ** 100) == 0", "score = 0.5 ** -(2 ** 100)", "score = (-2) ** -(2 ** 100 + 1) == 0",
              "score = (-2) ** -(2 ** 60 + 1) == 0", "score = 2 ** -1074 > 0", "score = 2 ** -1075 > 0",
              "score = () * -(2 ** 63) == ()", "score = () * -(2 ** 63) - 1", "score = +()", "score = 2 ** 0.5 ** -1",
              "if 1:\r\n    score = 1\r\nelse:\r\n    score = 2", "if 0:\r    score = 1\relse:\r    score = 2\r",
              "\u3000score = 1", "score = 1\n\f\n", "score = 1\n\t\n  \n", "if 1:\n\tscore = 1\n\n\t\n\tscore += 1",
              "score = (\n\tscore\n  *\n2\n)", "score = (\n)", "score = (\n\n)\n", "score = score(\n)",
              "score = score (overtime := 5) if 0 else overtime", "score = (overtime := 5) ** (score := 2)",
              "score += (score := 10)", "score = (score := score + 1) < score", "if (overtime := 0): score = 1\nelse: score = overtime",
              "score = 1 if (score := 0) else score", "score = [1]", "score = {1}", "score = 1, 2", "score = lambda: 1",
              "score = not 1", "score = 1 and 2", "score = 1 != 2", "score = 1 % 2", "score = ~1", "score = 1 @ 2",
              "score = 1 | 2", "score = 1 & 2", "score = 1 ^ 2"]:
        out.append((p, [(5, 3), (0, 0)]))
    # indentation depth
    for n in [98, 99, 100]:
        p = "".join(" " * i + "if 1:\n" for i in range(n)) + " " * n + "score = 1\n"
        out.append((p, [(5, 3)]))
        p = "".join("\t" * i + "if 1:\n" for i in range(n)) + "\t" * n + "score = 1\n"
        out.append((p, [(5, 3)]))
    # laziness and evaluation order
    for p in ["score = 1/0 if 0 else 2", "score = 1 if score > 0 else 1/0", "score = 1 > 2 < 1/0",
              "score = 1 < 2 < 1/0", "score = 1 < 2 > 3 < ()", "score = 1 < 2 < 3 < ()", "score = (1/0) + (() < 1)",
              "score = (() < 1) + 1/0", "score = 9 ** 9 ** 9 if 0 else 3", "score = 3 if 1 else 9 ** 9 ** 9",
              "score = 0 and 1".replace(" and ", " < "), "if 0:\n score = 1/0\nelse:\n score = 4",
              "if 1:\n score = 4\nelse:\n score = 1/0", "score = score(1/0)", "score = (1/0)(2)",
              "score = score(*(1/0))", "score = (1/0).score", "score.score = 1/0", "(1/0).score = 5",
              "score = overtime = 1/0", "score = () = 5", "score = overtime = 5\n() = score",
              "score = 2 ** 70\nscore = 1", "score = 2 ** 70 / 2 ** 69", "overtime = 2 ** 64\nscore = overtime // 2 ** 60",
              "score = 2 ** 70 if overtime else 1", "score = -score if score < 0 else score",
              "score += score\nscore *= overtime\nscore -= 1", "score /= 3\nscore *= 3", "score //= 0",
              "score /= 0", "score **= -1", "score <<= 2", "score >>= 1", "score **= 0.5", "score **= 2\nscore **= 2",
              "overtime **= overtime\nscore = overtime", "score //= 0.0", "score += 0.1\nscore *= 10"]:
        out.append((p, [(5, 3), (0, 0), (-3, 1)]))
    return out


def main():
    warnings.simplefilter("ignore")
    cases = []
    if NPROGRAMS == 1600:
        for prog, argsets in fixed_programs():
            for s, o in argsets:
                cases.append((prog, s, o))
    programs = [gen_program() for _ in range(NPROGRAMS)]
    for p in programs:
        for _ in range(2):
            s, o = args_for_random()
            cases.append((p, s, o))
    for p in programs[: NPROGRAMS * 9 // 16]:
        s, o = args_for_random()
        cases.append((mutate(p), s, o))
    for _ in range(NPROGRAMS * 5 // 16):
        s, o = R.choice(ARG_POOL)
        cases.append((gen_indentation_program(), s, o))
    seen = set()
    out = sys.stdout
    for prog, s, o in cases:
        key = (prog, s, o)
        if key in seen:
            continue
        seen.add(key)
        (kind, val), note, final = classify(prog, s, o)
        if kind == "skip":
            continue
        rec = {"program": prog, "score": s, "overtime": o}
        if kind == "want":
            rec["want"] = val
        else:
            rec["error"] = val
        if final is not None:
            rec["value"] = final
        if note is not None:
            rec["note"] = "CPython: " + (str(note[1]) if note[0] == "want" else "error " + note[1])
        out.write(json.dumps(rec, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
