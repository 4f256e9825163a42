package config

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// checkNesting scans src, before the parser sees it, for nesting deeper
// than MaxNesting and for number literals out of range (see limits.go). It
// follows hcl's lexer through quoted strings, heredocs, comments and the
// interpolations and directives inside templates, in one linear pass
// without allocating.
func checkNesting(src []byte, filename string) *hcl.Diagnostic {
	return scanNesting(src, filename, nil)
}

// nestFrame is one open bracket or template sequence of scanNesting.
type nestFrame struct {
	kind byte // '(', '[', '{' or '$' (a "${" interpolation or "%{" directive)
	// ops counts the operators, and the bracket groups closed, in the
	// frame's current element (a list item, an attribute, ...): hcl nests
	// its syntax tree, and recurses, once for each.
	ops int
	// lines: newlines end the frame's elements (a block body or an object
	// constructor; not a for expression in braces).
	lines bool
	// For '$': the lexer's brace count when it opened, and the template it
	// returns to (heredoc is the heredoc's marker; nil for a quoted string).
	braces  int
	heredoc []byte
	// items counts the elements of a list, object, block body or call;
	// seen: the current one has begun.
	items int
	seen  bool
}

// Scanner modes, as hcl's lexer has them.
const (
	scanMain    = iota // expressions and bodies
	scanQuoted         // a quoted template string
	scanHeredoc        // a heredoc template
)

// nestEvent reports, for tests, the bracket and template tokens the scan
// sees (kind as in hclsyntax: "(", ")", "${", "%{", "}$", "\"", "<<", ">>"
// ...) at their byte offsets.
type nestEvent func(kind string, offset int)

