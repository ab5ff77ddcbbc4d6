package compat

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// The doc lists the clients, marks each step, numbers distinct notes once, builds the
// interop matrix from "read:<writer>" steps and sorts the API table by key.
func TestMarkdown(t *testing.T) {
	r := &Report{
		Clients: []ClientInfo{{Name: "b", Language: "Go", Version: "v2", Order: 2}, {Name: "a", Language: "C", Version: "1.0", Order: 1},
			{Name: "b (older)", Variant: "b", Order: 3}, {Name: "b (old)", Variant: "b", Order: 4}},
		Outcomes: []Outcome{
			{SectionScenario, "b", "admin", Pass, ""},
			{SectionScenario, "a", "admin", NA, "no admin"},
			{SectionScenario, "a", "produce", Fail, "not yet passing: boom | pipe"},
			{SectionScenario, "b", "produce", Pass, "no admin"},
			{SectionInterop, "a", "read:b", Pass, ""},
			{SectionInterop, "b", "read:a", Fail, "not yet passing: x"},
			{SectionOld, "b (old)", "produce", Pass, ""},
			{SectionOld, "b (older)", "produce", Pass, ""},
			{SectionTxn, "a", "commit", Pass, ""},
			{SectionTxn, "a", "fencing", NA, "no admin"},
			{SectionSecurity, "b", "mtls", Pass, ""},
			{SectionSecurity, "a", "scram-sha-512", Fail, "not yet passing: x"},
		},
		APIs: []API{{Key: 3, Name: "Metadata", Min: 0, Max: 12}, {Key: 0, Name: "Produce", Min: 0, Max: 12}},
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	r, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	for _, want := range []string{
		"| a | C | 1.0 |\n| b | Go | v2 |",
		"| a | — <sup>1</sup> | ❌ <sup>2</sup> |",
		"| b | ✅ | ✅ <sup>1</sup> |",
		"| reader ↓ writer → | a | b |",
		"| a | | ✅ |",
		"| b | ❌ <sup>3</sup> | |",
		"| b (older) | ✅ |" + strings.Repeat(" |", len(OldSteps)-1) + "\n| b (old) | ✅ |",
		"| a | C | 1.0 |\n| b | Go | v2 |\n\n",
		"## Transactions\n",
		"| a | ✅ |" + strings.Repeat(" |", len(TxnSteps)-2) + " — <sup>1</sup> |\n",
		"## Security\n",
		"| client | SCRAM-SHA-512 over SASL_SSL | mutual TLS over SSL |\n|---|:-:|:-:|\n| a | ❌ <sup>3</sup> | |\n| b | | ✅ |\n",
		"| 0 | Produce | 0–12 |\n| 3 | Metadata | 0–12 |",
		"1. no admin\n2. not yet passing: boom \\| pipe\n3. not yet passing: x\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
}
