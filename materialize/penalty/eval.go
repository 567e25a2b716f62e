package penalty

import "math/big"

// Compile prepares a penalty program for evaluation. It checks Back-End's
// whitelist on the raw text (check_penalty), then tokenizes and parses
// the program as CPython 3.11's exec would compile it, once.
//
// The error, if any, is an *Error of kind:
//   - KindIllegal: the text fails the whitelist (including text that is
//     not valid UTF-8);
//   - KindSyntax: CPython would raise SyntaxError (IndentationError and
//     TabError included), or the program nests deeper than 1000 levels
//     or is longer than 1 GiB;
//   - KindUnsupported: the program uses an annotated assignment or the
//     Ellipsis literal, which CPython runs but this package refuses.
//
// The empty program compiles, and leaves score unchanged.
func Compile(src string) (*Program, error) {
	if err := checkWhitelist(src); err != nil {
		return nil, err
	}
	if len(src) > maxSource {
		return nil, newError(KindSyntax, "too complex: program longer than 1 GiB")
	}
	p, err := parse(src)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Eval runs the program as Back-End does for a late submission,
//
//	d = {"score": score, "overtime": overtime}
//	exec(program, d)
//	return int(d["score"])
//
// with score the raw score delta (points) and overtime the number of days
// late, and returns int(d["score"]).
//
// A runtime failure is an *Error whose kind names the CPython exception
// (KindZeroDivision, KindOverflow, KindType, KindValue, KindAttribute),
// KindRange if the final int does not fit in int64, or KindLimit if an
// intermediate integer would exceed 65536 bits. Evaluation is lazy where
// Python's is (conditional expressions, comparison chains), so an error
// in a branch that is not taken does not happen.
//
// Eval does not modify p and allocates nothing on the common paths (no
// error, values within int64 and float64); it is safe for concurrent use.
// Its work is bounded: every node of the program is evaluated at most
// once, and no integer grows beyond 65536 bits.
func (p *Program) Eval(score, overtime int64) (int64, error) {
	final, _, err := p.run([2]value{intValue(score), intValue(overtime)})
	if err == nil {
		var r int64
		if r, err = resultInt64(final); err == nil {
			return r, nil
		}
	}
	return 0, err
}

// EvalBig is Eval for arguments of any size, since Python ints are
// unbounded. An argument that needs more than 65536 bits is a KindLimit
// error, a nil argument a KindValue error. EvalBig may allocate; it does
// not modify its arguments.
func (p *Program) EvalBig(score, overtime *big.Int) (int64, error) {
	var vars [2]value
	for i, x := range [...]*big.Int{score, overtime} {
		if x == nil {
			return 0, newError(KindValue, "nil argument")
		}
		v, err := bigValue(new(big.Int).Set(x))
		if err != nil {
			return 0, err
		}
		vars[i] = v
	}
	final, _, err := p.run(vars)
	if err == nil {
		var r int64
		if r, err = resultInt64(final); err == nil {
			return r, nil
		}
	}
	return 0, err
}

// run executes the program on the given variables and returns the final
// value of score (before int()) and the number of nodes visited.
func (p *Program) run(vars [2]value) (value, int, *Error) {
	if p == nil || len(p.nodes) == 0 {
		return vars[varScore], 0, nil // the zero Program is the empty program
	}
	m := machine{nodes: p.nodes, lists: p.lists, consts: p.consts, vars: vars}
	if err := m.exec(p.root); err != nil {
		return value{}, m.steps, err
	}
	return m.vars[varScore], m.steps, nil
}

// machine is the state of one evaluation. It lives on the caller's
// stack; the Program is only read.
type machine struct {
	nodes  []node
	lists  []int32
	consts []value
	vars   [2]value
	steps  int // nodes visited; never more than len(nodes)
}

// The evaluator walks the tree recursively. The parser appends a node
// after its children and gives every node one parent, so evaluation
// recurses to strictly smaller indices and visits each node at most once:
// steps never exceed len(nodes) (the fuzz test checks it), and the
// recursion depth never exceeds the tree depth (at most maxDepth).
// Each kind of node has its own small method, which keeps the stack
// frames small; names and constants are read without a call.

// exec runs a statement or block.
func (m *machine) exec(i int32) *Error {
	n := &m.nodes[i]
	m.steps++
	switch n.op {
	case opBlock:
		for _, s := range m.lists[n.lo:n.hi] {
			if err := m.exec(s); err != nil {
				return err
			}
		}
		return nil
	case opAssign:
		return m.execAssign(n)
	case opIf:
		c, err := m.eval(n.a)
		if err != nil {
			return err
		}
		if c.truth() {
			return m.exec(n.b)
		}
		if n.c >= 0 {
			return m.exec(n.c)
		}
		return nil
	case opAugAssign:
		return m.execAugAssign(n)
	case opExprStmt:
		_, err := m.eval(n.a)
		return err
	}
	return newError(KindUnsupported, "internal error: not a statement")
}

// execAssign evaluates the value, then stores it into the targets from
// left to right.
func (m *machine) execAssign(n *node) *Error {
	v, err := m.eval(n.a)
	if err != nil {
		return err
	}
	for _, t := range m.lists[n.lo:n.hi] {
		tn := &m.nodes[t]
		m.steps++
		switch tn.op {
		case opStoreName:
			m.vars[tn.sub&1] = v
		case opStoreAttr:
			// The object is evaluated, then setattr fails.
			obj, err := m.eval(tn.a)
			if err != nil {
				return err
			}
			return noAttribute(obj)
		default: // opStoreTuple
			// () = v unpacks v into no names: fine for the empty
			// tuple, a TypeError for a number.
			if v.k != vTuple {
				return newError(KindType, "cannot unpack non-iterable "+v.typeName()+" object")
			}
		}
	}
	return nil
}

// execAugAssign runs target op= value: load the target, evaluate the
// value, apply the operator, store.
func (m *machine) execAugAssign(n *node) *Error {
	t := &m.nodes[n.a]
	m.steps++
	if t.op == opStoreAttr {
		// x.name op= v loads x.name first, which fails.
		obj, err := m.eval(t.a)
		if err != nil {
			return err
		}
		return noAttribute(obj)
	}
	cur := m.vars[t.sub&1]
	v, err := m.eval(n.b)
	if err != nil {
		return err
	}
	r, err := binary(binOp(n.sub), cur, v)
	if err != nil {
		return err
	}
	m.vars[t.sub&1] = r
	return nil
}

// noAttribute is the AttributeError of x.score or x.overtime: no value of
// a penalty program has such an attribute.
func noAttribute(obj value) *Error {
	return newError(KindAttribute, "'"+obj.typeName()+"' object has no such attribute")
}

// eval evaluates an expression, left to right as CPython does.
func (m *machine) eval(i int32) (value, *Error) {
	n := &m.nodes[i]
	m.steps++
	switch n.op {
	case opName:
		return m.vars[n.sub&1], nil
	case opConst:
		return m.consts[n.a], nil
	case opBinary:
		return m.evalBinary(n)
	case opCompare:
		return m.evalCompare(n)
	case opCondExpr:
		return m.evalCondExpr(n)
	case opUnary:
		x, err := m.eval(n.a)
		if err != nil {
			return value{}, err
		}
		return unary(n.sub, x)
	case opWalrus:
		v, err := m.eval(n.a)
		if err != nil {
			return value{}, err
		}
		m.vars[n.sub&1] = v
		return v, nil
	case opCall:
		return m.evalCall(n)
	case opAttr:
		obj, err := m.eval(n.a)
		if err != nil {
			return value{}, err
		}
		return value{}, noAttribute(obj)
	}
	return value{}, newError(KindUnsupported, "internal error: not an expression")
}

func (m *machine) evalBinary(n *node) (value, *Error) {
	x, err := m.eval(n.a)
	if err != nil {
		return value{}, err
	}
	y, err := m.eval(n.b)
	if err != nil {
		return value{}, err
	}
	return binary(binOp(n.sub), x, y)
}

// evalCompare evaluates a comparison chain: a < b < c is a < b and b < c
// with b evaluated once, and c not at all if a < b is false.
func (m *machine) evalCompare(n *node) (value, *Error) {
	x, err := m.eval(n.a)
	if err != nil {
		return value{}, err
	}
	pairs := m.lists[n.lo:n.hi]
	for j := 0; j+1 < len(pairs); j += 2 {
		y, err := m.eval(pairs[j+1])
		if err != nil {
			return value{}, err
		}
		ok, err := compare(cmpOp(pairs[j]), x, y)
		if err != nil {
			return value{}, err
		}
		if !ok {
			return boolValue(false), nil
		}
		x = y
	}
	return boolValue(true), nil
}

// evalCondExpr evaluates a if cond else b: the condition first, then one
// branch only.
func (m *machine) evalCondExpr(n *node) (value, *Error) {
	c, err := m.eval(n.b)
	if err != nil {
		return value{}, err
	}
	if c.truth() {
		return m.eval(n.a)
	}
	return m.eval(n.c)
}

// evalCall evaluates the callee, then the argument, then fails: no value
// of a penalty program is callable.
func (m *machine) evalCall(n *node) (value, *Error) {
	f, err := m.eval(n.a)
	if err != nil {
		return value{}, err
	}
	if n.b >= 0 {
		arg, err := m.eval(n.b)
		if err != nil {
			return value{}, err
		}
		switch {
		case n.sub == argStar && arg.k != vTuple:
			return value{}, newError(KindType, "argument after * must be an iterable, not "+arg.typeName())
		case n.sub == argDoubleStar:
			return value{}, newError(KindType, "argument after ** must be a mapping, not "+arg.typeName())
		}
	}
	return value{}, newError(KindType, "'"+f.typeName()+"' object is not callable")
}
