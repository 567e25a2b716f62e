package penalty

import (
	"bytes"
	"fmt"
)

// CPython 3.11 tokenizer limits (Parser/tokenizer.h).
const (
	tabSize       = 8   // TABSIZE: a tab advances the column to a multiple of 8
	maxIndent     = 100 // MAXINDENT: size of the indentation stack
	maxParenLevel = 200 // MAXLEVEL: "too many nested parentheses" beyond this
)

// tokKind is the type of a token, as CPython's tokenizer classifies it,
// restricted to what a whitelisted program can contain.
type tokKind uint8

const (
	tEnd     tokKind = iota // ENDMARKER
	tNewline                // NEWLINE (end of a logical line)
	tIndent                 // INDENT
	tDedent                 // DEDENT
	tName                   // the names score and overtime
	tIf                     // the keyword if
	tElse                   // the keyword else
	tNumber                 // NUMBER; its text is buf[start:end]
	tOp                     // OP; token.op says which
	tError                  // the tokenizer failed; tokenizer.err says why
)

// opTok identifies an operator or delimiter token. Every operator CPython
// recognises that can be spelled with the whitelisted characters is here,
// including those the grammar then rejects (->, <>) or that this package
// reports as unsupported (...).
type opTok uint8

const (
	oNone     opTok = iota
	oPlus           // +
	oMinus          // -
	oStar           // *
	oSlash          // /
	oDSlash         // //
	oDStar          // **
	oLShift         // <<
	oRShift         // >>
	oLT             // <
	oGT             // >
	oLE             // <=
	oGE             // >=
	oEQ             // ==
	oNotEq          // <> (NOTEQUAL; a syntax error unless barry_as_FLUFL)
	oAssign         // =
	oDot            // .
	oLParen         // (
	oRParen         // )
	oColon          // :
	oWalrus         // :=
	oArrow          // ->
	oEllipsis       // ...
	oPlusEq         // +=
	oMinusEq        // -=
	oStarEq         // *=
	oSlashEq        // /=
	oDSlashEq       // //=
	oDStarEq        // **=
	oLShiftEq       // <<=
	oRShiftEq       // >>=
)

// token is one token of the stream the parser consumes.
type token struct {
	kind       tokKind
	op         opTok // for tOp
	v          uint8 // for tName: the variable (varScore or varOvertime)
	start, end int32 // the token's bytes in the tokenizer's buffer
	line       int32 // 1-based line of the token start
}

const eof = -1

// tokenizer reproduces CPython 3.11's tokenizer (Parser/tokenizer.c,
// tok_get) on the characters that can survive the whitelist. It is a
// re-implementation of the algorithm, not a translation of its source.
type tokenizer struct {
	buf      []byte // the program after newline translation
	pos      int    // next byte to read
	line     int    // current line, 1-based
	atBOL    bool   // at the beginning of a line
	level    int    // parenthesis nesting level
	indent   int    // top of the indentation stacks
	indstack [maxIndent]int
	altstack [maxIndent]int // columns counting a tab as one space
	toks     []token        // tokens read ahead of the parser
	head     int            // the parser's position in toks
	err      *Error         // the error behind a tError token
}

// translateNewlines mirrors what CPython does to a str source given to
// exec() (translate_newlines): "\r\n" and lone "\r" become "\n", and a
// final "\n" is appended unless the text already ends with one.
func translateNewlines(src string) []byte {
	buf := make([]byte, 0, len(src)+1)
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\r' {
			c = '\n'
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
		}
		buf = append(buf, c)
	}
	if len(buf) == 0 || buf[len(buf)-1] != '\n' {
		buf = append(buf, '\n')
	}
	return buf
}

// newTokenizer prepares to tokenize a whitelisted program. Tokens are
// produced on demand, as CPython's parser pulls them from its tokenizer,
// so that a program that fails early is not tokenized to the end. Every
// failure is a KindSyntax error, as every tokenizer failure is a
// SyntaxError (or its subclass IndentationError/TabError) in CPython.
func newTokenizer(src string) *tokenizer {
	return &tokenizer{buf: translateNewlines(src), line: 1, atBOL: true}
}

// peek returns the token k places ahead of the parser's position.
// After an error it returns tError tokens; after the end, tEnd tokens.
func (t *tokenizer) peek(k int) token {
	for len(t.toks)-t.head <= k {
		if n := len(t.toks); n > 0 && (t.toks[n-1].kind == tEnd || t.toks[n-1].kind == tError) {
			t.toks = append(t.toks, t.toks[n-1])
			continue
		}
		if err := t.get(); err != nil {
			t.err = err
			t.toks = append(t.toks, token{kind: tError, line: int32(t.line)})
		}
	}
	return t.toks[t.head+k]
}

