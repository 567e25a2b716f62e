package watch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// This file ties the Promela model of the Leader (testdata/leader.pml) to
// the Go code it models. Each comment "go <file> <func>[ (defer)|
// (else)]: <Go statement>" in the model quotes one statement of that
// function; the Promela statements right after it model that statement.
// TestLeaderModelInStep checks three things:
//
//   - the quoted statement is a statement of the function (compared
//     without white space, so gofmt cannot break it), in the model's
//     order (a deferred one anywhere);
//   - its shape is the shape of the Promela statements after the comment:
//     the Go statement is translated (conditions, comparisons, time
//     arithmetic, filter fields, assignments) through modelVocab, which
//     names the model's variable for each Go name, and must equal them
//     after both sides are normalised (operand order, a >= b as b <= a,
//     sums as sorted terms, negations pushed in); "(else)" says the
//     Promela statement is the negation of the Go condition (the Go
//     branch is the model's else);
//   - every statement of a function the model quotes is either quoted or
//     waived in modelWaivers with a reason: a statement added to a
//     modelled function (an extra write, an early return) fails until
//     the model or the list says why it does not matter.

// modelVocab names, per file and per function, the model's expression
// (or statement) for a Go expression or statement, keyed by its source
// without white space. Everything not named here is translated by its
// structure.
var modelVocab = map[string]map[string]string{
	"watch/leader.go": {"l.Now()": "now", "l.TTL": "TTL", "l.Margin": "MARGIN", "every": "EVERY"},
	"watch/leader.go Run": {
		"sent": "sent", "lost": "lost",
		"l.Leases.Acquire(ctx,l.id,l.TTL)": "serverAcquire(i)",
		"sleepCtx(ctx,every)":              "start = capped(now + EVERY)",
	},
	"watch/leader.go term": {
		"renewedAt": "renewedAt[k]", "acquired": "sent", "renewed": "renewed", "start": "start", "ok": "ok",
		"go func() { done <- job(engCtx, eng) }()": "run Engine(i, k, e)",
		"tick":                  "next",
		"time.NewTicker(every)": "now + EVERY",
		"<-done":                "engineDone[k]",
		"<-tick.C":              "now >= next && !engineDone[k]", // a term whose job ended takes the done case
		"err==nil":              "handled",                       // the server handled the renewal and its reply came
		"cancel()":              "cancelled[k] = true",
		"l.Leases.Renew(ctx,l.id,lease.Epoch,l.TTL)": "serverRenew(i)",
		"l.Leases.Release(rctx,l.id,lease.Epoch)":    "serverRelease(i)",
		"return time.Time{}, ErrLeaseExpiring":       "refused = true",
	},
	// The guard reads renewedAt[k] where the closure reads its copy.
	"watch/leader.go term.WriteGuard": {"renewed": "renewedAt[k]"},
	"watch/guarded.go applyGuarded": {
		"guardCtx(ctx,guard)": "guard(k)",
		"st.Apply(wctx,part)": "landWrite(i, e)",
	},
	"watch/engine.go saveCheckpoint": {
		"guardCtx(ctx,e.WriteGuard)":            "guard(k)",
		"e.Checkpoints.SaveCheckpoint(wctx,cp)": "savePending[k] = e",
	},
	// The state document: its lease fields are the model's lease
	// variables; a lease that does not exist has owner 0; the caller's
	// owner is instance i+1, its epoch e.
	"mongodb/checkpoint.go": {
		"fieldLease": "leaseOwner", `fieldLease+".owner"`: "leaseOwner", `fieldLease+".epoch"`: "leaseEpoch",
		`fieldLease+".expires"`: "leaseExpires", `"$"+fieldLease+".expires"`: "leaseExpires", `"$"+fieldLease+".epoch"`: "leaseEpoch",
		"serverNow": "now", "owner": "i + 1", "epoch": "e", "cp.Epoch": "savePending[k]", "time.Time{}": "0",
	},
	// acquireWrite's epoch is the next value of the lease's epoch.
	"mongodb/checkpoint.go acquireWrite": {"epoch": "leaseEpoch"},
	"internal/memstore/source.go": {
		"s.lease.Owner": "leaseOwner", "s.lease.Epoch": "leaseEpoch", "s.lease.Expires": "leaseExpires",
		"s.lease==nil": "leaseOwner == 0", "now": "now", "s.clock()": "now", "ttl": "TTL",
		"owner": "i + 1", "epoch": "e", "time.Time{}": "0", "cp.Epoch": "savePending[k]",
		// No owner i+1 holds a lease that does not exist (owner 0).
		"s.lease!=nil": "true",
	},
	// cur is the lease's epoch (0 without a lease, as leaseEpoch starts).
	"internal/memstore/source.go SaveCheckpoint": {"cur": "leaseEpoch"},
}

// modelReturns names the model variable a function's "return x, nil"
// sets.
var modelReturns = map[string]string{"watch/leader.go term.WriteGuard": "deadline"}

// modelWaiver is a statement of a modelled function the model does not
// quote, and why that is sound.
type modelWaiver struct {
	file, fn string
	stmts    []string // each waives one statement: its head ("if cond {", "case x:"), a closure's body as "{…}"
	why      string
}

// ---- the model's side ----

// modelQuote is one "go <file> <func>: <code>" comment of the model.
type modelQuote struct {
	file, fn          string // fn: a function, or "term.WriteGuard", the closure term assigns to eng.WriteGuard
	deferred, negated bool
	code              string
	start, end        int // the comment's offsets in the model
}

var modelQuoteRE = regexp.MustCompile(`(?s)/\* go (\S+) ([^\s:]+)( \((?:defer|else)\))?: (.*?) \*/`)

func modelQuotes(src string) []modelQuote {
	var qs []modelQuote
	for _, m := range modelQuoteRE.FindAllStringSubmatchIndex(src, -1) {
		q := modelQuote{file: src[m[2]:m[3]], fn: src[m[4]:m[5]], code: src[m[8]:m[9]], start: m[0], end: m[1]}
		if m[6] >= 0 {
			q.deferred = src[m[6]:m[7]] == " (defer)"
			q.negated = src[m[6]:m[7]] == " (else)"
		}
		qs = append(qs, q)
	}
	return qs
}

