package console

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// series is one line of a chart.
type series struct {
	Name  string
	Class string // CSS class of the line (web/console.css)
	Pts   []point
}

// chartSVG draws series as an inline SVG line chart: time on x, the value on y from 0 to the
// largest value, each series a polyline with its name and last value in the legend.
func chartSVG(title string, ss ...series) template.HTML {
	const w, h, left, bottom, top = 600.0, 160.0, 48.0, 20.0, 8.0
	var t0, t1 time.Time
	peak := 0.0
	for _, s := range ss {
		for _, p := range s.Pts {
			if t0.IsZero() || p.T.Before(t0) {
				t0 = p.T
			}
			if p.T.After(t1) {
				t1 = p.T
			}
			peak = math.Max(peak, p.V)
		}
	}
	if peak == 0 {
		peak = 1
	}
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<figure class="chart"><figcaption>%s</figcaption><svg viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, esc(title), w, h, esc(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, h-bottom, w, h-bottom)
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, top, left, h-bottom)
	fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.0f" text-anchor="end">%s</text>`, left-4, top+8, esc(shortNum(peak)))
	fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.0f" text-anchor="end">0</text>`, left-4, h-bottom)
	if !t0.IsZero() {
		fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.0f">%s</text>`, left, h-4, t0.UTC().Format("15:04:05"))
		fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.0f" text-anchor="end">%s</text>`, w, h-4, t1.UTC().Format("15:04:05"))
	}
	for _, s := range ss {
		var pts []string
		for _, p := range s.Pts {
			x := left + (w-left)*p.T.Sub(t0).Seconds()/span
			y := (h - bottom) - (h-bottom-top)*p.V/peak
			pts = append(pts, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
		}
		if len(s.Pts) == 1 { // one sample: a flat line across
			y := (h - bottom) - (h-bottom-top)*s.Pts[0].V/peak
			pts = []string{fmt.Sprintf("%.1f,%.1f", left, y), fmt.Sprintf("%.1f,%.1f", w, y)}
		}
		fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, esc(s.Class), strings.Join(pts, " "))
	}
	b.WriteString(`</svg><div class="legend">`)
	for _, s := range ss {
		last := "–"
		if n := len(s.Pts); n > 0 {
			last = shortNum(s.Pts[n-1].V)
		}
		fmt.Fprintf(&b, `<span class="key %s">%s: <b>%s</b></span> `, esc(s.Class), esc(s.Name), esc(last))
	}
	if len(ss) == 0 || len(ss[0].Pts) == 0 {
		b.WriteString(`<span class="muted">collecting samples…</span>`)
	}
	b.WriteString(`</div></figure>`)
	return template.HTML(b.String()) // every interpolated string above is escaped
}

// shortNum renders v with at most one decimal and a k/M suffix.
func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// humanBytes renders n bytes in binary units.
func humanBytes(n int64) string {
	if n < 0 {
		return "–"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// joinInt32s renders ids as "1, 2, 3".
func joinInt32s(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ", ")
}

// offsetText renders an offset, "–" for none (-1).
func offsetText(o int64) string {
	if o < 0 {
		return "–"
	}
	return strconv.FormatInt(o, 10)
}
