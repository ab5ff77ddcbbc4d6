// Package compat is Gregor's client compatibility suite: real Kafka clients in several
// languages (franz-go, sarama, kafka-go, confluent-kafka-go, kcat, kafkajs, kafka-python,
// confluent-kafka-python, Kafka's Java client kafka-clients) run one scenario against a fresh
// in-process broker each. The tests are in this package's _test.go files and the programs
// beside them (python/, kafkajs/, java/); this file holds the
// report that the tests write (when GREGOR_COMPAT_REPORT names a file) and that
// cmd/compatdoc turns into docs/compatibility.md.
package compat

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Outcome statuses.
const (
	Pass = "pass"
	Fail = "fail"
	NA   = "n/a" // the client has no such feature; Note says why
)

// Sections of the report, each a table.
const (
	SectionScenario = "scenario" // Client × Steps
	SectionInterop  = "interop"  // Client (reader) × "read:<writer>"
	SectionOld      = "old"      // old-protocol client × OldSteps
	SectionTxn      = "txn"      // Client × TxnSteps
	SectionSecurity = "security" // Client × SecuritySteps
)

// Step is one column of a table.
type Step struct {
	ID, Title, Doc string
}

// Steps are the scenario every client runs (issue 6), in order.
var Steps = []Step{
	{"admin", "admin", "create a topic with 3 partitions and a config, describe it, list topics, delete it"},
	{"produce", "produce", "records with keys, headers and explicit timestamps, with every codec the client supports (checked as stored)"},
	{"consume", "consume", "read back from the beginning: byte-for-byte equal, in order per partition"},
	{"group", "group", "two members split the partitions, commit, broker and clients restart, the group resumes exactly at the commit"},
	{"seek-offset", "seek offset", "start reading a partition at a given offset"},
	{"seek-time", "seek time", "start reading a partition at the first record at or after a timestamp"},
	{"compacted", "compacted", "read a compacted topic from the beginning after the cleaner left gaps: exactly the surviving records, at their offsets"},
	{"err-unknown-topic", "unknown topic", "produce to a topic that does not exist, auto-creation off"},
	{"err-out-of-range", "out of range", "fetch an offset outside the log: the client's reset policy (or its error)"},
	{"err-too-large", "too large", "a record larger than the topic's max.message.bytes"},
}

// OldSteps are the older-format checks (message format v0/v1, old Produce/Fetch versions).
var OldSteps = []Step{
	{"produce", "produce", "v0/v1 message sets, up-converted by the broker; a current client reads them back"},
	{"consume", "consume", "old Fetch versions read the client's own records back"},
	{"read-new", "reads current clients", "records written by a current client (v2 batches), down-converted"},
	{"group", "group", "the scenario's group step with the client's old group protocol versions"},
	{"zstd-topic", "zstd topic", "reading a topic whose compression.type is zstd: UNSUPPORTED_COMPRESSION_TYPE below Fetch v10, as from Kafka"},
}

// TxnSteps are the transactional scenario (issue 10) of every client with a transactional API.
var TxnSteps = []Step{
	{"commit", "commit", "a transaction of 12 records over 3 partitions, committed: a read_committed reader sees them all"},
	{"abort", "abort", "a transaction of 12 records, aborted, then another committed: a read_committed reader sees only the committed ones"},
	{"read-committed", "read_committed", "the client reads with isolation read_committed: exactly the committed records, in order per partition"},
	{"read-uncommitted", "read_uncommitted", "the client reads with isolation read_uncommitted: the committed and the aborted records in order, no control record handed to the application"},
	{"transform", "consume-transform-produce", "a group consumer copies 30 records to another topic in transactions that also commit its offsets: the copy holds each record once, the group's offsets stand at the input's end"},
	{"fencing", "fencing", "a second producer with the same transactional.id fences the first: the first's next write and its commit fail with the error the client reports against Kafka, and its open transaction is aborted"},
}