// pmlLive blanks what spin does not compile by default (comments,
// preprocessor lines, the #ifdef BUG_ branches of the planted bugs),
// keeping offsets.
func pmlLive(src string) string {
	b := []byte(src)
	blank := func(i, j int) {
		for ; i < j; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '/' && b[i+1] == '*' {
			j := strings.Index(src[i+2:], "*/")
			blank(i, i+2+j+2)
		}
	}
	var skip []bool // per open #if: this branch excluded
	excluded := func() bool { return slices.Contains(skip, true) }
	off, macro := 0, false // macro: inside a #define continued with \
	for _, line := range strings.SplitAfter(src, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "#ifdef":
			skip = append(skip, true) // only BUG_ macros are tested with #ifdef; none is defined
		case len(f) >= 2 && f[0] == "#ifndef":
			skip = append(skip, false)
		case len(f) >= 1 && f[0] == "#else" && len(skip) > 0:
			skip[len(skip)-1] = !skip[len(skip)-1]
		case len(f) >= 1 && f[0] == "#endif" && len(skip) > 0:
			skip = skip[:len(skip)-1]
		}
		directive := macro || strings.HasPrefix(strings.TrimSpace(line), "#")
		if excluded() || directive {
			blank(off, off+len(line))
		}
		macro = directive && strings.HasSuffix(strings.TrimRight(line, " \t\n"), "\\")
		off += len(line)
	}
	return string(b)
}

