package security

import (
	"fmt"
	"strings"
)

// JAAS is one login module entry of a sasl.jaas.config value, as Kafka's JaasConfig parses
// it:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_alice="alice-secret";
//
// a class name, a control flag (required, requisite, sufficient or optional) and options
// written key=value, a value quoted with double quotes (a backslash escapes the next
// character) or a bare word, ending with a semicolon.
type JAAS struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// ParseJAAS reads a sasl.jaas.config value holding exactly one login module, as Kafka
// requires of sasl.jaas.config.
func ParseJAAS(s string) (JAAS, error) {
	p := jaasParser{s: s}
	var j JAAS
	p.space()
	j.LoginModule = p.word()
	if j.LoginModule == "" {
		return JAAS{}, fmt.Errorf("JAAS config: expected a login module class name")
	}
	p.space()
	j.Flag = strings.ToLower(p.word())
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return JAAS{}, fmt.Errorf("JAAS config: %q is not a control flag (required, requisite, sufficient, optional)", j.Flag)
	}
	j.Options = map[string]string{}
	for {
		p.space()
		if p.eof() {
			return JAAS{}, fmt.Errorf("JAAS config: missing ';' at the end of the login module entry")
		}
		if p.peek() == ';' {
			p.i++
			break
		}
		k := p.word()
		p.space()
		if k == "" || p.eof() || p.peek() != '=' {
			return JAAS{}, fmt.Errorf("JAAS config: expected key=value at %q", p.rest())
		}
		p.i++
		p.space()
		v, err := p.value()
		if err != nil {
			return JAAS{}, err
		}
		j.Options[k] = v
	}
	p.space()
	if !p.eof() {
		return JAAS{}, fmt.Errorf("JAAS config: sasl.jaas.config holds one login module; found more after ';': %q", p.rest())
	}
	return j, nil
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) eof() bool    { return p.i >= len(p.s) }
func (p *jaasParser) peek() byte   { return p.s[p.i] }
func (p *jaasParser) rest() string { return p.s[p.i:] }

func (p *jaasParser) space() {
	for !p.eof() && strings.ContainsRune(" \t\r\n", rune(p.peek())) {
		p.i++
	}
}

// word reads a bare token: up to a blank, '=', ';' or '"'.
func (p *jaasParser) word() string {
	start := p.i
	for !p.eof() && !strings.ContainsRune(" \t\r\n=;\"", rune(p.peek())) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *jaasParser) value() (string, error) {
	if p.eof() {
		return "", fmt.Errorf("JAAS config: missing value")
	}
	if p.peek() != '"' {
		w := p.word()
		if w == "" {
			return "", fmt.Errorf("JAAS config: missing value at %q", p.rest())
		}
		return w, nil
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		p.i++
		switch c {
		case '\\':
			if p.eof() {
				return "", fmt.Errorf("JAAS config: unterminated quoted value")
			}
			b.WriteByte(p.peek())
			p.i++
		case '"':
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("JAAS config: unterminated quoted value")
}