// SecuritySteps are the scenario's produce, consume and group steps over secured listeners.
var SecuritySteps = []Step{
	{"scram-sha-512", "SCRAM-SHA-512 over SASL_SSL", "the client trusts the test CA and authenticates with SCRAM-SHA-512 (a credential set with AlterUserScramCredentials); it produces 20 records, reads them back, and two group members split 3 partitions, read 30 records and commit"},
	{"mtls", "mutual TLS over SSL", "the listener requires a client certificate (ssl.client.auth=required); the client presents one signed by the test CA (PEM files) and runs the same steps"},
}

// Outcome is the result of one (client, step).
type Outcome struct {
	Section string `json:"section"`
	Client  string `json:"client"`
	Step    string `json:"step"`
	Status  string `json:"status"`
	Note    string `json:"note,omitempty"`
}

// API is one Kafka API key with the version range the broker serves (from ApiVersions).
type API struct {
	Key  int16  `json:"key"`
	Name string `json:"name"`
	Min  int16  `json:"min"`
	Max  int16  `json:"max"`
}

// ClientInfo names a client and the version the suite ran. A variant (e.g. a client pinned
// to an old protocol version) names its base client and is left out of the clients table.
type ClientInfo struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	Version  string `json:"version"`
	Order    int    `json:"order"`
	Variant  string `json:"variant,omitempty"`
}

// Report is everything one run of the suite recorded.
type Report struct {
	Clients  []ClientInfo `json:"clients"`
	Outcomes []Outcome    `json:"outcomes"`
	APIs     []API        `json:"apis"`
}

