package console

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The sampler's rates are the differences of successive samples over the time between them;
// a topic deleted and created again (its end offsets going down) counts nothing for that
// interval; the rings keep the last History points.
func TestSamplerRates(t *testing.T) {
	s := newSampler(time.Second, 3, nil, slog.New(slog.DiscardHandler))
	t0 := time.Unix(1000, 0)
	s.record(t0, map[string]int64{"a": 10, "b": 5}, map[string]int64{"g": 0}, map[string]int64{"g": 15})
	if in, out := s.throughput(); len(in) != 0 || len(out) != 0 {
		t.Fatalf("a rate from one sample: %v %v", in, out)
	}
	s.record(t0.Add(2*time.Second), map[string]int64{"a": 30, "b": 1}, map[string]int64{"g": 8}, map[string]int64{"g": 23})
	in, out := s.throughput()
	if len(in) != 1 || in[0].V != 10 || out[0].V != 4 {
		t.Fatalf("in %v out %v, want 10/s (a's 20 in 2 s; b went down) and 4/s", in, out)
	}
	if r, ok := s.topicRate("a"); !ok || r != 10 {
		t.Fatalf("topic a: %v %v", r, ok)
	}
	if _, ok := s.topicRate("b"); ok {
		t.Fatal("a rate for b, whose end offsets went down")
	}
	for i := 3; i < 8; i++ {
		s.record(t0.Add(time.Duration(i)*time.Second), map[string]int64{"a": 30}, map[string]int64{"g": 8}, map[string]int64{"g": int64(i)})
	}
	in, _ = s.throughput()
	lag := s.groupLag("g")
	if len(in) != 3 || len(lag) != 3 || lag[2].V != 7 {
		t.Fatalf("rings of 3: in %v lag %v", in, lag)
	}
}

// The chart is an SVG with one polyline per series, its values in the legend, and its title
// escaped.
func TestChartSVG(t *testing.T) {
	t0 := time.Unix(1000, 0)
	svg := string(chartSVG("<in & out>", series{Name: "in", Class: "in", Pts: []point{{t0, 1}, {t0.Add(time.Second), 4}}},
		series{Name: "out", Class: "out", Pts: []point{{t0, 2}}}))
	if strings.Count(svg, "<polyline") != 2 || !strings.Contains(svg, "&lt;in &amp; out&gt;") || !strings.Contains(svg, "in: <b>4</b>") {
		t.Fatalf("chart:\n%s", svg)
	}
	if svg := string(chartSVG("empty")); !strings.Contains(svg, "collecting samples") {
		t.Fatalf("empty chart:\n%s", svg)
	}
}
