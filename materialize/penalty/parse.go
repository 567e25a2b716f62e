package penalty

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxDepth bounds the nesting of a program: the depth of its syntax tree
// and the recursion of the parser. CPython 3.11 itself gives up at about
// 3000 levels (RecursionError or MemoryError during compilation, fewer
// when exec is called from deep in a stack); this package reports
// KindSyntax ("too complex") beyond maxDepth, so hostile input can
// neither exhaust the stack nor make evaluation recurse deeply.
const maxDepth = 1000

// maxSource bounds the length of a program, so that token offsets fit in
// int32. Back-End's documents are far smaller (BSON caps them at 16 MiB).
const maxSource = 1 << 30

// parser is a recursive-descent parser equivalent to CPython 3.11's PEG
// grammar (Grammar/python.gram) restricted to the tokens a whitelisted
// program can contain. Rules are named after the grammar's.
type parser struct {
	tz          *tokenizer
	prog        *Program
	depth       []int32 // AST depth of each node
	nest        int     // current parser recursion depth
	unsupported string  // first construct found that this package refuses
}

// parse builds the Program for a whitelisted source text. A tokenizer
// error takes precedence in the report, since the parser only fails on
// the error token because the tokenizer failed.
func parse(src string) (*Program, *Error) {
	p := &parser{tz: newTokenizer(src), prog: &Program{}}
	root, err := p.file()
	if p.tz.err != nil {
		return nil, p.tz.err
	}
	if err != nil {
		return nil, err
	}
	if p.unsupported != "" {
		return nil, newError(KindUnsupported, p.unsupported+" is not supported")
	}
	p.prog.root = root
	return p.prog, nil
}

func (p *parser) peek() token        { return p.tz.peek(0) }
func (p *parser) peekAt(k int) token { return p.tz.peek(k) }

func (p *parser) advance() token {
	t := p.tz.peek(0)
	p.tz.advance()
	return t
}

func (p *parser) isOp(op opTok) bool {
	t := p.peek()
	return t.kind == tOp && t.op == op
}

func (p *parser) acceptOp(op opTok) bool {
	if p.isOp(op) {
		p.tz.advance()
		return true
	}
	return false
}

func (p *parser) errorf(format string, args ...any) *Error {
	t := p.peek()
	return newError(KindSyntax, fmt.Sprintf("line %d: ", t.line)+fmt.Sprintf(format, args...))
}

func (p *parser) invalid() *Error {
	return p.errorf("invalid syntax at %s", p.describe(p.peek()))
}

func (p *parser) expectOp(op opTok, what string) *Error {
	if !p.acceptOp(op) {
		return p.errorf("expected %s, found %s", what, p.describe(p.peek()))
	}
	return nil
}