// advance consumes one token, discarding consumed tokens now and then so
// that memory stays proportional to the lookahead.
func (t *tokenizer) advance() {
	t.head++
	if t.head >= 1024 && 2*t.head >= len(t.toks) {
		n := copy(t.toks, t.toks[t.head:])
		t.toks = t.toks[:n]
		t.head = 0
	}
}

// text returns the source text of a token.
func (t *tokenizer) text(tok token) string { return string(t.buf[tok.start:tok.end]) }

func (t *tokenizer) next() int {
	if t.pos >= len(t.buf) {
		t.pos = len(t.buf) + 1 // so that backup(eof) is a no-op
		return eof
	}
	c := t.buf[t.pos]
	t.pos++
	return int(c)
}

func (t *tokenizer) backup(c int) {
	if c != eof {
		t.pos--
	}
}

// lookahead reports whether the next bytes are s, without consuming them.
func (t *tokenizer) lookahead(s string) bool {
	return t.pos <= len(t.buf) && bytes.HasPrefix(t.buf[t.pos:], []byte(s))
}

func (t *tokenizer) errorf(format string, args ...any) *Error {
	return newError(KindSyntax, fmt.Sprintf("line %d: ", t.line)+fmt.Sprintf(format, args...))
}

func (t *tokenizer) emit(k tokKind, op opTok, start int) {
	end := min(t.pos, len(t.buf))
	t.toks = append(t.toks, token{kind: k, op: op, start: int32(min(start, end)), end: int32(end), line: int32(t.line)})
}

// get reads the next token (and any INDENT/DEDENT tokens before it), as
// one call of CPython's tok_get does.
func (t *tokenizer) get() *Error {
	for {
		blank := false
		if t.atBOL {
			t.atBOL = false
			if err := t.indentation(&blank); err != nil {
				return err
			}
		}
		c := t.next()
		for c == ' ' || c == '\t' || c == '\f' {
			c = t.next()
		}
		start := t.pos - 1
		switch {
		case c == eof:
			if t.level > 0 {
				return t.errorf("'(' was never closed")
			}
			t.emit(tEnd, oNone, len(t.buf))
			return nil
		case isLetter(c) || c == '_':
			return t.name(start)
		case c == '\n':
			t.atBOL = true
			if blank || t.level > 0 {
				t.line++
				continue // a blank line, or a line break inside parentheses
			}
			t.emit(tNewline, oNone, start)
			t.line++
			return nil
		case c == '.':
			c2 := t.next()
			if isDigit(c2) {
				return t.number(start, c2, true)
			}
			if c2 == '.' {
				c3 := t.next()
				if c3 == '.' {
					t.emit(tOp, oEllipsis, start)
					return nil
				}
				t.backup(c3)
			}
			t.backup(c2)
			t.emit(tOp, oDot, start)
			return nil
		case isDigit(c):
			return t.number(start, c, false)
		}
		return t.operator(start, c)
	}
}

// indentation measures the indentation of a new line and queues INDENT
// and DEDENT tokens, following CPython's algorithm: a tab advances the
// column to the next multiple of tabSize, a form feed resets it, and the
// same line measured with tabs as single spaces ("altcol") must order the
// same way, otherwise the indentation is ambiguous (TabError). Blank
// lines and lines inside parentheses do not count.
func (t *tokenizer) indentation(blank *bool) *Error {
	col, altcol := 0, 0
	var c int
	for {
		c = t.next()
		if c == ' ' {
			col++
			altcol++
		} else if c == '\t' {
			col = (col/tabSize + 1) * tabSize
			altcol++
		} else if c == '\f' {
			col, altcol = 0, 0
		} else {
			break
		}
	}
	t.backup(c)
	if c == '\n' {
		*blank = true
		return nil
	}
	if t.level > 0 {
		return nil
	}
	switch top := t.indstack[t.indent]; {
	case col == top:
		if altcol != t.altstack[t.indent] {
			return t.errorf("TabError: inconsistent use of tabs and spaces in indentation")
		}
	case col > top:
		if t.indent+1 >= maxIndent {
			return t.errorf("IndentationError: too many levels of indentation")
		}
		if altcol <= t.altstack[t.indent] {
			return t.errorf("TabError: inconsistent use of tabs and spaces in indentation")
		}
		t.indent++
		t.indstack[t.indent] = col
		t.altstack[t.indent] = altcol
		t.emit(tIndent, oNone, t.pos)
	default:
		for t.indent > 0 && col < t.indstack[t.indent] {
			t.indent--
			t.emit(tDedent, oNone, t.pos)
		}
		if col != t.indstack[t.indent] {
			return t.errorf("IndentationError: unindent does not match any outer indentation level")
		}
		if altcol != t.altstack[t.indent] {
			return t.errorf("TabError: inconsistent use of tabs and spaces in indentation")
		}
	}
	return nil
}

