package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadPropertiesSample(t *testing.T) {
	const sample = "# Licensed to the Apache Software Foundation\n" +
		"! bang comment\n" +
		"\n" +
		"   \t\n" +
		"node.id=3\n" +
		"  process.roles = broker,controller\n" +
		"listeners:PLAINTEXT://:9092\n" +
		"log.dirs /var/lib/gregor\n" +
		"spaced.sep   =   value\n" +
		"colon.after.blank   :   v\n" +
		"continued=one,\\\n" +
		"          two,\\\n" +
		"\tthree\n" +
		"# a comment ending in a backslash does not continue \\\n" +
		"after.comment=yes\n" +
		"escapes=tab\\there\\nnl \\\\ back \\= eq \\u0041\\u00e9\n" +
		"key\\ with\\ blanks=v\n" +
		"key\\=eq=v2\n" +
		"trailing=kept   \n" +
		"empty=\n" +
		"keyonly\n" +
		"dup=first\n" +
		"dup=second\n" +
		"crlf=a\r\n" +
		"cr=b\r" +
		"surrogate=\\uD83D\\uDE00\n" +
		"even.backslashes=x\\\\\n" +
		"not.a.continuation=y\n" +
		"eof=last\\"
	got, err := ReadProperties(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"node.id":            "3",
		"process.roles":      "broker,controller",
		"listeners":          "PLAINTEXT://:9092",
		"log.dirs":           "/var/lib/gregor",
		"spaced.sep":         "value",
		"colon.after.blank":  "v",
		"continued":          "one,two,three",
		"after.comment":      "yes",
		"escapes":            "tab\there\nnl \\ back = eq Aé",
		"key with blanks":    "v",
		"key=eq":             "v2",
		"trailing":           "kept   ",
		"empty":              "",
		"keyonly":            "",
		"dup":                "second",
		"crlf":               "a",
		"cr":                 "b",
		"surrogate":          "😀",
		"even.backslashes":   "x\\",
		"not.a.continuation": "y",
		"eof":                "last",
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q = %q, want %q", k, got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected key %q = %q", k, v)
			}
		}
	}
}

func TestReadPropertiesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short unicode escape", "a=\\u12", "line 1"},
		{"bad hex", "x=1\nb=\\u12G4", "line 2"},
		{"bad utf8", "a=\xff", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadProperties(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := ReadProperties(iotest.ErrReader(errors.New("boom"))); err == nil {
		t.Fatal("read error was dropped")
	}
}
