package penalty

// The variables of a penalty program: Back-End runs it with the globals
// {"score": delta, "overtime": days}.
const (
	varScore    = 0
	varOvertime = 1
)

// opcode is the kind of an AST node.
type opcode uint8

const (
	// Expressions.
	opConst    opcode = iota // consts[a]
	opName                   // variable sub
	opUnary                  // unary operator sub applied to a
	opBinary                 // binary operator sub applied to a and b
	opCompare                // a, then lists[lo:hi] as (cmpOp, operand) pairs
	opCondExpr               // a if b else c
	opCall                   // a(b), b < 0 for no argument; sub: argument form
	opAttr                   // a.name (always AttributeError)
	opWalrus                 // (variable sub := a)
	opEllipsis               // ... (never evaluated: KindUnsupported)

	// Statements.
	opBlock     // lists[lo:hi] are statements
	opExprStmt  // evaluate a
	opAssign    // evaluate a, store into the targets lists[lo:hi] in order
	opAugAssign // target a (op sub)= b
	opIf        // if a: block b else: block c (c < 0 if absent)

	// Assignment targets.
	opStoreName  // variable sub
	opStoreAttr  // a.name = ... (evaluate a, then AttributeError)
	opStoreTuple // () = ... (unpacking into no names)
)

// Unary operators.
const (
	unaryNeg = iota // -x
	unaryPos        // +x
)

// binOp is a binary (or augmented assignment) operator.
type binOp uint8

const (
	bAdd      binOp = iota // +
	bSub                   // -
	bMul                   // *
	bTrueDiv               // /
	bFloorDiv              // //
	bPow                   // **
	bLShift                // <<
	bRShift                // >>
)

var binOpNames = [...]string{"+", "-", "*", "/", "//", "**", "<<", ">>"}

func (op binOp) String() string { return binOpNames[op] }

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	cEQ cmpOp = iota // ==
	cLT              // <
	cGT              // >
	cLE              // <=
	cGE              // >=
)

var cmpOpNames = [...]string{"==", "<", ">", "<=", ">="}

func (op cmpOp) String() string { return cmpOpNames[op] }

// Call argument forms. A whitelisted call has at most one argument,
// since the comma is not whitelisted.
const (
	argNone       = iota // f()
	argPositional        // f(x) or f(name := x)
	argStar              // f(*x)
	argDoubleStar        // f(**x)
	argKeyword           // f(name=x)
)

// node is one AST node. Children are indices into Program.nodes; lists of
// children live in Program.lists.
type node struct {
	op      opcode
	sub     uint8
	a, b, c int32
	lo, hi  int32
}

// Program is a compiled penalty program: its syntax tree, as a slice of
// nodes in which every node follows its children. It is immutable after
// Compile returns, so one Program may be evaluated by many goroutines at
// once. The zero Program, like a nil *Program, is the empty program.
type Program struct {
	nodes  []node
	lists  []int32
	consts []value
	root   int32 // an opBlock
}