// scanNesting is checkNesting; ev, when set, receives every bracket and
// template token (for the tests that compare the scan with hcl's lexer).
func scanNesting(src []byte, filename string, ev nestEvent) *hcl.Diagnostic {
	var frames [MaxNesting + 1]nestFrame
	n := 0 // open frames
	// depth is what the parser and evaluator recurse through: open frames,
	// plus the ops of every open frame's current element, plus the ops at
	// the top level, plus the if and for directives open in templates.
	depth, topOps, directives := 0, 0, 0
	braces := 0        // hcl's lexer's count of open braces
	mode := scanMain   // what the scan is in
	var heredoc []byte // the marker of the heredoc being scanned
	startOfLine := false
	var ends commentEnds
	line, lineStart := 1, 0
	emit := func(kind string, at int) {
		if ev != nil {
			ev(kind, at)
		}
	}
	tooDeep := func(at int) *hcl.Diagnostic {
		return scanDiag(filename, src, line, lineStart, at, "Nesting too deep",
			fmt.Sprintf("Brackets, string interpolations, template directives and operators nest more than %d levels deep here; simplify the expression.", MaxNesting))
	}
	// op counts one operator (or closed group) in the current element.
	op := func() {
		depth++
		if n > 0 {
			frames[n-1].ops++
			frames[n-1].seen = true
		} else {
			topOps++
		}
	}
	// item ends an element of the innermost frame, if one has begun.
	item := func(at int) *hcl.Diagnostic {
		if n == 0 || !frames[n-1].seen {
			return nil
		}
		f := &frames[n-1]
		f.items, f.seen = f.items+1, false
		if f.items >= MaxCollectionElements {
			return scanDiag(filename, src, line, lineStart, at, "Too many elements",
				fmt.Sprintf("A list, object, block or argument list may hold at most %d elements.", MaxCollectionElements))
		}
		return nil
	}
	// endElement ends the current element of the innermost frame.
	endElement := func() {
		if n > 0 {
			depth -= frames[n-1].ops
			frames[n-1].ops = 0
		} else {
			depth -= topOps
			topOps = 0
		}
	}
	newline := func(at int) *hcl.Diagnostic {
		if n == 0 || frames[n-1].lines {
			endElement()
			return item(at)
		}
		return nil
	}
	push := func(f nestFrame, at int) bool {
		if n == len(frames) {
			return false
		}
		frames[n] = f
		n++
		depth++
		return depth <= MaxNesting
	}
	// pop closes the innermost frame: its element's ops go, and the group
	// it closed counts as one op of the enclosing element (x[0][1][2]).
	pop := func(group bool) {
		n--
		depth -= 1 + frames[n].ops
		if group {
			op()
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		if c == '\n' {
			line, lineStart = line+1, i+1
		}
		switch mode {
		case scanQuoted, scanHeredoc:
			if mode == scanHeredoc && startOfLine {
				if nl := bytes.IndexByte(src[i:], '\n'); nl >= 0 && bytes.IndexByte(bytes.TrimSuffix(src[i:i+nl], []byte("\r")), '\r') < 0 &&
					bytes.Equal(bytes.TrimSpace(src[i:i+nl+1]), heredoc) {
					// The closing marker; its newline ends the heredoc's
					// attribute as a newline does.
					emit(">>", i)
					mode, heredoc = scanMain, nil
					i += nl
					if nl > 0 && src[i-1] == '\r' {
						i--
					}
					continue
				}
				startOfLine = false
			}
			switch {
			case c == '"' && mode == scanQuoted:
				emit("\"", i)
				mode = scanMain
				i++
			case c == '\\' && mode == scanQuoted:
				// An escape: the next character is literal (a newline
				// is not escaped).
				i++
				if i < len(src) && src[i] != '\n' && src[i] != '\r' {
					i++
				}
			case (c == '$' || c == '%') && i+1 < len(src) && src[i+1] == '{':
				kind := string(c) + "{"
				emit(kind, i)
				braces++
				if !push(nestFrame{kind: '$', braces: braces, heredoc: heredoc}, i) {
					return tooDeep(i)
				}
				j := i + 2
				if c == '%' {
					for j < len(src) && (src[j] == '~' || src[j] == ' ' || src[j] == '\t') {
						j++
					}
					switch word := identAt(src, j); word {
					case "if", "for":
						directives++
						depth++
						if depth > MaxNesting {
							return tooDeep(i)
						}
					case "endif", "endfor":
						if directives > 0 {
							directives--
							depth--
						}
					}
				}
				mode, heredoc = scanMain, nil
				i += 2
				if i < len(src) && src[i] == '~' {
					i++ // "${~" is one token
				}
			case (c == '$' || c == '%') && i+2 < len(src) && src[i+1] == c && src[i+2] == '{':
				i += 3 // "$${" and "%%{" are literal
			case c == '\n':
				startOfLine = mode == scanHeredoc
				i++
			case c == '\r' && mode == scanHeredoc && (i+1 == len(src) || src[i+1] != '\n'):
				// hcl's lexer gives up here: the rest of the file is one
				// invalid token, which the parser rejects.
				return nil
			case c >= utf8.RuneSelf:
				r, size := utf8.DecodeRune(src[i:])
				if r == utf8.RuneError && size == 1 {
					return badEncoding(filename, src, line, lineStart, i)
				}
				i += size
			default:
				i++
			}
			continue
		}
		if n > 0 && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ',' && c != '#' && !(c == '/' && i+1 < len(src) && (src[i+1] == '/' || src[i+1] == '*')) {
			frames[n-1].seen = true
		}
		switch {
		case c == '\n':
			if d := newline(i); d != nil {
				return d
			}
			i++
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			// A line comment; ending with its newline, it is one.
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				i = len(src)
				continue
			}
			i += j
		case c == '/' && i+1 < len(src) && src[i+1] == '*' && ends.find(src, i+2) >= 0:
			// (Unterminated, hcl's lexer reads "/" and "*" as operators
			// and goes on; so does the scan.)
			end := ends.find(src, i+2) + 2
			for k := i; k < end; k++ {
				if src[k] == '\n' {
					line, lineStart = line+1, k+1
				}
			}
			i = end
		case c == '"':
			emit("\"", i)
			mode = scanQuoted
			i++
		case c == '<' && i+1 < len(src) && src[i+1] == '<':
			marker, next, ok, bad := heredocIntro(src, i)
			if bad {
				return scanDiag(filename, src, line, lineStart, i, "Unsupported heredoc marker",
					"A heredoc's marker must be made of ASCII letters, digits, underscores and dashes, like <<EOT.")
			}
			if !ok {
				op()
				if depth > MaxNesting {
					return tooDeep(i)
				}
				i++
				continue
			}
			emit("<<", i)
			mode, heredoc, startOfLine = scanHeredoc, marker, true
			i = next
			line, lineStart = line+1, next
		case c == '{':
			braces++
			emit("{", i)
			if !push(nestFrame{kind: '{', lines: !forAt(src, i+1, &ends)}, i) {
				return tooDeep(i)
			}
			i++
		case c == '}' || c == '~' && i+1 < len(src) && src[i+1] == '}':
			// As hcl's lexer: a brace closes the innermost template
			// sequence when the braces opened since are closed.
			at := i
			if c == '~' {
				i++
			}
			i++
			t := n - 1
			for t >= 0 && frames[t].kind != '$' {
				t--
			}
			if t >= 0 && frames[t].braces == braces {
				emit("}$", at)
				braces--
				heredoc = frames[t].heredoc
				for n > t {
					pop(false)
				}
				mode, startOfLine = scanQuoted, false
				if heredoc != nil {
					mode = scanHeredoc
				}
				continue
			}
			braces--
			if c == '~' {
				emit("}$", at)
				continue
			}
			emit("}", at)
			if n > 0 && frames[n-1].kind == '{' {
				pop(true)
			}
		case c == '(' || c == '[':
			emit(string(c), i)
			if !push(nestFrame{kind: c}, i) {
				return tooDeep(i)
			}
			i++
		case c == ')' || c == ']':
			emit(string(c), i)
			open := byte('(')
			if c == ']' {
				open = '['
			}
			if n > 0 && frames[n-1].kind == open {
				pop(true)
			}
			i++
		case c == ',':
			endElement()
			if d := item(i); d != nil {
				return d
			}
			i++
		case strings.IndexByte("+-*/%=<>!&|?:^", c) >= 0:
			op()
			if depth > MaxNesting {
				return tooDeep(i)
			}
			i++
		case c >= '0' && c <= '9':
			j, d := numberLiteral(src, i, filename, line, lineStart)
			if d != nil {
				return d
			}
			i = j
		case c >= utf8.RuneSelf && !utf8.FullRune(src[i:]) || c >= utf8.RuneSelf && func() bool { r, size := utf8.DecodeRune(src[i:]); return r == utf8.RuneError && size == 1 }():
			// hcl reads what follows a broken UTF-8 sequence in its own
			// way (not as the scan would); it accepts one only in a
			// comment.
			return badEncoding(filename, src, line, lineStart, i)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf:
			// An identifier (or a character hcl rejects). Its dashes
			// count as operators: the scan need not know which are.
			i = skipIdent(src, i, op)
			if depth > MaxNesting {
				return tooDeep(i - 1)
			}
		default:
			i++
		}
	}
	return nil
}

