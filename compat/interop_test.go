package compat_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/compat"
)

// allClients is every client of the suite at its ordinary settings.
func allClients() []Client {
	return []Client{franzClient{}, saramaClient{}, kafkaGoClient{}, confluentClient{}, kcatClient{},
		kafkajs(), kafkaPython(nil, "kafka-python"), confluentPython(), javaClient()}
}

// TestInterop: every client writes records to one shared topic, then every client reads all
// of them; each reader must see each writer's records exactly as the reference reader
// (franz-go) does, positions, timestamps and headers included.
func TestInterop(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopic(t, b.Addr(), "interop", 3, nil)
	clients := allClients()
	written := map[string][]Rec{}
	var names []string
	base := tsBase()
	for i, c := range clients {
		info, caps := c.Info(), c.Caps()
		names = append(names, info.Name)
		o := genOpts{prefix: info.Name, n: 12, headers: caps.Headers, textHeaders: true, textOnly: caps.TextOnly}
		if caps.Timestamps {
			o.tsBase = base + int64(i)*100_000
		}
		recs := genRecords(o)
		if caps.RunHeaders {
			for j := range recs {
				recs[j].Headers = []Header{{"client", []byte(info.Name)}}
			}
		}
		// Codecs every reader decodes (kafkajs has no zstd), one after another.
		codec := []string{"none", "gzip", "snappy", "lz4"}[(i+1)%4]
		ctx := ctxFor(t, time.Minute)
		if err := c.Produce(ctx, b.Addr(), "interop", codec, recs); err != nil {
			t.Errorf("%s could not write (%s): %v", info.Name, codec, err)
			continue
		}
		written[info.Name] = recs
	}
	ref := refRead(t, b.Addr(), "interop")
	refBy := map[string][]Rec{}
	for _, r := range ref {
		w := writerOf(r, names)
		refBy[w] = append(refBy[w], r)
	}
	for i, c := range clients {
		checkSame(t, written[names[i]], refBy[names[i]], cmpOpts{noPosition: true, noTimestamps: !c.Caps().Timestamps})
	}
	for _, reader := range clients {
		name := reader.Info().Name
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := reader.Consume(ctxFor(t, time.Minute), b.Addr(), "interop", len(ref))
			gotBy := map[string][]Rec{}
			for _, r := range got {
				w := writerOf(r, names)
				gotBy[w] = append(gotBy[w], r)
			}
			for _, w := range names {
				step(t, compat.SectionInterop, name, "read:"+w, func(t *stepT) {
					if _, ok := written[w]; !ok {
						t.Fatalf("%s wrote nothing", w)
					}
					if err != nil && len(gotBy[w]) < len(refBy[w]) {
						t.Fatalf("read: %v", err)
					}
					checkSame(t, refBy[w], gotBy[w], cmpOpts{})
				})
			}
		})
	}
}

// writerOf is the client whose records' ids r carries (the longest matching name).
func writerOf(r Rec, names []string) string {
	best := ""
	for _, n := range names {
		if strings.HasPrefix(r.id(), n+"-") && len(n) > len(best) {
			best = n
		}
	}
	if best == "" {
		return fmt.Sprintf("unknown(%s)", r.id())
	}
	return best
}
