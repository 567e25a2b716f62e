package penalty

import (
	"sort"
	"strconv"
	"unicode/utf8"
)

// maxStrDigits is CPython 3.11's default sys.get_int_max_str_digits():
// int() refuses decimal strings with more digits than this (underscores
// are not counted, leading zeros are). Back-End's whitelist calls int()
// on every piece, so such a piece makes the program illegal.
const maxStrDigits = 4300

// checkWhitelist mirrors Back-End's check_penalty on the raw program text:
//
//	allowed_chars = ["+", "-", "*", "/", "=", ".", "(", ")", ":", ">", "<"]
//	allowed_words = ["score", "overtime", "if", "else"]
//
// every allowed character is replaced by a space, the result is split on
// whitespace as Python's str.split() does (all Unicode whitespace of
// CPython 3.11, not only ASCII), and every piece must be an allowed word
// or a string Python's int() accepts.
//
// Python strings are sequences of code points; a Go string that is not
// valid UTF-8 cannot come from Back-End (BSON strings are UTF-8), and is
// reported as illegal.
func checkWhitelist(src string) *Error {
	if !utf8.ValidString(src) {
		return newError(KindIllegal, "program is not valid UTF-8")
	}
	start := -1
	for i, r := range src {
		if isAllowedChar(r) || isPyWhitespace(r) {
			if start >= 0 {
				if err := checkPiece(src[start:i]); err != nil {
					return err
				}
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		return checkPiece(src[start:])
	}
	return nil
}

func isAllowedChar(r rune) bool {
	switch r {
	case '+', '-', '*', '/', '=', '.', '(', ')', ':', '>', '<':
		return true
	}
	return false
}

// checkPiece accepts one whitespace-free piece of the program if it is an
// allowed word or if CPython's int(piece) would succeed.
func checkPiece(p string) *Error {
	switch p {
	case "score", "overtime", "if", "else":
		return nil
	}
	if !pyIntString(p) {
		return newError(KindIllegal, "token "+quoteShort(p)+" is not allowed")
	}
	return nil
}

// pyIntString reports whether CPython 3.11's int(s) accepts s, for an s
// that contains no whitespace and no sign (the whitelist guarantees both).
// int() first maps every Unicode decimal digit (category Nd, Unicode
// 14.0.0) to its ASCII digit, then requires digits separated by single
// underscores, with no leading or trailing underscore, and at most
// maxStrDigits digits. Leading zeros are fine for int().
func pyIntString(s string) bool {
	digits := 0
	prevUnderscore := true // forbids a leading underscore
	for _, r := range s {
		switch {
		case r == '_':
			if prevUnderscore {
				return false
			}
			prevUnderscore = true
		case isPyDecimal(r):
			digits++
			prevUnderscore = false
		default:
			return false
		}
	}
	return digits > 0 && !prevUnderscore && digits <= maxStrDigits
}

// isPyWhitespace reports whether CPython 3.11's str.isspace() is true for
// r; these are exactly the separators of str.split() without arguments.
// This set differs from unicode.IsSpace: it includes U+001C..U+001F.
func isPyWhitespace(r rune) bool {
	switch {
	case r == ' ', r >= '\t' && r <= '\r', r >= 0x1C && r <= 0x1F:
		return true
	case r < 0x80:
		return false
	case r == 0x85, r == 0xA0, r == 0x1680, r >= 0x2000 && r <= 0x200A,
		r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// isPyDecimal reports whether r is a decimal digit for CPython 3.11's
// int(): a character with a Unicode decimal value (Unicode 14.0.0).
// Go's unicode.Nd follows a newer Unicode version and accepts more.
func isPyDecimal(r rune) bool {
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	i := sort.Search(len(pyDecimalZeros), func(i int) bool { return pyDecimalZeros[i] > r }) - 1
	return i >= 0 && r-pyDecimalZeros[i] < 10
}

// pyDecimalZeros lists the code point of the digit zero of every run of
// ten decimal digits known to CPython 3.11 (Unicode 14.0.0), generated
// with: [c for c in range(0x110000) if int(chr(c)) == 0] (catching the
// ValueError of non-digits). It is never modified.
var pyDecimalZeros = [...]rune{
	0x0030, 0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66,
	0x0BE6, 0x0C66, 0x0CE6, 0x0D66, 0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040,
	0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0,
	0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
	0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0,
	0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50,
	0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2,
	0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
}

// quoteShort quotes s for an error message, eliding the middle of long
// pieces so that a hostile program cannot make error messages huge.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		cut := max / 2
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		end := len(s) - max/2
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		s = s[:cut] + "..." + s[end:]
	}
	return strconv.Quote(s)
}
