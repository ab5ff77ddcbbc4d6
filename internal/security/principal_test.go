package security

import "testing"

func TestPrincipalMappingRules(t *testing.T) {
	dn := "CN=alice,OU=Eng,O=Example,C=US"
	for _, tc := range []struct {
		rules, want string
		ok          bool
	}{
		{"DEFAULT", dn, true},
		{"", dn, true},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L, DEFAULT`, "alice@eng", true},
		{`RULE:^CN=(.*?),OU=.*$/$1/U`, "ALICE", true},
		{`RULE:^CN=(.*?),OU=Ops.*$/$1/, DEFAULT`, dn, true},
		{`RULE:^CN=(.*?),OU=Ops.*$/$1/`, "", false},
		{`RULE:^CN=([a-z]+),.*$/$1x/`, "alicex", true},
		{`RULE:^CN=(.*?),OU=(.*)$/$1\/$2/`, "alice/Eng,O=Example,C=US", true},
	} {
		m, err := ParsePrincipalMapping(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		got, ok := m.Name(dn)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %q %v, want %q %v", tc.rules, got, ok, tc.want, tc.ok)
		}
	}
	for _, bad := range []string{"RULE:abc", "RULE:(/x/", "NONSENSE", "DEFAULT DEFAULT"} {
		if _, err := ParsePrincipalMapping(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a\"dmin;secret" user_alice=alice-secret ;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.LoginModule != plainLoginJA || j.Flag != "required" || j.Options["password"] != `a"dmin;secret` || j.Options["user_alice"] != "alice-secret" {
		t.Fatalf("%+v", j)
	}
	for _, bad := range []string{
		"", "Module", "Module required", "Module maybe;", `Module required a="b"`, `Module required a=;`,
		`Module required a="b;`, `Module required; Other required;`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
