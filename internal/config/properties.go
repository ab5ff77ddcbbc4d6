package config

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ReadProperties parses a Java .properties document (the format of Kafka's
// server.properties) into a map. Rules, as in java.util.Properties.load:
//
//   - Natural lines end at "\n", "\r" or "\r\n". Leading blanks (space, tab,
//     form feed) of every natural line are skipped; blank lines are ignored.
//   - A line whose first non-blank character is '#' or '!' is a comment.
//     Comments never continue onto the next line.
//   - A line ending in an odd number of backslashes continues on the next
//     natural line; the backslash and the next line's leading blanks are
//     removed.
//   - The key ends at the first unescaped '=', ':' or blank. Blanks around the
//     separator are skipped, and a blank separator may be followed by one
//     '=' or ':'. The value is the rest of the logical line; like Java, its
//     trailing blanks are kept (Parse trims values, as Kafka's ConfigDef does).
//   - In keys and values, \t \n \r \f are control characters, \uXXXX is a
//     UTF-16 code unit (surrogate pairs combine), and a backslash before any
//     other character stands for that character ("\=" is "=", "\\" is "\").
//   - A key given twice keeps its last value.
//
// Deviation: the input is read as UTF-8, where Java's InputStream variant
// (which Kafka uses) reads ISO-8859-1. ASCII files read the same either way.
func ReadProperties(r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("config: reading properties: %w", err)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("config: properties are not valid UTF-8")
	}
	lines := naturalLines(string(data))
	props := make(map[string]string)
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		piece := trimLeftBlanks(lines[i])
		if piece == "" || piece[0] == '#' || piece[0] == '!' {
			continue
		}
		var logical strings.Builder
		for {
			cont := oddTrailingBackslashes(piece)
			if cont {
				piece = piece[:len(piece)-1]
			}
			logical.WriteString(piece)
			if !cont || i+1 >= len(lines) {
				break
			}
			i++
			piece = trimLeftBlanks(lines[i])
		}
		key, value, err := splitKeyValue(logical.String())
		if err != nil {
			return nil, fmt.Errorf("config: properties line %d: %w", lineNo, err)
		}
		props[key] = value
	}
	return props, nil
}

// naturalLines splits s at "\n", "\r" and "\r\n".
func naturalLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			lines = append(lines, s[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftBlanks(s string) string {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return s[i:]
}

func oddTrailingBackslashes(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits one logical line (leading blanks already removed) into
// its unescaped key and value.
func splitKeyValue(line string) (string, string, error) {
	keyEnd, valueStart := len(line), len(line)
	hasSep := false
	escaped := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !escaped && (c == '=' || c == ':') {
			keyEnd, valueStart, hasSep = i, i+1, true
			break
		}
		if !escaped && isBlank(c) {
			keyEnd, valueStart = i, i+1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	key, err := unescape(line[:keyEnd])
	if err != nil {
		return "", "", err
	}
	value, err := unescape(line[valueStart:])
	if err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescape applies the .properties escapes described on ReadProperties.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	var high rune // pending high surrogate from a \u escape, or 0
	flushHigh := func() {
		if high != 0 {
			b.WriteRune(utf8.RuneError)
			high = 0
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			flushHigh()
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			// A lone trailing backslash stands for nothing.
			break
		}
		c = s[i]
		switch c {
		case 'u':
			if i+4 >= len(s) {
				return "", fmt.Errorf(`malformed \uxxxx encoding`)
			}
			var r rune
			for j := 1; j <= 4; j++ {
				h := s[i+j]
				var d byte
				switch {
				case h >= '0' && h <= '9':
					d = h - '0'
				case h >= 'a' && h <= 'f':
					d = h - 'a' + 10
				case h >= 'A' && h <= 'F':
					d = h - 'A' + 10
				default:
					return "", fmt.Errorf(`malformed \uxxxx encoding`)
				}
				r = r<<4 | rune(d)
			}
			i += 4
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00:
				flushHigh()
				high = r
			case utf16.IsSurrogate(r):
				if high != 0 {
					b.WriteRune(utf16.DecodeRune(high, r))
					high = 0
				} else {
					b.WriteRune(utf8.RuneError)
				}
			default:
				flushHigh()
				b.WriteRune(r)
			}
			continue
		case 't':
			c = '\t'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 'f':
			c = '\f'
		}
		flushHigh()
		b.WriteByte(c)
	}
	flushHigh()
	return b.String(), nil
}