// name reads an identifier. After the whitelist the only identifiers are
// score, overtime, if and else.
func (t *tokenizer) name(start int) *Error {
	c := t.next()
	for isIdentChar(c) {
		c = t.next()
	}
	t.backup(c)
	switch word := string(t.buf[start:t.pos]); word {
	case "score":
		t.emit(tName, oNone, start)
		t.toks[len(t.toks)-1].v = varScore
	case "overtime":
		t.emit(tName, oNone, start)
		t.toks[len(t.toks)-1].v = varOvertime
	case "if":
		t.emit(tIf, oNone, start)
	case "else":
		t.emit(tElse, oNone, start)
	default:
		for _, b := range []byte(word) {
			if b >= 0x80 {
				// Non-ASCII whitespace and digits pass the whitelist;
				// CPython rejects them in identifiers.
				return t.errorf("invalid character in identifier %s", quoteShort(word))
			}
		}
		// Unreachable for whitelisted programs; CPython would raise
		// NameError at run time for an unknown name.
		return t.errorf("name %s cannot pass the whitelist", quoteShort(word))
	}
	return nil
}

// number reads a numeric literal the way CPython's tokenizer does. first
// is the first digit; fraction is true when the literal started with a
// '.' (first is then the digit after it). Literals with exponents or the
// imaginary suffix cannot pass the whitelist; the one trace of the
// exponent branch that remains reachable is "1.else": CPython's
// tokenizer enters the exponent branch on the 'e', finds no digits, and
// accepts "1." followed by the keyword else (with only a warning).
func (t *tokenizer) number(start, first int, fraction bool) *Error {
	c := first
	exponent := false
	var err *Error
	switch {
	case fraction:
		// c is the first digit of the fraction.
	case c == '0':
		c = t.next()
		if c == 'x' || c == 'X' || c == 'o' || c == 'O' || c == 'b' || c == 'B' {
			t.backup(c)
			return t.errorf("invalid literal prefix")
		}
		nonzero := false
		for {
			if c == '_' {
				c = t.next()
				if !isDigit(c) {
					t.backup(c)
					return t.errorf("invalid decimal literal")
				}
			}
			if c != '0' {
				break
			}
			c = t.next()
		}
		if isDigit(c) {
			nonzero = true
			if c, err = t.decimalTail(); err != nil {
				return err
			}
		}
		switch {
		case c == '.':
			c = t.next()
			fraction = true
		case c == 'e' || c == 'E':
			exponent = true
		case c == 'j' || c == 'J':
			return t.errorf("imaginary literals cannot pass the whitelist")
		case nonzero:
			t.backup(c)
			return t.errorf("leading zeros in decimal integer literals are not permitted")
		default:
			if err := t.verifyEndOfNumber(c); err != nil {
				return err
			}
			t.backup(c)
			t.emitNumber(start)
			return nil
		}
	default:
		if c, err = t.decimalTail(); err != nil {
			return err
		}
		if c == '.' {
			c = t.next()
			fraction = true
		}
	}
	if fraction && isDigit(c) {
		if c, err = t.decimalTail(); err != nil {
			return err
		}
	}
	if exponent || c == 'e' || c == 'E' {
		e := c
		c = t.next()
		if c == '+' || c == '-' || isDigit(c) {
			t.backup(c)
			return t.errorf("exponents cannot pass the whitelist")
		}
		t.backup(c)
		if err := t.verifyEndOfNumber(e); err != nil {
			return err
		}
		t.backup(e)
		t.emitNumber(start)
		return nil
	}
	if c == 'j' || c == 'J' {
		return t.errorf("imaginary literals cannot pass the whitelist")
	}
	if err := t.verifyEndOfNumber(c); err != nil {
		return err
	}
	t.backup(c)
	t.emitNumber(start)
	return nil
}

// decimalTail consumes the rest of a run of digits in which single
// underscores may separate digits, and returns the first byte after it.
func (t *tokenizer) decimalTail() (int, *Error) {
	for {
		c := t.next()
		for isDigit(c) {
			c = t.next()
		}
		if c != '_' {
			return c, nil
		}
		c = t.next()
		if !isDigit(c) {
			t.backup(c)
			return 0, t.errorf("invalid decimal literal")
		}
	}
}

