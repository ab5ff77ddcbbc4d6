package security

import "testing"

// Kafka's KerberosShortNamer cases (KerberosNameTest): DEFAULT keeps the first component
// of the default realm's principals, RULEs format, match, substitute and change case.
func TestKerberosShortNamer(t *testing.T) {
	rules := []string{
		`RULE:[1:$1@$0](.*@EXAMPLE\.COM)s/@.*//`,
		`RULE:[2:$1](App\..*)s/App\.(.*)/$1/g`,
		`RULE:[2:$1/$2@$0](.*@OTHER\.ORG)s/@.*//U`,
		`RULE:[1:$1](Upper.*)/L`,
		`DEFAULT`,
	}
	n, err := ParseKerberosRules(rules, "REALM.TEST")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"client@REALM.TEST":          "client",
		"kafka/localhost@REALM.TEST": "kafka",
		"alice@EXAMPLE.COM":          "alice",
		"App.service/host@ANY":       "service",
		"UpperCase@ELSEWHERE":        "uppercase",
		"plain":                      "plain",
	} {
		got, err := n.ShortName(in)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"bob@UNKNOWN.REALM", "svc/host@OTHER.ORG"} {
		if got, err := n.ShortName(in); err == nil {
			t.Errorf("%s: %q, want an error (no rule, or a non-simple name)", in, got)
		}
	}
	d, _ := ParseKerberosRules(nil, "REALM.TEST")
	if got, err := d.ShortName("user/admin@REALM.TEST"); err != nil || got != "user" {
		t.Errorf("DEFAULT: %q, %v", got, err)
	}
	for _, bad := range []string{"RULE:[x:$1]", "NOPE", `RULE:[1:$1](a(b)`} {
		if _, err := ParseKerberosRules([]string{bad}, "R"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