// ReadReport reads a JSON report.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// WriteFile writes the report as indented JSON.
func (r *Report) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Markdown writes docs/compatibility.md from the report.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Client compatibility\n\n")
	b.WriteString("Generated by `./scripts/compat-doc` from the results of the compatibility suite in `compat/`\n")
	b.WriteString("(real clients over TCP against a fresh Gregor each); do not edit by hand.\n\n")
	b.WriteString("✅ passes · ❌ not yet passing (the note says what fails) · — the client has no such feature\n\n")

	clients := append([]ClientInfo(nil), r.Clients...)
	sort.SliceStable(clients, func(i, j int) bool { return clients[i].Order < clients[j].Order })
	if len(clients) > 0 {
		b.WriteString("## Clients\n\n| client | language | version |\n|---|---|---|\n")
		for _, c := range clients {
			if c.Variant == "" {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, c.Language, c.Version)
			}
		}
		b.WriteString("\n")
	}

	notes := &footnotes{}
	byKey := map[[3]string]Outcome{}
	for _, o := range r.Outcomes {
		byKey[[3]string{o.Section, o.Client, o.Step}] = o
	}
	rows := func(section string) []string {
		seen := map[string]bool{}
		var names []string
		for _, c := range clients {
			for _, o := range r.Outcomes {
				if o.Section == section && o.Client == c.Name && !seen[c.Name] {
					seen[c.Name] = true
					names = append(names, c.Name)
				}
			}
		}
		for _, o := range r.Outcomes {
			if o.Section == section && !seen[o.Client] {
				seen[o.Client] = true
				names = append(names, o.Client)
			}
		}
		return names
	}
	table := func(section string, steps []Step) {
		b.WriteString("| client |")
		for _, s := range steps {
			fmt.Fprintf(&b, " %s |", s.Title)
		}
		b.WriteString("\n|---|")
		for range steps {
			b.WriteString(":-:|")
		}
		b.WriteString("\n")
		for _, c := range rows(section) {
			fmt.Fprintf(&b, "| %s |", c)
			for _, s := range steps {
				o, ok := byKey[[3]string{section, c, s.ID}]
				if !ok {
					b.WriteString(" |")
					continue
				}
				fmt.Fprintf(&b, " %s%s |", mark(o.Status), notes.ref(o))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		for _, s := range steps {
			fmt.Fprintf(&b, "- **%s**: %s\n", s.Title, s.Doc)
		}
		b.WriteString("\n")
	}

	b.WriteString("## The scenario\n\n")
	table(SectionScenario, Steps)

	if readers := rows(SectionInterop); len(readers) > 0 {
		b.WriteString("## Interoperability\n\n")
		b.WriteString("Every client writes records (keys, headers, timestamps where it can set them) to one shared\n")
		b.WriteString("topic; then every client reads all of them. Rows are readers, columns writers; a cell passes\n")
		b.WriteString("when the reader saw each of the writer's records exactly as a reference reader (franz-go) did.\n\n")
		var writers []string
		seen := map[string]bool{}
		for _, c := range clients {
			for _, o := range r.Outcomes {
				if o.Section == SectionInterop && o.Step == "read:"+c.Name && !seen[c.Name] {
					seen[c.Name] = true
					writers = append(writers, c.Name)
				}
			}
		}
		var steps []Step
		for _, w := range writers {
			steps = append(steps, Step{ID: "read:" + w, Title: w})
		}
		b.WriteString("| reader ↓ writer → |")
		for _, s := range steps {
			fmt.Fprintf(&b, " %s |", s.Title)
		}
		b.WriteString("\n|---|")
		for range steps {
			b.WriteString(":-:|")
		}
		b.WriteString("\n")
		for _, c := range readers {
			fmt.Fprintf(&b, "| %s |", c)
			for _, s := range steps {
				o, ok := byKey[[3]string{SectionInterop, c, s.ID}]
				if !ok {
					b.WriteString(" |")
					continue
				}
				fmt.Fprintf(&b, " %s%s |", mark(o.Status), notes.ref(o))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	if len(rows(SectionOld)) > 0 {
		b.WriteString("## Older protocol versions and message formats\n\n")
		b.WriteString("Clients configured for an old Kafka version produce message format v0/v1 with old Produce\n")
		b.WriteString("versions (Gregor up-converts to v2 batches on write) and fetch with old Fetch versions\n")
		b.WriteString("(Gregor down-converts on read), sharing topics with current clients.\n\n")
		table(SectionOld, OldSteps)
	}

	if len(rows(SectionTxn)) > 0 {
		b.WriteString("## Transactions\n\n")
		b.WriteString("Every client with a transactional API produces in transactions, commits and aborts, reads with\n")
		b.WriteString("both isolation levels, runs a consume-transform-produce step and is fenced by a second producer\n")
		b.WriteString("with its transactional.id.\n\n")
		table(SectionTxn, TxnSteps)
	}

	if len(rows(SectionSecurity)) > 0 {
		b.WriteString("## Security\n\n")
		b.WriteString("Every client connects to a broker's SASL_SSL and SSL listeners with its own TLS and SASL\n")
		b.WriteString("settings, as its users configure it against Kafka, and runs the scenario's produce, consume\n")
		b.WriteString("and group steps there; what the broker stored and committed is checked over PLAINTEXT.\n\n")
		table(SectionSecurity, SecuritySteps)
	}

	if len(r.APIs) > 0 {
		b.WriteString("## Kafka APIs served\n\n")
		b.WriteString("From the broker's ApiVersions response during the suite's run.\n\n")
		b.WriteString("| key | API | versions |\n|--:|---|---|\n")
		apis := append([]API(nil), r.APIs...)
		sort.Slice(apis, func(i, j int) bool { return apis[i].Key < apis[j].Key })
		for _, a := range apis {
			fmt.Fprintf(&b, "| %d | %s | %d–%d |\n", a.Key, a.Name, a.Min, a.Max)
		}
		b.WriteString("\n")
	}

	if len(notes.list) > 0 {
		b.WriteString("## Notes\n\n")
		for i, n := range notes.list {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mark(status string) string {
	switch status {
	case Pass:
		return "✅"
	case NA:
		return "—"
	default:
		return "❌"
	}
}

// footnotes numbers distinct notes in order of first use.
type footnotes struct {
	list []string
	idx  map[string]int
}

func (f *footnotes) ref(o Outcome) string {
	note := strings.TrimSpace(o.Note)
	if note == "" {
		return ""
	}
	note = strings.Join(strings.Fields(note), " ")
	if len(note) > 400 {
		note = note[:400] + "…"
	}
	note = strings.ReplaceAll(note, "|", "\\|")
	if f.idx == nil {
		f.idx = map[string]int{}
	}
	i, ok := f.idx[note]
	if !ok {
		f.list = append(f.list, note)
		i = len(f.list)
		f.idx[note] = i
	}
	return fmt.Sprintf(" <sup>%d</sup>", i)
}
