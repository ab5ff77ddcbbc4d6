package security

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// KerberosShortNamer is sasl.kerberos.principal.to.local.rules: how a client's Kerberos
// principal (service/host@REALM or user@REALM) becomes the name of its principal
// (User:<short name>), as Kafka's KerberosShortNamer maps it.
//
// Rules are tried in order; the first that gives a name wins, and a principal no rule maps
// fails authentication:
//
//	DEFAULT                                  the first component, when the realm is the
//	                                         default realm of krb5.conf
//	RULE:[n:format](match)s/pattern/repl/g/L  for a principal of n components: format with
//	                                         $0 the realm, $1 the first component, $2 the
//	                                         second; kept if it matches match (whole), then
//	                                         pattern replaced by repl (the first match, every
//	                                         one with g); /L lower-cases, /U upper-cases
//
// (match) and s/pattern/repl/ are optional. A name that still holds '/' or '@' is an error,
// as Kafka's. Patterns are Go regular expressions (RE2), which accept the patterns Kafka's
// documentation shows.
type KerberosShortNamer struct {
	defaultRealm string
	rules        []kerberosRule
}

type kerberosRule struct {
	dflt       bool
	components int
	format     string
	match      *regexp.Regexp // nil: any
	from       *regexp.Regexp // nil: no substitution
	to         string
	global     bool
	lower      bool
	upper      bool
}

// kerberosRuleRE is Kafka's KerberosShortNamer.RULE_PARSER.
var kerberosRuleRE = regexp.MustCompile(`^((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))`)

// ParseKerberosRules parses sasl.kerberos.principal.to.local.rules (its list elements);
// defaultRealm is the default realm of krb5.conf, which DEFAULT maps.
func ParseKerberosRules(rules []string, defaultRealm string) (*KerberosShortNamer, error) {
	n := &KerberosShortNamer{defaultRealm: defaultRealm}
	if len(rules) == 0 {
		rules = []string{"DEFAULT"}
	}
	for _, text := range rules {
		rest := strings.TrimSpace(text)
		for rest != "" {
			m := kerberosRuleRE.FindStringSubmatch(rest)
			if m == nil {
				return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: invalid rule %q", rest)
			}
			r, err := newKerberosRule(m)
			if err != nil {
				return nil, err
			}
			n.rules = append(n.rules, r)
			rest = strings.TrimSpace(rest[len(m[0]):])
		}
	}
	return n, nil
}

func newKerberosRule(m []string) (kerberosRule, error) {
	if m[2] != "" {
		return kerberosRule{dflt: true}, nil
	}
	c, err := strconv.Atoi(m[5])
	if err != nil {
		return kerberosRule{}, fmt.Errorf("sasl.kerberos.principal.to.local.rules: rule %q has no component count", m[0])
	}
	r := kerberosRule{components: c, format: m[6], global: m[12] == "g", lower: m[13] == "L", upper: m[13] == "U"}
	if m[7] != "" {
		if r.match, err = regexp.Compile("^(?:" + m[8] + ")$"); err != nil {
			return kerberosRule{}, fmt.Errorf("sasl.kerberos.principal.to.local.rules: rule %q: %w", m[0], err)
		}
	}
	if m[9] != "" {
		if r.from, err = regexp.Compile(m[10]); err != nil {
			return kerberosRule{}, fmt.Errorf("sasl.kerberos.principal.to.local.rules: rule %q: %w", m[0], err)
		}
		r.to = javaReplacement(m[11])
	}
	return r, nil
}

// ShortName maps a principal written service/host@REALM or user@REALM.
func (n *KerberosShortNamer) ShortName(principal string) (string, error) {
	name, realm, hasRealm := strings.Cut(principal, "@")
	service, host, hasHost := strings.Cut(name, "/")
	if !hasHost && !hasRealm {
		return service, nil
	}
	params := []string{realm, service}
	if hasHost {
		params = append(params, host)
	}
	for _, r := range n.rules {
		out, err := r.apply(params, n.defaultRealm)
		if err != nil {
			return "", fmt.Errorf("%s: %w", principal, err)
		}
		if out != "" {
			return out, nil
		}
	}
	return "", fmt.Errorf("no rule of sasl.kerberos.principal.to.local.rules applies to %s", principal)
}

var nonSimpleRE = regexp.MustCompile(`[/@]`)

// apply gives the rule's name for params (realm, components...), "" when it does not apply.
func (r kerberosRule) apply(params []string, defaultRealm string) (string, error) {
	var out string
	switch {
	case r.dflt:
		if params[0] == defaultRealm {
			out = params[1]
		}
	case len(params)-1 == r.components:
		base, err := formatKerberos(r.format, params)
		if err != nil {
			return "", err
		}
		if r.match != nil && !r.match.MatchString(base) {
			return "", nil
		}
		out = base
		if r.from != nil {
			if r.global {
				out = r.from.ReplaceAllString(base, r.to)
			} else if loc := r.from.FindStringSubmatchIndex(base); loc != nil {
				out = base[:loc[0]] + string(r.from.ExpandString(nil, r.to, base, loc)) + base[loc[1]:]
			}
		}
	}
	if out == "" {
		return "", nil
	}
	if nonSimpleRE.MatchString(out) {
		return "", fmt.Errorf("non-simple name %s after a sasl.kerberos.principal.to.local.rules rule", out)
	}
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, nil
}

// formatKerberos replaces $0, $1, $2 in a rule's format with params.
func formatKerberos(format string, params []string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '$' {
			b.WriteByte(format[i])
			continue
		}
		j := i + 1
		for j < len(format) && format[j] >= '0' && format[j] <= '9' {
			j++
		}
		if j == i+1 {
			b.WriteByte('$')
			continue
		}
		k, _ := strconv.Atoi(format[i+1 : j])
		if k >= len(params) {
			return "", fmt.Errorf("format %q names $%d, beyond the principal's %d components", format, k, len(params)-1)
		}
		b.WriteString(params[k])
		i = j - 1
	}
	return b.String(), nil
}
