package config

import (
	"fmt"
	"strings"
)

// StandardAuthorizer is the one authorizer.class.name Gregor knows, by Kafka's class name:
// ACLs kept in the metadata log, with Kafka's StandardAuthorizer semantics (internal/authz).
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// principalListType parses super.users: principals of the form Type:Name separated by
// semicolons (Kafka's separator, since a name such as a certificate's distinguished name
// may hold commas). Blank entries are dropped.
func principalListType() valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		var ps []string
		for _, p := range strings.Split(s, ";") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			typ, name, ok := strings.Cut(p, ":")
			if !ok || typ == "" || name == "" {
				return nil, "", fmt.Sprintf("%q is not a principal of the form Type:Name", p)
			}
			ps = append(ps, p)
		}
		return ps, strings.Join(ps, ";"), ""
	}}
}