// scanDiag is a diagnostic of scanNesting at byte offset at.
func scanDiag(filename string, src []byte, line, lineStart, at int, summary, detail string) *hcl.Diagnostic {
	col := 1
	if at >= lineStart {
		col = utf8.RuneCount(src[lineStart:at]) + 1
	}
	pos := hcl.Pos{Line: line, Column: col, Byte: at}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail,
		Subject: &hcl.Range{Filename: filename, Start: pos, End: hcl.Pos{Line: line, Column: col + 1, Byte: at + 1}}}
}

// commentEnds finds where block comments end: the first "*/" at or after
// an offset. It remembers the last answer, so that the searches of a scan
// cover the source once.
type commentEnds struct {
	from, at int // the first "*/" at or after from is at at (-1: none)
	ok       bool
}

func (c *commentEnds) find(src []byte, from int) int {
	if c.ok && from >= c.from && (c.at < 0 || from <= c.at) {
		return c.at
	}
	c.from, c.ok = from, true
	if j := bytes.Index(src[from:], []byte("*/")); j >= 0 {
		c.at = from + j
	} else {
		c.at = -1
	}
	return c.at
}

// badEncoding is hcl's diagnostic for a byte that is not UTF-8, which it
// accepts only in comments.
func badEncoding(filename string, src []byte, line, lineStart, at int) *hcl.Diagnostic {
	return scanDiag(filename, src, line, lineStart, at, "Invalid character encoding",
		"All input files must be UTF-8 encoded. Ensure that UTF-8 encoding is selected in your editor.")
}