// enter and leave bound the parser recursion.
func (p *parser) enter() *Error {
	p.nest++
	if p.nest > maxDepth {
		return p.errorf("too complex: nested more than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.nest-- }

// add appends a node, computing its depth from its children.
func (p *parser) add(n node, children ...int32) (int32, *Error) {
	d := int32(0)
	for _, c := range children {
		if c >= 0 && p.depth[c] > d {
			d = p.depth[c]
		}
	}
	if d+1 > maxDepth {
		return 0, p.errorf("too complex: nested more than %d levels", maxDepth)
	}
	p.prog.nodes = append(p.prog.nodes, n)
	p.depth = append(p.depth, d+1)
	return int32(len(p.prog.nodes) - 1), nil
}

// addList stores a list of node indices and returns its bounds.
func (p *parser) addList(items []int32) (lo, hi int32) {
	lo = int32(len(p.prog.lists))
	p.prog.lists = append(p.prog.lists, items...)
	return lo, int32(len(p.prog.lists))
}

// file: [statements] ENDMARKER
func (p *parser) file() (int32, *Error) {
	stmts, err := p.statements()
	if err != nil {
		return 0, err
	}
	if p.peek().kind != tEnd {
		return 0, p.invalid()
	}
	return p.block(stmts)
}

func (p *parser) block(stmts []int32) (int32, *Error) {
	lo, hi := p.addList(stmts)
	return p.add(node{op: opBlock, lo: lo, hi: hi}, stmts...)
}

// statements: statement+ (stopping before DEDENT or ENDMARKER).
func (p *parser) statements() ([]int32, *Error) {
	var stmts []int32
	for {
		switch p.peek().kind {
		case tEnd, tDedent:
			return stmts, nil
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, s)
	}
}

// statement: compound_stmt | simple_stmts
func (p *parser) statement() (int32, *Error) {
	if p.peek().kind == tIf {
		return p.ifStmt()
	}
	return p.simpleStmt()
}

// if_stmt: 'if' named_expression ':' block [else_block]
// else_block: 'else' ':' block
// (elif is not whitelisted.)
func (p *parser) ifStmt() (int32, *Error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	p.advance() // if
	cond, err := p.namedExpression()
	if err != nil {
		return 0, err
	}
	if err := p.expectOp(oColon, "':'"); err != nil {
		return 0, err
	}
	body, err := p.suite()
	if err != nil {
		return 0, err
	}
	orelse := int32(-1)
	if p.peek().kind == tElse {
		p.advance()
		if err := p.expectOp(oColon, "':'"); err != nil {
			return 0, err
		}
		if orelse, err = p.suite(); err != nil {
			return 0, err
		}
	}
	return p.add(node{op: opIf, a: cond, b: body, c: orelse}, cond, body, orelse)
}

// suite is the grammar's block: NEWLINE INDENT statements DEDENT |
// simple_stmts.
func (p *parser) suite() (int32, *Error) {
	if p.peek().kind != tNewline {
		s, err := p.simpleStmt()
		if err != nil {
			return 0, err
		}
		return p.block([]int32{s})
	}
	p.advance()
	if p.peek().kind != tIndent {
		return 0, p.errorf("IndentationError: expected an indented block")
	}
	p.advance()
	stmts, err := p.statements()
	if err != nil {
		return 0, err
	}
	if p.peek().kind != tDedent {
		return 0, p.invalid()
	}
	p.advance()
	return p.block(stmts)
}

// simpleStmt parses one simple statement and its NEWLINE:
//
//	assignment: NAME ':' expression ['=' annotated_rhs]            (unsupported)
//	          | ('(' single_target ')' | attribute) ':' expression ['=' annotated_rhs]
//	          | (star_targets '=')+ star_expressions !'='
//	          | single_target augassign ~ star_expressions
//	          | star_expressions
//
// It parses the first star_expressions and then decides from the next
// token, converting the expression to an assignment target when needed;
// the set of expressions that convert is exactly the set of targets the
// grammar accepts (NAME, attribute, '(' target ')', and '()').
func (p *parser) simpleStmt() (int32, *Error) {
	first, err := p.starExpressions()
	if err != nil {
		return 0, err
	}
	var stmt int32
	t := p.peek()
	switch {
	case t.kind == tOp && t.op == oAssign:
		exprs := []int32{first}
		for p.acceptOp(oAssign) {
			e, err := p.starExpressions()
			if err != nil {
				return 0, err
			}
			exprs = append(exprs, e)
		}
		value := exprs[len(exprs)-1]
		targets := exprs[:len(exprs)-1]
		for _, tg := range targets {
			if err := p.toTarget(tg, false); err != nil {
				return 0, err
			}
		}
		lo, hi := p.addList(targets)
		if stmt, err = p.add(node{op: opAssign, a: value, lo: lo, hi: hi}, exprs...); err != nil {
			return 0, err
		}
	case t.kind == tOp && augOp(t.op) >= 0:
		if err := p.toTarget(first, true); err != nil {
			return 0, err
		}
		p.advance()
		value, err := p.starExpressions()
		if err != nil {
			return 0, err
		}
		if stmt, err = p.add(node{op: opAugAssign, sub: uint8(augOp(t.op)), a: first, b: value}, first, value); err != nil {
			return 0, err
		}
	case t.kind == tOp && t.op == oColon:
		// An annotated assignment: valid Python, refused by this package.
		if err := p.toTarget(first, true); err != nil {
			return 0, err
		}
		p.advance()
		if _, err := p.expression(); err != nil {
			return 0, err
		}
		if p.acceptOp(oAssign) {
			if _, err := p.starExpressions(); err != nil {
				return 0, err
			}
		}
		p.markUnsupported("an annotated assignment")
		stmt = first
	default:
		if stmt, err = p.add(node{op: opExprStmt, a: first}, first); err != nil {
			return 0, err
		}
	}
	if p.peek().kind != tNewline {
		return 0, p.invalid()
	}
	p.advance()
	return stmt, nil
}

func (p *parser) markUnsupported(what string) {
	if p.unsupported == "" {
		p.unsupported = what
	}
}

// augOp maps an augmented assignment token to its operator, or -1.
func augOp(op opTok) int {
	switch op {
	case oPlusEq:
		return int(bAdd)
	case oMinusEq:
		return int(bSub)
	case oStarEq:
		return int(bMul)
	case oSlashEq:
		return int(bTrueDiv)
	case oDSlashEq:
		return int(bFloorDiv)
	case oDStarEq:
		return int(bPow)
	case oLShiftEq:
		return int(bLShift)
	case oRShiftEq:
		return int(bRShift)
	}
	return -1
}

// toTarget turns the expression node i into an assignment target in
// place. single is true for the grammar's single_target (augmented and
// annotated assignment), which excludes the empty tuple.
func (p *parser) toTarget(i int32, single bool) *Error {
	n := &p.prog.nodes[i]
	switch {
	case n.op == opName:
		n.op = opStoreName
	case n.op == opAttr:
		n.op = opStoreAttr
	case n.op == opConst && p.prog.consts[n.a].k == vTuple && !single:
		n.op = opStoreTuple
	default:
		return p.errorf("cannot assign to expression")
	}
	return nil
}

// star_expressions: star_expression (no commas are whitelisted)
// star_expression: '*' bitwise_or | expression
//
// A starred expression here always fails CPython's compiler ("can't use
// starred expression here", or "starred assignment target must be in a
// list or tuple"), so it is reported at once.
func (p *parser) starExpressions() (int32, *Error) {
	if p.isOp(oStar) {
		return 0, p.errorf("can't use starred expression here")
	}
	return p.expression()
}

// named_expression: NAME ':=' expression | expression !':='
func (p *parser) namedExpression() (int32, *Error) {
	if p.peek().kind == tName && p.peekAt(1).kind == tOp && p.peekAt(1).op == oWalrus {
		name := p.advance()
		p.advance()
		value, err := p.expression()
		if err != nil {
			return 0, err
		}
		return p.add(node{op: opWalrus, sub: name.v, a: value}, value)
	}
	e, err := p.expression()
	if err != nil {
		return 0, err
	}
	if p.isOp(oWalrus) {
		return 0, p.errorf("cannot use assignment expressions with this target")
	}
	return e, nil
}

// expression: disjunction 'if' disjunction 'else' expression | disjunction
// (disjunction, conjunction and inversion reduce to comparison, since
// and, or and not are not whitelisted).
func (p *parser) expression() (int32, *Error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	body, err := p.comparison()
	if err != nil {
		return 0, err
	}
	if p.peek().kind != tIf {
		return body, nil
	}
	p.advance()
	cond, err := p.comparison()
	if err != nil {
		return 0, err
	}
	if p.peek().kind != tElse {
		return 0, p.errorf("expected 'else' after 'if' expression")
	}
	p.advance()
	orelse, err := p.expression()
	if err != nil {
		return 0, err
	}
	return p.add(node{op: opCondExpr, a: body, b: cond, c: orelse}, body, cond, orelse)
}

// comparison: bitwise_or (compare_op bitwise_or)*
// with compare_op one of == < > <= >= (the others are not whitelisted;
// "<>" is a NOTEQUAL token the grammar rejects).
func (p *parser) comparison() (int32, *Error) {
	left, err := p.shiftExpr()
	if err != nil {
		return 0, err
	}
	var pairs []int32
	children := []int32{left}
	for {
		op, ok := p.compareOp()
		if !ok {
			break
		}
		p.advance()
		right, err := p.shiftExpr()
		if err != nil {
			return 0, err
		}
		pairs = append(pairs, int32(op), right)
		children = append(children, right)
	}
	if pairs == nil {
		return left, nil
	}
	lo, hi := p.addList(pairs)
	return p.add(node{op: opCompare, a: left, lo: lo, hi: hi}, children...)
}

func (p *parser) compareOp() (cmpOp, bool) {
	t := p.peek()
	if t.kind != tOp {
		return 0, false
	}
	switch t.op {
	case oEQ:
		return cEQ, true
	case oLT:
		return cLT, true
	case oGT:
		return cGT, true
	case oLE:
		return cLE, true
	case oGE:
		return cGE, true
	}
	return 0, false
}

// binaryLevel parses a left-associative level: operand (op operand)*.
func (p *parser) binaryLevel(operand func() (int32, *Error), ops func(opTok) (binOp, bool)) (int32, *Error) {
	left, err := operand()
	if err != nil {
		return 0, err
	}
	for {
		t := p.peek()
		if t.kind != tOp {
			return left, nil
		}
		op, ok := ops(t.op)
		if !ok {
			return left, nil
		}
		p.advance()
		right, err := operand()
		if err != nil {
			return 0, err
		}
		if left, err = p.add(node{op: opBinary, sub: uint8(op), a: left, b: right}, left, right); err != nil {
			return 0, err
		}
	}
}

// shift_expr: shift_expr ('<<' | '>>') sum | sum
// (bitwise_or, bitwise_xor and bitwise_and reduce to shift_expr.)
func (p *parser) shiftExpr() (int32, *Error) {
	return p.binaryLevel(p.sum, func(o opTok) (binOp, bool) {
		switch o {
		case oLShift:
			return bLShift, true
		case oRShift:
			return bRShift, true
		}
		return 0, false
	})
}

// sum: sum ('+' | '-') term | term
func (p *parser) sum() (int32, *Error) {
	return p.binaryLevel(p.term, func(o opTok) (binOp, bool) {
		switch o {
		case oPlus:
			return bAdd, true
		case oMinus:
			return bSub, true
		}
		return 0, false
	})
}

// term: term ('*' | '/' | '//') factor | factor
func (p *parser) term() (int32, *Error) {
	return p.binaryLevel(p.factor, func(o opTok) (binOp, bool) {
		switch o {
		case oStar:
			return bMul, true
		case oSlash:
			return bTrueDiv, true
		case oDSlash:
			return bFloorDiv, true
		}
		return 0, false
	})
}

// factor: ('+' | '-') factor | power
func (p *parser) factor() (int32, *Error) {
	op := -1
	if p.isOp(oMinus) {
		op = unaryNeg
	} else if p.isOp(oPlus) {
		op = unaryPos
	}
	if op < 0 {
		return p.power()
	}
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	p.advance()
	x, err := p.factor()
	if err != nil {
		return 0, err
	}
	return p.add(node{op: opUnary, sub: uint8(op), a: x}, x)
}

// power: primary '**' factor | primary
// (right-associative through factor, so -2 ** 2 == -(2 ** 2) and
// 2 ** -1 is valid).
func (p *parser) power() (int32, *Error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.isOp(oDStar) {
		return base, nil
	}
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	p.advance()
	exp, err := p.factor()
	if err != nil {
		return 0, err
	}
	return p.add(node{op: opBinary, sub: uint8(bPow), a: base, b: exp}, base, exp)
}

// primary: primary '.' NAME | primary '(' [arguments] ')' | atom
func (p *parser) primary() (int32, *Error) {
	e, err := p.atom()
	if err != nil {
		return 0, err
	}
	for {
		switch {
		case p.acceptOp(oDot):
			if p.peek().kind != tName {
				return 0, p.invalid()
			}
			p.advance()
			if e, err = p.add(node{op: opAttr, a: e}, e); err != nil {
				return 0, err
			}
		case p.acceptOp(oLParen):
			if e, err = p.call(e); err != nil {
				return 0, err
			}
		default:
			return e, nil
		}
	}
}

// call parses the arguments of a call after its '('. Without commas the
// grammar's arguments reduce to a single one of:
//
//	'*' expression | '**' expression | NAME '=' expression |
//	NAME ':=' expression | expression !':=' !'='
func (p *parser) call(callee int32) (int32, *Error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	form, arg := argNone, int32(-1)
	var err *Error
	t, t1 := p.peek(), p.peekAt(1)
	switch {
	case t.kind == tOp && t.op == oRParen:
	case t.kind == tOp && (t.op == oStar || t.op == oDStar):
		form = argStar
		if t.op == oDStar {
			form = argDoubleStar
		}
		p.advance()
		arg, err = p.expression()
	case t.kind == tName && t1.kind == tOp && t1.op == oAssign:
		form = argKeyword
		p.advance()
		p.advance()
		arg, err = p.expression()
	default:
		form = argPositional
		arg, err = p.namedExpression()
		if err == nil && p.isOp(oAssign) {
			return 0, p.errorf("expression cannot contain assignment")
		}
	}
	if err != nil {
		return 0, err
	}
	if err := p.expectOp(oRParen, "')'"); err != nil {
		return 0, err
	}
	return p.add(node{op: opCall, sub: uint8(form), a: callee, b: arg}, callee, arg)
}

// atom: NAME | NUMBER | '(' ')' | '(' named_expression ')' | '...'
func (p *parser) atom() (int32, *Error) {
	t := p.peek()
	switch {
	case t.kind == tName:
		p.advance()
		return p.add(node{op: opName, sub: t.v})
	case t.kind == tNumber:
		p.advance()
		v, err := parseNumber(p.tz.text(t))
		if err != nil {
			return 0, err
		}
		return p.constant(v)
	case t.kind == tOp && t.op == oLParen:
		p.advance()
		if p.acceptOp(oRParen) {
			return p.constant(value{k: vTuple})
		}
		e, err := p.namedExpression()
		if err != nil {
			return 0, err
		}
		if err := p.expectOp(oRParen, "')'"); err != nil {
			return 0, err
		}
		return e, nil
	case t.kind == tOp && t.op == oEllipsis:
		p.advance()
		p.markUnsupported("the Ellipsis literal (...)")
		return p.add(node{op: opEllipsis})
	}
	return 0, p.invalid()
}

func (p *parser) constant(v value) (int32, *Error) {
	p.prog.consts = append(p.prog.consts, v)
	return p.add(node{op: opConst, a: int32(len(p.prog.consts) - 1)})
}

// parseNumber converts a NUMBER token to its value: an int for a literal
// without '.', a float (correctly rounded, as CPython's
// PyOS_string_to_double; a literal too large for a float is inf, as in
// CPython) otherwise. Underscores are separators only.
func parseNumber(lit string) (value, *Error) {
	s := strings.ReplaceAll(lit, "_", "")
	if !strings.Contains(s, ".") {
		if len(s) <= 18 {
			i, err := strconv.ParseInt(s, 10, 64)
			if err == nil {
				return intValue(i), nil
			}
		}
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return value{}, newError(KindSyntax, "invalid integer literal "+quoteShort(lit))
		}
		return bigValue(b)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return value{}, newError(KindSyntax, "invalid float literal "+quoteShort(lit))
		}
	}
	return floatValue(f), nil
}

// describe names a token for error messages.
func (p *parser) describe(t token) string {
	switch t.kind {
	case tEnd:
		return "end of input"
	case tNewline:
		return "end of line"
	case tIndent:
		return "unexpected indent"
	case tDedent:
		return "unindent"
	case tName:
		if t.v == varScore {
			return "'score'"
		}
		return "'overtime'"
	case tIf:
		return "'if'"
	case tElse:
		return "'else'"
	case tNumber, tOp:
		return quoteShort(p.tz.text(t))
	}
	return "invalid token"
}
