package security

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper is ssl.principal.mapping.rules: how the distinguished name of a client's
// certificate becomes a principal name on an SSL listener (Kafka's SslPrincipalMapper).
//
// Rules are tried in order; the first whose pattern matches the whole distinguished name
// (written as RFC 2253 puts it: "CN=alice,OU=eng,O=Example,C=US") gives the name:
//
//	RULE:pattern/replacement/      the pattern's groups substituted into replacement ($1, ...)
//	RULE:pattern/replacement/L     ... then lower-cased
//	RULE:pattern/replacement/U     ... then upper-cased
//	DEFAULT                        the distinguished name itself
//
// A name no rule matches is an authentication failure. Patterns are Go regular expressions
// (RE2), which accept the patterns Kafka's documentation shows; a '/' inside a pattern or a
// replacement is written '\/'.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	dflt        bool
	re          *regexp.Regexp
	replacement string
	toLower     bool
	toUpper     bool
}

// ParsePrincipalMapping parses ssl.principal.mapping.rules.
func ParsePrincipalMapping(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			m.rules = append(m.rules, mappingRule{dflt: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			r, tail, err := parseRule(rest[len("RULE:"):])
			if err != nil {
				return nil, err
			}
			m.rules = append(m.rules, r)
			rest = tail
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: %q is neither DEFAULT nor RULE:pattern/replacement/[LU]", rest)
		}
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: expected ',' before %q", rest)
		}
		rest = strings.TrimSpace(rest[1:])
	}
	return m, nil
}

// parseRule reads pattern/replacement/[LU] and returns what follows it.
func parseRule(s string) (mappingRule, string, error) {
	var parts [2]string
	i := 0
	for p := 0; p < 2; p++ {
		var b strings.Builder
		for ; i < len(s) && s[i] != '/'; i++ {
			if s[i] == '\\' && i+1 < len(s) && s[i+1] == '/' {
				i++
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return mappingRule{}, "", fmt.Errorf("ssl.principal.mapping.rules: rule %q is not pattern/replacement/[LU]", s)
		}
		i++ // the '/'
		parts[p] = b.String()
	}
	r := mappingRule{replacement: javaReplacement(parts[1])}
	if i < len(s) && (s[i] == 'L' || s[i] == 'U') {
		r.toLower, r.toUpper = s[i] == 'L', s[i] == 'U'
		i++
	}
	re, err := regexp.Compile("^(?:" + parts[0] + ")$")
	if err != nil {
		return mappingRule{}, "", fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %w", parts[0], err)
	}
	r.re = re
	return r, s[i:], nil
}

// javaReplacement turns Java's "$1" group references into Go's "${1}", so "$1x" keeps
// meaning group 1 followed by x.
var javaGroupRE = regexp.MustCompile(`\$(\d)`)

func javaReplacement(s string) string { return javaGroupRE.ReplaceAllString(s, "$${$1}") }

// Name maps a distinguished name; ok is false when no rule matches.
func (m *PrincipalMapper) Name(dn string) (string, bool) {
	for _, r := range m.rules {
		if r.dflt {
			return dn, true
		}
		if !r.re.MatchString(dn) {
			continue
		}
		n := r.re.ReplaceAllString(dn, r.replacement)
		switch {
		case r.toLower:
			n = strings.ToLower(n)
		case r.toUpper:
			n = strings.ToUpper(n)
		}
		return n, true
	}
	return "", false
}

// DistinguishedName is a certificate's subject as RFC 2253 writes it (and Java's
// X500Principal.getName, which Kafka maps): the last relative name first.
func DistinguishedName(c *x509.Certificate) string {
	return c.Subject.ToRDNSequence().String()
}