// verifyEndOfNumber mirrors CPython 3.11's verify_end_of_number: c (just
// read) follows a numeric literal. If c starts one of the keywords that
// may follow a number in valid code (and, else, for, if, in, is, not,
// or) CPython only warns; any other identifier character makes the
// literal invalid. Only the byte after c is examined for "i", and only
// the next letters (not a word boundary) for the others, as CPython does.
func (t *tokenizer) verifyEndOfNumber(c int) *Error {
	ok := false
	switch c {
	case 'a':
		ok = t.lookahead("nd")
	case 'e':
		ok = t.lookahead("lse")
	case 'f':
		ok = t.lookahead("or")
	case 'i':
		ok = t.lookahead("f") || t.lookahead("n") || t.lookahead("s")
	case 'o':
		ok = t.lookahead("r")
	case 'n':
		ok = t.lookahead("ot")
	}
	if !ok && isIdentChar(c) {
		return t.errorf("invalid decimal literal")
	}
	return nil
}

func (t *tokenizer) emitNumber(start int) {
	t.emit(tNumber, oNone, start)
}

// operator reads an operator or delimiter, preferring three-character
// tokens to two-character ones to single characters, and tracks the
// parenthesis level like CPython (at most maxParenLevel open).
func (t *tokenizer) operator(start, c int) *Error {
	c2 := t.next()
	if op := twoCharOp(c, c2); op != oNone {
		c3 := t.next()
		if op3 := threeCharOp(c, c2, c3); op3 != oNone {
			op = op3
		} else {
			t.backup(c3)
		}
		t.emit(tOp, op, start)
		return nil
	}
	t.backup(c2)
	var op opTok
	switch c {
	case '+':
		op = oPlus
	case '-':
		op = oMinus
	case '*':
		op = oStar
	case '/':
		op = oSlash
	case '<':
		op = oLT
	case '>':
		op = oGT
	case '=':
		op = oAssign
	case ':':
		op = oColon
	case '(':
		if t.level >= maxParenLevel {
			return t.errorf("too many nested parentheses")
		}
		t.level++
		op = oLParen
	case ')':
		if t.level == 0 {
			return t.errorf("unmatched ')'")
		}
		t.level--
		op = oRParen
	default:
		// Everything else that passes the whitelist: vertical tab,
		// U+001C..U+001F (non-printable: "invalid non-printable
		// character"), and any non-ASCII whitespace or digit, which
		// CPython reads as the start of an identifier and rejects as an
		// invalid character.
		if c >= 0x80 {
			return t.errorf("invalid character in identifier")
		}
		return t.errorf("invalid non-printable character U+%04X", c)
	}
	t.emit(tOp, op, start)
	return nil
}

// twoCharOp mirrors PyToken_TwoChars for the whitelisted characters.
func twoCharOp(c1, c2 int) opTok {
	switch c1 {
	case '*':
		switch c2 {
		case '*':
			return oDStar
		case '=':
			return oStarEq
		}
	case '/':
		switch c2 {
		case '/':
			return oDSlash
		case '=':
			return oSlashEq
		}
	case '+':
		if c2 == '=' {
			return oPlusEq
		}
	case '-':
		switch c2 {
		case '=':
			return oMinusEq
		case '>':
			return oArrow
		}
	case '<':
		switch c2 {
		case '<':
			return oLShift
		case '=':
			return oLE
		case '>':
			return oNotEq
		}
	case '>':
		switch c2 {
		case '>':
			return oRShift
		case '=':
			return oGE
		}
	case '=':
		if c2 == '=' {
			return oEQ
		}
	case ':':
		if c2 == '=' {
			return oWalrus
		}
	}
	return oNone
}

// threeCharOp mirrors PyToken_ThreeChars for the whitelisted characters
// ("..." is recognised separately, as CPython does).
func threeCharOp(c1, c2, c3 int) opTok {
	if c3 != '=' {
		return oNone
	}
	switch {
	case c1 == '*' && c2 == '*':
		return oDStarEq
	case c1 == '/' && c2 == '/':
		return oDSlashEq
	case c1 == '<' && c2 == '<':
		return oLShiftEq
	case c1 == '>' && c2 == '>':
		return oRShiftEq
	}
	return oNone
}

func isDigit(c int) bool  { return c >= '0' && c <= '9' }
func isLetter(c int) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isIdentChar mirrors is_potential_identifier_char: ASCII letters, digits,
// underscore, and every non-ASCII byte.
func isIdentChar(c int) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c >= 0x80
}