// pmlMacros returns the model's object-like macros that are expressions
// (not numbers): they are expanded where a statement uses them.
func pmlMacros(src string) map[string][]string {
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (\w+)[ \t]+([^\n]*?)\s*(?:/\*.*)?$`).FindAllStringSubmatch(src, -1) {
		if _, err := strconv.Atoi(m[2]); err != nil {
			out[m[1]] = pmlTokens(m[2])
		}
	}
	return out
}

var pmlOps = []string{"->", "::", "==", "!=", "<=", ">=", "&&", "||", "++", "--"}

func pmlTokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case unicode.IsLetter(c) || c == '_' || unicode.IsDigit(c):
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			op := s[i : i+1]
			for _, o := range pmlOps {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			toks = append(toks, op)
			i += len(op)
		}
	}
	return toks
}

// pmlStatements returns the first n statements of live after offset at:
// the runs of tokens between separators (";", "->", "::", braces, and
// the keywords if, fi, do, od, atomic), labels dropped, macros expanded.
func pmlStatements(live string, at, n int, macros map[string][]string) [][]string {
	var out [][]string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	toks := pmlTokens(live[at:])
	for i := 0; i < len(toks) && len(out) < n; i++ {
		t := toks[i]
		switch t {
		case ";", "->", "::", "{", "}", "if", "fi", "do", "od", "atomic":
			flush()
			continue
		}
		if i+1 < len(toks) && toks[i+1] == ":" && len(cur) == 0 { // a label
			i++
			continue
		}
		if m, ok := macros[t]; ok {
			cur = append(cur, "(")
			cur = append(cur, m...)
			cur = append(cur, ")")
			continue
		}
		cur = append(cur, t)
	}
	flush()
	return out
}

// ---- the normal form both sides are compared in ----

// mx is an expression or statement of the model: op is "name", "num",
// "call" (name(args)), "index" (name[args[0]]), "run", "=", or an operator.
type mx struct {
	op   string
	name string
	args []*mx
}

func mname(s string) *mx           { return &mx{op: "name", name: s} }
func mbin(op string, a, b *mx) *mx { return &mx{op: op, args: []*mx{a, b}} }
func mnot(a *mx) *mx               { return &mx{op: "!", args: []*mx{a}} }

// pmlParser parses one statement of the model.
type pmlParser struct {
	toks []string
	i    int
	err  error
}

func parsePml(toks []string) (*mx, error) {
	p := &pmlParser{toks: toks}
	e := p.stmt()
	if p.err == nil && p.i < len(p.toks) {
		p.err = fmt.Errorf("unexpected %q", p.toks[p.i])
	}
	if p.err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(toks, " "), p.err)
	}
	return e, nil
}

func parsePmlString(s string) (*mx, error) { return parsePml(pmlTokens(s)) }

func (p *pmlParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *pmlParser) next() string { t := p.peek(); p.i++; return t }

func (p *pmlParser) expect(t string) {
	if p.next() != t && p.err == nil {
		p.err = fmt.Errorf("want %q", t)
	}
}

func (p *pmlParser) stmt() *mx {
	if p.peek() == "run" {
		p.next()
		c := p.primary()
		return &mx{op: "run", args: []*mx{c}}
	}
	lhs := p.expr(0)
	switch p.peek() {
	case "=":
		p.next()
		return mbin("=", lhs, p.expr(0))
	case "++":
		p.next()
		return mbin("=", lhs, mbin("+", lhs, &mx{op: "num", name: "1"}))
	}
	return lhs
}

var pmlPrec = map[string]int{"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}

func (p *pmlParser) expr(min int) *mx {
	l := p.unary()
	for {
		op := p.peek()
		prec, ok := pmlPrec[op]
		if !ok || prec < min {
			return l
		}
		p.next()
		l = mbin(op, l, p.expr(prec+1))
	}
}

func (p *pmlParser) unary() *mx {
	if p.peek() == "!" {
		p.next()
		return mnot(p.unary())
	}
	return p.primary()
}

func (p *pmlParser) primary() *mx {
	t := p.next()
	switch {
	case t == "(":
		e := p.expr(0)
		p.expect(")")
		return e
	case t != "" && unicode.IsDigit(rune(t[0])):
		return &mx{op: "num", name: t}
	case t != "" && (unicode.IsLetter(rune(t[0])) || t[0] == '_'):
		switch p.peek() {
		case "[":
			p.next()
			e := p.expr(0)
			p.expect("]")
			return &mx{op: "index", name: t, args: []*mx{e}}
		case "(":
			p.next()
			c := &mx{op: "call", name: t}
			for p.peek() != ")" && p.err == nil && p.peek() != "" {
				c.args = append(c.args, p.expr(0))
				if p.peek() == "," {
					p.next()
				}
			}
			p.expect(")")
			return c
		}
		return mname(t)
	}
	if p.err == nil {
		p.err = fmt.Errorf("unexpected %q", t)
	}
	return mname("?")
}

var negated = map[string]string{"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}

// norm returns e in normal form: negations pushed in, a > b as b < a,
// the operands of ==, !=, && and || sorted, sums as sorted terms, true
// dropped from a conjunction, and a conjunct or disjunct dropped where a
// sibling is its negation's complement (a && (!a || b) is a && b,
// a || (!a && b) is a || b).
func norm(e *mx) *mx {
	switch e.op {
	case "!":
		a := e.args[0]
		switch a.op {
		case "!":
			return norm(a.args[0])
		case "&&":
			return norm(mbin("||", mnot(a.args[0]), mnot(a.args[1])))
		case "||":
			return norm(mbin("&&", mnot(a.args[0]), mnot(a.args[1])))
		case "name":
			if a.name == "true" {
				return mname("false")
			}
		}
		if op, ok := negated[a.op]; ok {
			return norm(mbin(op, a.args[0], a.args[1]))
		}
		return mnot(norm(a))
	case ">", ">=":
		return norm(mbin(map[string]string{">": "<", ">=": "<="}[e.op], e.args[1], e.args[0]))
	case "==", "!=":
		a, b := norm(e.args[0]), norm(e.args[1])
		if show(a) > show(b) {
			a, b = b, a
		}
		return mbin(e.op, a, b)
	case "&&", "||":
		var parts []*mx
		var flat func(x *mx)
		flat = func(x *mx) {
			if x.op == e.op {
				flat(x.args[0])
				flat(x.args[1])
				return
			}
			n := norm(x)
			if n.op == e.op {
				parts = append(parts, n.args...)
				return
			}
			if e.op == "&&" && n.op == "name" && n.name == "true" {
				return
			}
			parts = append(parts, n)
		}
		flat(e)
		// Drop, inside a sibling of the other operator, each operand whose
		// negation is an operand here.
		here := map[string]bool{}
		for _, x := range parts {
			here[show(x)] = true
		}
		other := map[string]string{"&&": "||", "||": "&&"}[e.op]
		for i, x := range parts {
			if x.op != other {
				continue
			}
			var keep []*mx
			for _, y := range x.args {
				if !here[show(norm(mnot(y)))] {
					keep = append(keep, y)
				}
			}
			switch len(keep) {
			case 0:
				keep = x.args
			case 1:
				parts[i] = keep[0]
				continue
			}
			parts[i] = &mx{op: other, args: keep}
		}
		slices.SortFunc(parts, func(a, b *mx) int { return strings.Compare(show(a), show(b)) })
		parts = slices.CompactFunc(parts, func(a, b *mx) bool { return show(a) == show(b) })
		if len(parts) == 1 {
			return parts[0]
		}
		return &mx{op: e.op, args: parts}
	case "+", "-":
		var pos, neg []*mx
		var terms func(x *mx, sign bool)
		terms = func(x *mx, sign bool) {
			switch x.op {
			case "+":
				terms(x.args[0], sign)
				terms(x.args[1], sign)
				return
			case "-":
				terms(x.args[0], sign)
				terms(x.args[1], !sign)
				return
			}
			if sign {
				pos = append(pos, norm(x))
			} else {
				neg = append(neg, norm(x))
			}
		}
		terms(e, true)
		byShow := func(a, b *mx) int { return strings.Compare(show(a), show(b)) }
		slices.SortFunc(pos, byShow)
		slices.SortFunc(neg, byShow)
		return &mx{op: "sum", args: append(pos, neg...), name: strconv.Itoa(len(pos))}
	}
	out := &mx{op: e.op, name: e.name}
	for _, a := range e.args {
		out.args = append(out.args, norm(a))
	}
	return out
}

// show prints e (in normal form, parenthesised where needed).
func show(e *mx) string {
	prec := func(x *mx) int {
		if x.op == "sum" {
			return 4
		}
		if p, ok := pmlPrec[x.op]; ok {
			return p
		}
		return 9
	}
	sub := func(x *mx, min int) string {
		if prec(x) < min {
			return "(" + show(x) + ")"
		}
		return show(x)
	}
	switch e.op {
	case "name", "num":
		return e.name
	case "index":
		return e.name + "[" + show(e.args[0]) + "]"
	case "call":
		var as []string
		for _, a := range e.args {
			as = append(as, show(a))
		}
		return e.name + "(" + strings.Join(as, ", ") + ")"
	case "run":
		return "run " + show(e.args[0])
	case "=":
		return show(e.args[0]) + " = " + show(e.args[1])
	case "!":
		return "!" + sub(e.args[0], 9)
	case "sum":
		npos, _ := strconv.Atoi(e.name)
		var b strings.Builder
		for i, a := range e.args {
			switch {
			case i == 0 && i < npos:
			case i < npos:
				b.WriteString(" + ")
			case i == 0:
				b.WriteString("-")
			default:
				b.WriteString(" - ")
			}
			b.WriteString(sub(a, 5))
		}
		return b.String()
	}
	if p, ok := pmlPrec[e.op]; ok {
		parts := make([]string, len(e.args))
		for i, a := range e.args {
			parts[i] = sub(a, p+1)
		}
		return strings.Join(parts, " "+e.op+" ")
	}
	return "?" + e.op
}

// ---- the Go side ----

// goFunc is one function of the code the model quotes, with every
// statement in it (closures included) in source order.
type goFunc struct {
	file  string
	src   []byte
	fset  *token.FileSet
	decl  *ast.FuncDecl
	stmts []*goStmt
}

type goStmt struct {
	node           ast.Node // an ast.Stmt, *ast.CaseClause or *ast.CommClause
	head, full     string   // the statement's head ("if cond {", "case x:") and whole text, dense
	show           string   // its head, for messages
	quoted, waived bool
}

// dense is s without white space and without the trailing commas gofmt
// wants in a literal split over lines.
func dense(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	return strings.NewReplacer(",}", "}", ",)", ")").Replace(s)
}

func (f *goFunc) between(from, to token.Pos) string {
	return string(f.src[f.fset.Position(from).Offset:f.fset.Position(to).Offset])
}

func (f *goFunc) text(n ast.Node) string { return f.between(n.Pos(), n.End()) }

func (f *goFunc) textTo(n ast.Node, end token.Pos) string { return f.between(n.Pos(), end) }

// elided is n's text with the body of each function literal in it
// elided ("func() {…}"): its statements are statements of their own.
func (f *goFunc) elided(n ast.Node) string {
	var b strings.Builder
	at := n.Pos()
	ast.Inspect(n, func(c ast.Node) bool {
		lit, ok := c.(*ast.FuncLit)
		if !ok {
			return true
		}
		b.WriteString(f.between(at, lit.Body.Lbrace+1))
		b.WriteString("…}")
		at = lit.Body.Rbrace + 1
		return false
	})
	b.WriteString(f.between(at, n.End()))
	return b.String()
}

func loadGoFunc(t *testing.T, file, name string) *goFunc {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &goFunc{file: file, src: src, fset: fset}
	for _, d := range af.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			f.decl = fd
		}
	}
	if f.decl == nil {
		t.Fatalf("%s: no function %s", file, name)
	}
	inHead := map[ast.Node]bool{} // statements that are part of another's head
	ast.Inspect(f.decl.Body, func(n ast.Node) bool {
		if n != nil && inHead[n] {
			return true
		}
		var head string
		switch s := n.(type) {
		case nil, *ast.BlockStmt, *ast.EmptyStmt, *ast.LabeledStmt:
			return true
		case *ast.CaseClause:
			head = f.textTo(s, s.Colon+1)
		case *ast.CommClause:
			head = f.textTo(s, s.Colon+1)
			inHead[s.Comm] = true
		case ast.Stmt:
			body, parts := compound(s)
			if body == nil {
				head = f.elided(s)
				break
			}
			head = f.textTo(s, body.Lbrace+1)
			for _, p := range parts {
				inHead[p] = true
			}
		default:
			return true
		}
		f.stmts = append(f.stmts, &goStmt{node: n, head: dense(head), full: dense(f.text(n)), show: strings.Join(strings.Fields(head), " ")})
		return true
	})
	return f
}

// compound returns the body of a statement that has one, and the
// statements in its head (an if's init, a for's post...).
func compound(s ast.Stmt) (*ast.BlockStmt, []ast.Stmt) {
	switch s := s.(type) {
	case *ast.IfStmt:
		return s.Body, []ast.Stmt{s.Init}
	case *ast.ForStmt:
		return s.Body, []ast.Stmt{s.Init, s.Post}
	case *ast.RangeStmt:
		return s.Body, nil
	case *ast.SwitchStmt:
		return s.Body, []ast.Stmt{s.Init}
	case *ast.TypeSwitchStmt:
		return s.Body, []ast.Stmt{s.Init, s.Assign}
	case *ast.SelectStmt:
		return s.Body, nil
	}
	return nil, nil
}

// closure returns the function literal fn assigns to .name.
func (f *goFunc) closure(name string) *ast.FuncLit {
	var lit *ast.FuncLit
	ast.Inspect(f.decl, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			if sel, ok := as.Lhs[0].(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				lit, _ = as.Rhs[0].(*ast.FuncLit)
			}
		}
		return lit == nil
	})
	return lit
}

// translator turns a Go statement of one function into the model's
// statements.
type translator struct {
	f     *goFunc
	ctx   string // "file fn"
	vocab map[string]string
}

func newTranslator(f *goFunc, fn string) *translator {
	tr := &translator{f: f, ctx: f.file + " " + fn, vocab: map[string]string{}}
	outer, _, _ := strings.Cut(fn, ".")
	for _, k := range []string{f.file, f.file + " " + outer, f.file + " " + fn} {
		for g, m := range modelVocab[k] {
			tr.vocab[dense(g)] = m
		}
	}
	return tr
}

func (tr *translator) named(n ast.Node) (*mx, bool, error) {
	m, ok := tr.vocab[dense(tr.f.text(n))]
	if !ok || m == "" {
		return nil, false, nil
	}
	e, err := parsePmlString(m)
	return e, true, err
}

func (tr *translator) expr(e ast.Expr) (*mx, error) {
	if m, ok, err := tr.named(e); ok || err != nil {
		return m, err
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		return tr.expr(x.X)
	case *ast.StarExpr:
		return tr.expr(x.X)
	case *ast.BasicLit:
		if x.Kind == token.INT {
			return &mx{op: "num", name: x.Value}, nil
		}
	case *ast.Ident:
		if x.Name == "true" || x.Name == "false" {
			return mname(x.Name), nil
		}
	case *ast.UnaryExpr:
		a, err := tr.expr(x.X)
		switch x.Op {
		case token.NOT:
			return mnot(a), err
		case token.AND:
			return a, err
		}
	case *ast.BinaryExpr:
		if _, ok := pmlPrec[x.Op.String()]; ok {
			a, err := tr.expr(x.X)
			if err != nil {
				return nil, err
			}
			b, err := tr.expr(x.Y)
			return mbin(x.Op.String(), a, b), err
		}
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "int64" && len(x.Args) == 1 {
			return tr.expr(x.Args[0])
		}
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
			op := map[string]string{"Sub": "-", "Add": "+", "Before": "<"}[sel.Sel.Name]
			if op != "" && len(x.Args) == 1 {
				a, err := tr.expr(sel.X)
				if err != nil {
					return nil, err
				}
				b, err := tr.expr(x.Args[0])
				return mbin(op, a, b), err
			}
			if sel.Sel.Name == "Load" && len(x.Args) == 0 {
				return tr.expr(sel.X)
			}
		}
	case *ast.CompositeLit:
		if isBSON(x, "D") {
			return tr.agg(x)
		}
	}
	return nil, fmt.Errorf("%s: no translation of %q: name it in modelVocab", tr.ctx, tr.f.text(e))
}

func isBSON(e ast.Expr, typ string) bool {
	c, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	sel, ok := c.Type.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == typ && fmt.Sprint(sel.X) == "bson"
}

// elems returns the {Key, Value} pairs of a bson.D literal.
func elems(c *ast.CompositeLit) (keys, vals []ast.Expr) {
	for _, el := range c.Elts {
		kv, ok := el.(*ast.CompositeLit)
		if !ok || len(kv.Elts) != 2 {
			return nil, nil
		}
		keys = append(keys, kv.Elts[0].(*ast.KeyValueExpr).Value)
		vals = append(vals, kv.Elts[1].(*ast.KeyValueExpr).Value)
	}
	return keys, vals
}

func strLit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, _ := strconv.Unquote(b.Value)
		return s
	}
	return ""
}

// agg translates an aggregation expression {$op: [a, b]}.
func (tr *translator) agg(c *ast.CompositeLit) (*mx, error) {
	keys, vals := elems(c)
	if len(keys) != 1 {
		return nil, fmt.Errorf("%s: %q: one operator wanted", tr.ctx, tr.f.text(c))
	}
	op := strLit(keys[0])
	arr, ok := vals[0].(*ast.CompositeLit)
	if !ok || !isBSON(arr, "A") || len(arr.Elts) != 2 {
		return nil, fmt.Errorf("%s: %q: two arguments wanted", tr.ctx, tr.f.text(c))
	}
	a, err := tr.expr(arr.Elts[0])
	if err != nil {
		return nil, err
	}
	b, err := tr.expr(arr.Elts[1])
	if err != nil {
		return nil, err
	}
	switch op {
	case "$lte", "$lt", "$gte", "$gt", "$eq", "$ne":
		return mbin(map[string]string{"$lte": "<=", "$lt": "<", "$gte": ">=", "$gt": ">", "$eq": "==", "$ne": "!="}[op], a, b), nil
	case "$add":
		return mbin("+", a, b), nil
	case "$ifNull":
		// A missing field is the model's 0: $ifNull(x, 0) is x.
		if show(norm(b)) == "0" {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%s: no translation of the operator %s", tr.ctx, op)
}

// filter translates a query filter: the conjunction of its fields' conditions
// (the _id names the one state document).
func (tr *translator) filter(c *ast.CompositeLit) (*mx, error) {
	keys, vals := elems(c)
	if keys == nil {
		return nil, fmt.Errorf("%s: %q is not a filter", tr.ctx, tr.f.text(c))
	}
	var conj *mx
	for i, k := range keys {
		var cond *mx
		var err error
		switch key := strLit(k); {
		case key == "_id":
			continue
		case key == "$or":
			arr, _ := vals[i].(*ast.CompositeLit)
			if arr == nil || !isBSON(arr, "A") {
				return nil, fmt.Errorf("%s: $or of %q", tr.ctx, tr.f.text(vals[i]))
			}
			for _, el := range arr.Elts {
				sub, ok := el.(*ast.CompositeLit)
				if !ok {
					return nil, fmt.Errorf("%s: $or of %q", tr.ctx, tr.f.text(el))
				}
				d, err := tr.filter(sub)
				if err != nil {
					return nil, err
				}
				if cond == nil {
					cond = d
				} else {
					cond = mbin("||", cond, d)
				}
			}
		case key == "$expr":
			c, _ := vals[i].(*ast.CompositeLit)
			if c == nil {
				return nil, fmt.Errorf("%s: $expr of %q", tr.ctx, tr.f.text(vals[i]))
			}
			cond, err = tr.agg(c)
		default:
			field, err := tr.expr(k)
			if err != nil {
				return nil, err
			}
			if v, ok := vals[i].(*ast.CompositeLit); ok && isBSON(v, "D") {
				ks, vs := elems(v)
				if len(ks) != 1 || strLit(ks[0]) != "$exists" || dense(tr.f.text(vs[0])) != "false" {
					return nil, fmt.Errorf("%s: no translation of %q", tr.ctx, tr.f.text(v))
				}
				cond = mbin("==", field, &mx{op: "num", name: "0"}) // absent: the model's 0
				break
			}
			val, err := tr.expr(vals[i])
			if err != nil {
				return nil, err
			}
			cond = mbin("==", field, val)
		}
		if err != nil {
			return nil, err
		}
		if conj == nil {
			conj = cond
		} else {
			conj = mbin("&&", conj, cond)
		}
	}
	if conj == nil {
		return mname("true"), nil
	}
	return conj, nil
}

// update translates {$set: {field: value, ...}} into assignments.
func (tr *translator) update(c *ast.CompositeLit) ([]*mx, error) {
	keys, vals := elems(c)
	if len(keys) != 1 || strLit(keys[0]) != "$set" {
		return nil, fmt.Errorf("%s: %q: only $set is translated", tr.ctx, tr.f.text(c))
	}
	set, ok := vals[0].(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("%s: $set of %q", tr.ctx, tr.f.text(vals[0]))
	}
	var out []*mx
	fs, vs := elems(set)
	for i := range fs {
		f, err := tr.expr(fs[i])
		if err != nil {
			return nil, err
		}
		v, err := tr.expr(vs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, mbin("=", f, v))
	}
	return out, nil
}

// stmt translates one statement of the function.
func (tr *translator) stmt(s ast.Node) ([]*mx, error) {
	if m, ok, err := tr.named(s); ok || err != nil {
		return []*mx{m}, err
	}
	one := func(e *mx, err error) ([]*mx, error) { return []*mx{e}, err }
	switch x := s.(type) {
	case *ast.IfStmt:
		if as, ok := x.Init.(*ast.AssignStmt); ok && len(as.Rhs) == 1 {
			return one(tr.expr(as.Rhs[0])) // if err := call(); err != nil: the call
		}
		return one(tr.expr(x.Cond))
	case *ast.CaseClause:
		return one(tr.caseCond(x))
	case *ast.CommClause:
		switch c := x.Comm.(type) {
		case *ast.AssignStmt:
			return one(tr.expr(c.Rhs[0]))
		case *ast.ExprStmt:
			return one(tr.expr(c.X))
		}
	case *ast.ExprStmt:
		if m, ok, err := tr.named(x.X); ok || err != nil {
			return []*mx{m}, err
		}
		if call, ok := x.X.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" && len(call.Args) == 1 {
				a, err := tr.expr(sel.X)
				if err != nil {
					return nil, err
				}
				b, err := tr.expr(call.Args[0])
				return one(mbin("=", a, b), err)
			}
		}
		return one(tr.expr(x.X))
	case *ast.AssignStmt:
		if len(x.Rhs) == 1 && len(x.Lhs) > 1 {
			return one(tr.expr(x.Rhs[0])) // results of a call: the call
		}
		if len(x.Lhs) != 1 || len(x.Rhs) != 1 {
			break
		}
		if lit, ok := x.Rhs[0].(*ast.CompositeLit); ok && isBSON(lit, "D") && dense(tr.f.text(x.Lhs[0])) == "filter" {
			return one(tr.filter(lit))
		}
		if u, ok := x.Rhs[0].(*ast.UnaryExpr); ok && u.Op == token.AND {
			if lit, ok := u.X.(*ast.CompositeLit); ok {
				return tr.structAssign(x.Lhs[0], lit)
			}
		}
		a, err := tr.expr(x.Lhs[0])
		if err != nil {
			return nil, err
		}
		b, err := tr.expr(x.Rhs[0])
		return one(mbin("=", a, b), err)
	case *ast.ReturnStmt:
		if len(x.Results) >= 2 {
			if f, ok := x.Results[0].(*ast.CompositeLit); ok && isBSON(f, "D") {
				cond, err := tr.filter(f)
				if err != nil {
					return nil, err
				}
				out := []*mx{cond}
				if u, ok := x.Results[1].(*ast.CompositeLit); ok && isBSON(u, "D") {
					set, err := tr.update(u)
					if err != nil {
						return nil, err
					}
					out = append(out, set...)
				}
				return out, nil
			}
			if v := modelReturns[tr.ctx]; v != "" && dense(tr.f.text(x.Results[len(x.Results)-1])) == "nil" {
				e, err := tr.expr(x.Results[0])
				return one(mbin("=", mname(v), e), err)
			}
		}
	}
	return nil, fmt.Errorf("%s: no translation of %q: name it in modelVocab", tr.ctx, tr.f.text(s))
}

// structAssign translates x = &T{F: v, ...} into x.F = v for each field.
func (tr *translator) structAssign(lhs ast.Expr, lit *ast.CompositeLit) ([]*mx, error) {
	var out []*mx
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: %q: fields by name wanted", tr.ctx, tr.f.text(lit))
		}
		key := dense(tr.f.text(lhs)) + "." + fmt.Sprint(kv.Key)
		f, ok := tr.vocab[key]
		if !ok {
			return nil, fmt.Errorf("%s: no translation of %s: name it in modelVocab", tr.ctx, key)
		}
		fe, err := parsePmlString(f)
		if err != nil {
			return nil, err
		}
		v, err := tr.expr(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, mbin("=", fe, v))
	}
	return out, nil
}

// caseCond is the condition under which a tagless switch takes clause c:
// its own, and none of the clauses before it; default is the model's else.
func (tr *translator) caseCond(c *ast.CaseClause) (*mx, error) {
	if c.List == nil {
		return mname("else"), nil
	}
	var sw *ast.SwitchStmt
	ast.Inspect(tr.f.decl, func(n ast.Node) bool {
		if s, ok := n.(*ast.SwitchStmt); ok && slices.Contains(s.Body.List, ast.Stmt(c)) {
			sw = s
		}
		return sw == nil
	})
	if sw == nil || sw.Tag != nil || len(c.List) != 1 {
		return nil, fmt.Errorf("%s: %q: only a tagless switch's one-condition cases are translated", tr.ctx, tr.f.text(c))
	}
	cond, err := tr.expr(c.List[0])
	if err != nil {
		return nil, err
	}
	for _, prev := range sw.Body.List {
		if prev == ast.Stmt(c) {
			break
		}
		p, err := tr.expr(prev.(*ast.CaseClause).List[0])
		if err != nil {
			return nil, err
		}
		cond = mbin("&&", cond, mnot(p))
	}
	return cond, nil
}

// ---- the test ----

// TestLeaderModelInStep keeps the model in step with the code: each
// statement the model quotes is in the function it names, in the model's
// order, with the shape of the Promela statements after the quote; each
// statement of those functions is quoted or waived; and the model's
// constants are the code's: renewEvery and defaultMargin a third of the
// TTL, and RTT the longest whole-unit write timeout CheckWriteTimeout
// accepts.
func TestLeaderModelInStep(t *testing.T) {
	raw, err := os.ReadFile(leaderModel)
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	checkModelConstants(t, src)

	funcs := map[string]*goFunc{} // "file func" (the outer function)
	fnOf := func(q modelQuote) *goFunc {
		outer, _, _ := strings.Cut(q.fn, ".")
		key := q.file + " " + outer
		if funcs[key] == nil {
			funcs[key] = loadGoFunc(t, q.file, outer)
		}
		return funcs[key]
	}
	quotes := modelQuotes(src)
	if len(quotes) < 30 {
		t.Fatalf("%d statements quoted in %s, want the term, the guard, the lease store and the save", len(quotes), leaderModel)
	}
	live := pmlLive(src)
	macros := pmlMacros(src)
	pos := map[string]int{} // file fn → index of the statement after the last one found
	type found struct {
		q    modelQuote
		f    *goFunc
		stmt *goStmt
	}
	var all []found
	for _, q := range quotes {
		f := fnOf(q)
		lo, hi := f.decl.Pos(), f.decl.End()
		if _, inner, ok := strings.Cut(q.fn, "."); ok {
			lit := f.closure(inner)
			if lit == nil {
				t.Fatalf("%s %s: no closure assigned to .%s", q.file, q.fn, inner)
			}
			lo, hi = lit.Pos(), lit.End()
		}
		key := q.file + " " + q.fn
		from := pos[key]
		if q.deferred {
			from = 0
		}
		want := dense(q.code)
		var hit *goStmt
		for i := from; i < len(f.stmts); i++ {
			s := f.stmts[i]
			if s.node.Pos() < lo || s.node.End() > hi || s.quoted || (s.head != want && s.full != want) {
				continue
			}
			hit = s
			if !q.deferred {
				pos[key] = i + 1
			}
			break
		}
		if hit == nil {
			t.Errorf("%s %s: %q not found after the model's previous step: the code changed shape, update %s", q.file, q.fn, q.code, leaderModel)
			continue
		}
		hit.quoted = true
		all = append(all, found{q, f, hit})
	}

	// Shapes: consecutive quotes describe the same Promela statements;
	// several quotes of one function there are alternatives (||).
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && strings.TrimSpace(src[all[j-1].q.end:all[j].q.start]) == "" {
			j++
		}
		type group struct {
			key   string
			model []*mx
			where string
		}
		var groups []*group
		for _, fd := range all[i:j] {
			tr := newTranslator(fd.f, fd.q.fn)
			model, err := tr.stmt(fd.stmt.node)
			if err != nil {
				t.Error(err)
				continue
			}
			if fd.q.negated {
				if len(model) != 1 {
					t.Errorf("%s %s: %q (else) is not one condition", fd.q.file, fd.q.fn, fd.q.code)
					continue
				}
				model[0] = mnot(model[0])
			}
			key := fd.q.file + " " + fd.q.fn
			if n := len(groups); n > 0 && groups[n-1].key == key {
				g := groups[n-1]
				if len(g.model) != 1 || len(model) != 1 {
					t.Errorf("%s: %q: alternatives must be single conditions", key, fd.q.code)
					continue
				}
				g.model[0] = mbin("||", g.model[0], model[0])
				g.where += "; " + fd.q.code
				continue
			}
			groups = append(groups, &group{key: key, model: model, where: fd.q.code})
		}
		for _, g := range groups {
			var got, want []string
			for _, m := range g.model {
				want = append(want, show(norm(m)))
			}
			for _, toks := range pmlStatements(live, all[j-1].q.end, len(g.model), macros) {
				e, err := parsePml(toks)
				if err != nil {
					t.Errorf("%s line %d: %v", leaderModel, lineOf(src, all[j-1].q.end), err)
					continue
				}
				got = append(got, show(norm(e)))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s line %d: the model says %q where %s (%s) says %q", leaderModel, lineOf(src, all[j-1].q.end), got, g.key, g.where, want)
			}
		}
		i = j
	}

	// Coverage: every statement of a modelled function is quoted or waived.
	for _, w := range modelWaivers {
		f := funcs[w.file+" "+w.fn]
		if f == nil {
			t.Errorf("waiver of %s %s: the model quotes no statement of that function", w.file, w.fn)
			continue
		}
		for _, stmt := range w.stmts {
			i := slices.IndexFunc(f.stmts, func(s *goStmt) bool {
				return !s.quoted && !s.waived && (s.head == dense(stmt) || s.full == dense(stmt))
			})
			if i < 0 {
				t.Errorf("waiver of %s %s %q matches no statement left: remove it or follow the code", w.file, w.fn, stmt)
				continue
			}
			f.stmts[i].waived = true
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range funcs {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		f := funcs[k]
		for _, s := range f.stmts {
			if !s.quoted && !s.waived {
				t.Errorf("%s (%s:%d): %q is neither quoted by %s nor waived in modelWaivers with a reason",
					k, f.file, f.fset.Position(s.node.Pos()).Line, s.show, leaderModel)
			}
		}
	}
}

func lineOf(src string, off int) int { return strings.Count(src[:off], "\n") + 1 }

// checkModelConstants: the model's EVERY, MARGIN and RTT are the code's.
func checkModelConstants(t *testing.T, src string) {
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (\w+)\s+(\d+)\b`).FindAllStringSubmatch(src, -1) {
		defs[m[1]], _ = strconv.Atoi(m[2])
	}
	unit := time.Second
	ttl := time.Duration(defs["TTL"]) * unit
	if got, want := renewEvery(ttl), time.Duration(defs["EVERY"])*unit; ttl == 0 || got != want {
		t.Errorf("renewEvery(%s) = %s, the model's EVERY %s", ttl, got, want)
	}
	if got, want := defaultMargin(ttl), time.Duration(defs["MARGIN"])*unit; got != want {
		t.Errorf("defaultMargin(%s) = %s, the model's MARGIN %s", ttl, got, want)
	}
	rtt := time.Duration(defs["RTT"]) * unit
	if CheckWriteTimeout(ttl, rtt) != nil || CheckWriteTimeout(ttl, rtt+unit) == nil {
		t.Errorf("the model's RTT %s is not the longest whole-unit write timeout CheckWriteTimeout accepts for a TTL of %s", rtt, ttl)
	}
}

