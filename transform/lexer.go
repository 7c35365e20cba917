package transform

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tNewline
	tIdent
	tString
	tInt
	tFloat
	tLParen
	tRParen
	tLBrack
	tRBrack
	tComma
	tEq
)

var tokNames = [...]string{"end of input", "end of line", "name", "string", "integer", "number", "\"(\"", "\")\"", "\"[\"", "\"]\"", "\",\"", "\"=\""}

func (k tokKind) String() string { return tokNames[k] }

type token struct {
	kind tokKind
	pos  Pos
	text string // identifier, or the decoded string literal
	i    int64
	f    float64
}

func (t token) describe() string {
	switch t.kind {
	case tIdent:
		return fmt.Sprintf("name %q", truncName(t.text))
	case tString:
		return fmt.Sprintf("string %q", truncName(t.text))
	case tInt:
		return fmt.Sprintf("integer %d", t.i)
	case tFloat:
		return fmt.Sprintf("number %s", formatFloat(t.f))
	}
	return t.kind.String()
}

// lexer turns DSL text into tokens. Newlines end statements except inside
// parentheses and brackets, so a long call may span lines.
type lexer struct {
	src       []byte
	off       int
	line, col int
	depth     int
	lim       Limits
}

func (lx *lexer) errf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Node: -1, Msg: fmt.Sprintf(format, args...)}
}

func (lx *lexer) advance(n int) {
	for i := 0; i < n; i++ {
		if lx.src[lx.off] == '\n' {
			lx.line++
			lx.col = 1
		} else {
			lx.col++
		}
		lx.off++
	}
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

func (lx *lexer) next() (token, error) {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			lx.advance(1)
		case c == '#':
			for lx.off < len(lx.src) && lx.src[lx.off] != '\n' {
				lx.advance(1)
			}
		case c == '\n':
			p := Pos{lx.line, lx.col}
			lx.advance(1)
			if lx.depth == 0 {
				return token{kind: tNewline, pos: p}, nil
			}
		default:
			return lx.lexToken()
		}
	}
	return token{kind: tEOF, pos: Pos{lx.line, lx.col}}, nil
}

// singleTok maps the one-byte punctuation tokens; tEOF means "not one".
var singleTok = [256]tokKind{'(': tLParen, ')': tRParen, '[': tLBrack, ']': tRBrack, ',': tComma, '=': tEq}

func (lx *lexer) lexToken() (token, error) {
	p := Pos{lx.line, lx.col}
	c := lx.src[lx.off]
	if k := singleTok[c]; k != tEOF {
		switch k {
		case tLParen, tLBrack:
			lx.depth++
		case tRParen, tRBrack:
			if lx.depth > 0 {
				lx.depth--
			}
		}
		lx.advance(1)
		return token{kind: k, pos: p}, nil
	}
	switch {
	case isIdentByte(c, true):
		end := lx.off
		for end < len(lx.src) && isIdentByte(lx.src[end], false) {
			end++
		}
		text := string(lx.src[lx.off:end])
		if len(text) > lx.lim.MaxNameLen {
			return token{}, lx.errf(p, "name is %d bytes, more than the limit of %d", len(text), lx.lim.MaxNameLen)
		}
		lx.advance(end - lx.off)
		return token{kind: tIdent, pos: p, text: text}, nil
	case c == '"':
		end := lx.off + 1
		for {
			if end >= len(lx.src) || lx.src[end] == '\n' {
				return token{}, lx.errf(p, "string literal not terminated")
			}
			if lx.src[end] == '\\' {
				if end+1 < len(lx.src) && lx.src[end+1] == '\n' {
					return token{}, lx.errf(p, "string literal not terminated")
				}
				end += 2
				continue
			}
			if lx.src[end] == '"' {
				end++
				break
			}
			end++
		}
		raw := string(lx.src[lx.off:end])
		if !utf8.ValidString(raw) {
			// strconv.Unquote would silently turn each invalid byte into
			// U+FFFD; the DSL rejects them instead.
			return token{}, lx.errf(p, "string literal is not valid UTF-8")
		}
		s, err := strconv.Unquote(raw)
		if err != nil {
			return token{}, lx.errf(p, "invalid string literal %s", truncName(raw))
		}
		if !utf8.ValidString(s) {
			return token{}, lx.errf(p, "string literal is not valid UTF-8")
		}
		if len(s) > lx.lim.MaxStringLen {
			return token{}, lx.errf(p, "string literal is %d bytes, more than the limit of %d", len(s), lx.lim.MaxStringLen)
		}
		lx.advance(end - lx.off)
		return token{kind: tString, pos: p, text: s}, nil
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		end := lx.off
		if c == '-' || c == '+' {
			end++
		}
		isFloat := false
		for end < len(lx.src) {
			d := lx.src[end]
			if d >= '0' && d <= '9' {
				end++
			} else if d == '.' || d == 'e' || d == 'E' {
				isFloat = true
				end++
				if (d == 'e' || d == 'E') && end < len(lx.src) && (lx.src[end] == '-' || lx.src[end] == '+') {
					end++
				}
			} else {
				break
			}
		}
		text := string(lx.src[lx.off:end])
		if len(text) > 64 {
			return token{}, lx.errf(p, "number literal too long")
		}
		tok := token{pos: p}
		if isFloat {
			f, err := strconv.ParseFloat(text, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				if errors.Is(err, strconv.ErrRange) {
					return token{}, lx.errf(p, "number %s is out of the float64 range", text)
				}
				return token{}, lx.errf(p, "invalid number %q", text)
			}
			tok.kind, tok.f = tFloat, f
		} else {
			i, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				if errors.Is(err, strconv.ErrRange) {
					return token{}, lx.errf(p, "integer %s is out of the int64 range", text)
				}
				return token{}, lx.errf(p, "invalid integer %q", text)
			}
			tok.kind, tok.i = tInt, i
		}
		lx.advance(end - lx.off)
		return tok, nil
	}
	r, _ := utf8.DecodeRune(lx.src[lx.off:])
	return token{}, lx.errf(p, "unexpected character %q", r)
}