// identAt returns the ASCII identifier at src[i:] ("" if none).
func identAt(src []byte, i int) string {
	j := i
	for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || j > i && (src[j] >= '0' && src[j] <= '9' || src[j] == '-')) {
		j++
	}
	return string(src[i:j])
}

// forAt reports whether the braces opening before src[i:] hold a for
// expression: its first token (past spaces, newlines and comments) is
// the keyword for. hcl reads such braces without regard to newlines.
func forAt(src []byte, i int, ends *commentEnds) bool {
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				return false
			}
			i += j + 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := ends.find(src, i+2)
			if j < 0 {
				return false
			}
			i = j + 2
		default:
			if !bytes.HasPrefix(src[i:], []byte("for")) {
				return false
			}
			if i+3 == len(src) {
				return true
			}
			r, _ := utf8.DecodeRune(src[i+3:])
			return !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r))
		}
	}
	return false
}

// heredocIntro reads a heredoc introducer (<<EOT or <<-EOT and a newline)
// at src[i:]: its marker and where its body starts. bad: it may be one
// with a marker that is not ASCII, which the scan does not follow.
func heredocIntro(src []byte, i int) (marker []byte, body int, ok, bad bool) {
	j := i + 2
	if j < len(src) && src[j] == '-' {
		j++
	}
	start := j
	nonASCII := false
	for j < len(src) && (src[j] == '_' || src[j] == '-' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9' || src[j] >= utf8.RuneSelf) {
		nonASCII = nonASCII || src[j] >= utf8.RuneSelf
		j++
	}
	marker = src[start:j]
	if j < len(src) && src[j] == '\r' {
		j++
	}
	if len(marker) == 0 || j >= len(src) || src[j] != '\n' {
		return nil, 0, false, false
	}
	if nonASCII {
		return nil, 0, false, true
	}
	if c := marker[0]; c != '_' && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return nil, 0, false, false
	}
	return marker, j + 1, true, false
}

// skipIdent skips the identifier (or stray character) at src[i:], calling
// op for each dash, and returns where it ends.
func skipIdent(src []byte, i int, op func()) int {
	for first := true; i < len(src); first = false {
		c := src[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9':
			i++
		case c == '-' && !first:
			op()
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(src[i:])
			if !(unicode.IsLetter(r) || !first && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r))) {
				if first {
					return i + size // a character hcl does not accept
				}
				return i
			}
			i += size
		default:
			if first {
				return i + 1
			}
			return i
		}
	}
	return i
}

// numberLiteral reads the number literal at src[i:] as hcl's lexer does
// and returns where it ends, or a diagnostic when it has more digits or a
// larger exponent than MaxNumberDigits.
func numberLiteral(src []byte, i int, filename string, line, lineStart int) (int, *hcl.Diagnostic) {
	start, digits := i, 0
	isDigit := func(k int) bool { return k < len(src) && src[k] >= '0' && src[k] <= '9' }
	for i < len(src) {
		switch c := src[i]; {
		case isDigit(i):
			digits++
			i++
		case c == '.' && (isDigit(i+1) || i+1 < len(src) && (src[i+1] == 'e' || src[i+1] == 'E')):
			i++
		case c == 'e' || c == 'E':
			k := i + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if !isDigit(k) {
				return i, nil
			}
			for k < len(src) && src[k] == '0' {
				k++
			}
			exp := 0
			for ; isDigit(k); k++ {
				if exp <= MaxNumberDigits {
					exp = exp*10 + int(src[k]-'0')
				}
			}
			if exp > MaxNumberDigits {
				return k, scanDiag(filename, src, line, lineStart, start, "Number too large",
					fmt.Sprintf("This number's exponent is beyond ±%d; numbers must be smaller than 1e%d (and, unless zero, larger than 1e-%d).", MaxNumberDigits, MaxNumberDigits, MaxNumberDigits))
			}
			i = k
		default:
			return i, nil
		}
		if digits > MaxNumberDigits {
			return i, scanDiag(filename, src, line, lineStart, start, "Number too large",
				fmt.Sprintf("This number has more than %d digits; numbers must be smaller than 1e%d.", MaxNumberDigits, MaxNumberDigits))
		}
	}
	return i, nil
}
