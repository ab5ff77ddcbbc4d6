// Command compatdoc writes docs/compatibility.md from a report of the compatibility suite:
//
//	GREGOR_COMPAT_REPORT=/tmp/compat.json go test -count=1 ./compat/
//	go run ./compat/cmd/compatdoc -in /tmp/compat.json -out docs/compatibility.md
//
// scripts/compat-doc does both.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/gregor-project/gregor/compat"
)

func main() {
	in := flag.String("in", "", "JSON report written by the suite (GREGOR_COMPAT_REPORT)")
	out := flag.String("out", "docs/compatibility.md", "markdown file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "compatdoc:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	if in == "" {
		return fmt.Errorf("-in is required")
	}
	r, err := compat.ReadReport(in)
	if err != nil {
		return err
	}
	if len(r.Outcomes) == 0 {
		return fmt.Errorf("%s holds no outcomes", in)
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