// modelWaivers lists the statements of the modelled functions the model
// does not quote, and why.
var modelWaivers = []modelWaiver{
	// internal/memstore: the store's side of the lease and the save.
	{"internal/memstore/source.go", "Acquire", []string{"s.mu.Lock()", "defer s.mu.Unlock()"}, "one call is one atomic step of the model"},
	{"internal/memstore/source.go", "Renew", []string{"s.mu.Lock()", "defer s.mu.Unlock()"}, "one call is one atomic step of the model"},
	{"internal/memstore/source.go", "Release", []string{"s.mu.Lock()", "defer s.mu.Unlock()"}, "one call is one atomic step of the model"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{"s.mu.Lock()", "defer s.mu.Unlock()"}, "one call is one atomic step of the model"},
	{"internal/memstore/source.go", "Acquire", []string{`if err := s.fail("lease.acquire"); err != nil {`, "return resume.Lease{}, false, err"}, "a fault the test injects: the model's request that is never handled"},
	{"internal/memstore/source.go", "Renew", []string{`if err := s.fail("lease.renew"); err != nil {`, "return resume.Lease{}, false, err"}, "a fault the test injects: the model's request that is never handled"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{`if err := s.fail("checkpoint.save"); err != nil {`, "return err"}, "a fault the test injects: the model's save never delivered"},
	{"internal/memstore/source.go", "Acquire", []string{"now := s.clock()"}, "the server's clock: the model's now (modelVocab)"},
	{"internal/memstore/source.go", "Acquire", []string{"switch {"}, "its cases are quoted"},
	{"internal/memstore/source.go", "Acquire", []string{"s.lease = &resume.Lease{Owner: owner, Epoch: 1, Expires: now.Add(ttl)}"}, "the first lease: epoch 1, which leaseEpoch++ gives from the model's initial 0"},
	{"internal/memstore/source.go", "Acquire", []string{"return *s.lease, false, nil", "return *s.lease, true, nil"}, "the reply: the model's ok and e"},
	{"internal/memstore/source.go", "Renew", []string{"if s.lease == nil {", "return resume.Lease{}, false, nil"}, "no lease is owner 0 in the model, which its guard (leaseOwner == i + 1) refuses too"},
	{"internal/memstore/source.go", "Renew", []string{"return *s.lease, false, nil", "return *s.lease, true, nil"}, "the reply: the model's ok"},
	{"internal/memstore/source.go", "Release", []string{"return nil"}, "Release has no result the model reads"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{"cur := int64(0)", "if s.lease != nil {", "cur = s.lease.Epoch"}, "cur is the lease's epoch, 0 without a lease: the model's leaseEpoch (modelVocab)"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{"s.stats.FencedSaves++", "s.stats.Saves++", "rec := SaveRecord{Epoch: cp.Epoch, Owner: cp.Owner}", "if s.lease != nil {",
		"rec.LeaseOwner, rec.LeaseEpoch = s.lease.Owner, s.lease.Epoch", "s.saves = append(s.saves, rec)"}, "the test store's statistics and record of saves; no write of the protocol"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{"return resume.ErrFenced"}, "the model's else: saveAccepted[k] = false"},
	{"internal/memstore/source.go", "SaveCheckpoint", []string{"c := cp", "c.Token = slices.Clone(cp.Token)", "s.cp = &c", "return nil"}, "the save accepted: the model's cpEpoch = savePending[k]"},

	// mongodb: the builders of the same updates.
	{"mongodb/checkpoint.go", "acquireWrite", []string{`update = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease, Value: leaseDoc(owner, epoch, ttl)}}}}}`, "return filter, update"},
		"the lease {owner, the epoch quoted, $$NOW + ttl}: the model's leaseOwner = i + 1, leaseExpires = now + TTL; TestLeaseAndFencing runs it"},
	{"mongodb/checkpoint.go", "renewWrite", []string{`update = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease, Value: leaseDoc(owner, literal(epoch), ttl)}}}}}`, "return filter, update"},
		"owner and epoch kept, $$NOW + ttl: the model's leaseExpires = now + TTL; TestLeaseAndFencing runs it"},
	{"mongodb/checkpoint.go", "saveCheckpointWrite", []string{`update = bson.D{{Key: "$set", Value: bson.D{{Key: fieldCheckpoint, Value: cp}}}}`}, "the checkpoint replaced: the model's cpEpoch"},
	{"mongodb/checkpoint.go", "saveCheckpointWrite", []string{"if cp.Epoch == 0 {", `return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease, Value: bson.D{{Key: "$exists", Value: false}}}}, update, true`},
		"epoch 0 (no lease in use) never comes from a Leader's term, whose epochs start at 1"},

	// The engine's guarded writes.
	{"watch/engine.go", "saveCheckpoint", []string{"if err != nil {", "return e.fault(ctx, PhaseCheckpointSave, err)"}, "the guard refused: the model's refused, engineLost (ErrLeaseExpiring stands by)"},
	{"watch/engine.go", "saveCheckpoint", []string{"defer cancel()"}, "releases the deadline's timer"},
	{"watch/engine.go", "saveCheckpoint", []string{`return e.fault(ctx, PhaseCheckpointSave, fmt.Errorf("save checkpoint: %w", err))`},
		"ErrFenced (the model's refused save: engineLost) or a save cut off by its deadline (retried at the next unit)"},
	{"watch/engine.go", "saveCheckpoint", []string{"e.Metrics.Checkpoints.Inc()", "e.progress()", "return nil"}, "a metric and the backoff reset; no write"},
	{"watch/guarded.go", "applyGuarded", []string{"apply := func(part *Writes) error {…}"}, "its statements are quoted or waived here"},
	{"watch/guarded.go", "applyGuarded", []string{"if err != nil {", "return onErr(part, err)"}, "the guard refused: the model's refused, engineLost"},
	{"watch/guarded.go", "applyGuarded", []string{"cancel()"}, "releases the deadline's timer once the write returned"},
	{"watch/guarded.go", "applyGuarded", []string{"if err != nil {", `return onErr(part, fmt.Errorf("write derived values: %w", err))`},
		"a write cut off by its deadline or failed: the model's write that does not land, retried at the next unit"},
	{"watch/guarded.go", "applyGuarded", []string{"if applied != nil {", "applied(part, at)", "return nil", "return nil"}, "bookkeeping after a write landed; no write"},
	{"watch/guarded.go", "applyGuarded", []string{"if guard == nil {", "return apply(w)"}, "no guard: no Leader (tests, one-shot tools); a Leader's engine always has one"},
	{"watch/guarded.go", "applyGuarded", []string{"for i := 0; i < len(w.Users); i += guardChunk {", "if err := apply(&Writes{Users: w.Users[i:min(i+guardChunk, len(w.Users))]}); err != nil {", "return err",
		"for i := 0; i < len(w.Entries); i += guardChunk {", "if err := apply(&Writes{Entries: w.Entries[i:min(i+guardChunk, len(w.Entries))]}); err != nil {", "return err"},
		"chunks: each is one guarded write, the model's unit"},

	// Leader.Run.
	{"watch/leader.go", "Run", []string{"l.defaults()", "every := renewEvery(l.TTL)"}, "defaults; EVERY is renewEvery(TTL) (checkModelConstants)"},
	{"watch/leader.go", "Run", []string{"for ctx.Err() == nil {", "return nil"}, "the model's Instance loop, until its bound"},
	{"watch/leader.go", "Run", []string{"l.setUp(ctx, err)", "l.Metrics.LeaseHeld.Set(0)"}, "gauges"},
	{"watch/leader.go", "Run", []string{"switch {", "case err != nil:", "case !ok:"}, "not acquired (an error, or held): the model's !(handled && ok), then the sleep quoted"},
	{"watch/leader.go", "Run", []string{`f := l.fault(ctx, fmt.Errorf("acquire lease: %w", err))`, "switch f.Action {", "case ActStop:", "return nil", "case ActExit:", "return f"},
		"the fault policy beyond a retry (stop, exit) ends the instance: the model retries every failed round trip"},
	{"watch/leader.go", "Run", []string{`l.Log.Warn().Err(f).Msg("lease: acquire failed; campaigning again")`, `l.Log.Debug().Str("holder", lease.Owner).Int64("epoch", lease.Epoch).Msg("lease held by another instance; standing by")`}, "logging"},
	{"watch/leader.go", "Run", []string{"default:", "job := func(ctx context.Context, e *Engine) error {…}", "return e.Run(ctx)", "lost, err := l.term(ctx, lease, sent, every, job)"},
		"acquired: the model's handled && ok branch runs the term inline, its job the Engine"},
	{"watch/leader.go", "Run", []string{"if l.Pending != nil {", "job = withPending(l.Pending, job)"},
		"the pending check beside the job only reads and sets gauges; its error ends the job as the job's own would"},
	{"watch/leader.go", "Run", []string{"if err != nil {", "return err"}, "a term ended by an error ends Run (an exit): abstracted"},
	{"watch/leader.go", "Run", []string{"return nil"}, "the job finished: the model's !lost option breaks"},
	{"watch/leader.go", "Run", []string{"continue"}, "lost: the model's lost option campaigns again"},

	// Leader.term.
	{"watch/leader.go", "term", []string{`l.Log.Info().Int64("epoch", lease.Epoch).Str("owner", l.id).Msg("lease acquired; streaming")`, "l.Metrics.LeaseHeld.Set(1)",
		"l.Metrics.LeaseEpoch.Set(float64(lease.Epoch))", "defer l.Metrics.LeaseHeld.Set(0)", `l.Log.Warn().Err(rerr).Int64("epoch", lease.Epoch).Msg("lease: release failed; a standby takes over when it expires")`,
		`l.Log.Warn().Err(err).Int64("epoch", lease.Epoch).Msg("lease lost; standing by")`, `l.Log.Warn().Str("holder", cur.Owner).Int64("epoch", cur.Epoch).Msg("lease lost; stopping the engine")`,
		`l.Log.Warn().Err(f).Msg("lease: renewal failed; retrying at the next renewal")`, `l.Log.Warn().Dur("since_renewal", l.Now().Sub(renewed)).Msg("lease about to expire unrenewed; stopping the engine")`,
		"l.setUp(ctx, err)"}, "logging and gauges"},
	{"watch/leader.go", "term", []string{"defer func() {…}()", "rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)", "defer rcancel()"},
		"the deferred Release (quoted) under its own bound: the model's Release may not happen"},
	{"watch/leader.go", "term", []string{"engCtx, cancel := context.WithCancel(ctx)", "defer cancel()"}, "engCtx is the model's cancelled[k], set on every way out of the term"},
	{"watch/leader.go", "term", []string{"done := make(chan error, 1)", "done <- job(engCtx, eng)"}, "the job's end: the Engine sets engineDone[k]"},
	{"watch/leader.go", "term", []string{"var renewedAt atomic.Pointer[time.Time]", "renewed := *renewedAt.Load()"}, "the model's renewedAt[k], which its guard reads directly (modelVocab)"},
	{"watch/leader.go", "term", []string{"eng := l.NewEngine(lease.Epoch)", "eng.Config.Owner = l.id"}, "the engine of epoch e (run Engine(i, k, e)); the owner its checkpoints name, fencing is by epoch"},
	{"watch/leader.go", "term", []string{"eng.WriteGuard = func(context.Context) (time.Time, error) {…}"}, "its statements are quoted (term.WriteGuard)"},
	{"watch/leader.go", "term", []string{"defer tick.Stop()", "for {", "select {", "switch {"}, "the model's end_term loop and its options; the cases are quoted"},
	{"watch/leader.go", "term", []string{"if err == nil || ctx.Err() != nil {", "return false, nil"}, "the job finished or shut down: the model's engineDone[k] with engineLost[k] false"},
	{"watch/leader.go", "term", []string{"var f *Fault", "if !errors.As(err, &f) {", "c := Classify(ctx, err)", "f = &Fault{Phase: PhaseLease, Class: c, Action: Decide(c, PhaseLease), Err: err}"},
		"decides a job's error by the fault policy"},
	{"watch/leader.go", "term", []string{"if f.Action == ActStandBy {", "return true, nil"}, "ErrLeaseExpiring or ErrFenced: the model's engineLost[k]"},
	{"watch/leader.go", "term", []string{`return false, fmt.Errorf("lease epoch %d: %w", lease.Epoch, err)`}, "another error of the job ends Run (an exit): abstracted"},
	{"watch/leader.go", "term", []string{"<-done", "return true, nil"}, "a refused renewal: the model's lost branch waits (<-done, quoted) and ends the term"},
	{"watch/leader.go", "term", []string{`f := l.fault(ctx, fmt.Errorf("renew lease: %w", err))`, "switch f.Action {", "case ActStop:", "cancel()", "<-done", "return false, nil",
		"case ActExit:", "cancel()", "<-done", `return false, fmt.Errorf("lease epoch %d: %w", lease.Epoch, f)`},
		"the fault policy beyond a retry (stop, exit) ends the term as a shutdown does: the model retries every failed renewal"},
	{"watch/leader.go", "term", []string{"return true, nil"}, "stopped before expiry: the model's lost branch ends the term"},
}
