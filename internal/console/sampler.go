package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sampler samples the cluster's log end offsets and every group's committed offsets and lag
// each interval, keeping rates in bounded rings: throughput in (records appended per second,
// from the log end offsets) and out (records consumed per second, from the committed
// offsets), each topic's last rate, and each group's lag.
//
// It starts on the first page view and runs until stop. Lock rule: mu guards everything
// below it; a sample's Kafka requests are sent without it.
type sampler struct {
	interval time.Duration
	history  int
	client   func() *kgo.Client
	log      *slog.Logger

	once sync.Once
	quit chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		started   bool
		last      time.Time
		ends      map[string]int64 // topic → sum of its log end offsets at last
		committed map[string]int64 // group → sum of its committed offsets at last
		in, out   ring
		topicRate map[string]float64 // records/s appended to each topic over the last interval
		lag       map[string]*ring   // group → total lag
	}
}

// point is one sample.
type point struct {
	T time.Time
	V float64
}

// ring keeps the last n points.
type ring struct {
	n   int
	pts []point
}

func (r *ring) add(p point) {
	r.pts = append(r.pts, p)
	if len(r.pts) > r.n {
		r.pts = append(r.pts[:0], r.pts[len(r.pts)-r.n:]...)
	}
}

func (r *ring) points() []point { return append([]point(nil), r.pts...) }

func newSampler(interval time.Duration, history int, client func() *kgo.Client, log *slog.Logger) *sampler {
	s := &sampler{interval: interval, history: history, client: client, log: log,
		quit: make(chan struct{}), done: make(chan struct{})}
	s.mu.in.n, s.mu.out.n = history, history
	s.mu.topicRate, s.mu.lag = map[string]float64{}, map[string]*ring{}
	return s
}

// start runs the sampling loop once, on the first call.
func (s *sampler) start() {
	s.once.Do(func() {
		s.mu.Lock()
		s.mu.started = true
		s.mu.Unlock()
		go s.run()
	})
}

// stop ends the loop and waits for it.
func (s *sampler) stop() {
	s.mu.Lock()
	started := s.mu.started
	s.mu.Unlock()
	s.once.Do(func() {}) // a later start does nothing
	close(s.quit)
	if started {
		<-s.done
	}
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if cl := s.client(); cl != nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.interval+5*time.Second)
			go func() { // a stop does not wait for a slow cluster
				select {
				case <-s.quit:
					cancel()
				case <-ctx.Done():
				}
			}()
			s.sample(ctx, kadm.NewClient(cl))
			cancel()
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// sample takes one sample; a failed request leaves that part out of this sample.
func (s *sampler) sample(ctx context.Context, adm *kadm.Client) {
	now := time.Now()
	ends := map[string]int64{}
	if lo, err := adm.ListEndOffsets(ctx); err == nil {
		lo.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				ends[o.Topic] += o.Offset
			}
		})
	} else {
		s.log.Debug("console sampler: listing end offsets", "err", err)
		return
	}
	committed, lags := map[string]int64{}, map[string]int64{}
	if groups, err := adm.ListGroups(ctx); err == nil {
		if gl, err := adm.Lag(ctx, groups.Groups()...); err == nil {
			for g, l := range gl {
				if l.Error() != nil {
					continue
				}
				for _, m := range l.Lag.Sorted() {
					if m.Commit.At >= 0 {
						committed[g] += m.Commit.At
					}
					if m.Lag > 0 {
						lags[g] += m.Lag
					}
				}
			}
		}
	}
	s.record(now, ends, committed, lags)
}

// record adds a sample taken at now.
func (s *sampler) record(now time.Time, ends, committed, lags map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.last.IsZero() {
		dt := now.Sub(s.mu.last).Seconds()
		var in, out int64
		rates := map[string]float64{}
		for t, e := range ends {
			if prev, ok := s.mu.ends[t]; ok && e >= prev {
				in += e - prev
				rates[t] = float64(e-prev) / dt
			}
		}
		for g, c := range committed {
			if prev, ok := s.mu.committed[g]; ok && c >= prev {
				out += c - prev
			}
		}
		s.mu.in.add(point{now, float64(in) / dt})
		s.mu.out.add(point{now, float64(out) / dt})
		s.mu.topicRate = rates
	}
	for g, l := range lags {
		r, ok := s.mu.lag[g]
		if !ok {
			r = &ring{n: s.history}
			s.mu.lag[g] = r
		}
		r.add(point{now, float64(l)})
	}
	for g := range committed {
		if _, ok := lags[g]; !ok {
			r, ok := s.mu.lag[g]
			if !ok {
				r = &ring{n: s.history}
				s.mu.lag[g] = r
			}
			r.add(point{now, 0})
		}
	}
	s.mu.last, s.mu.ends, s.mu.committed = now, ends, committed
}

// throughput is the in and out series.
func (s *sampler) throughput() (in, out []point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.in.points(), s.mu.out.points()
}

// topicRate is topic's last rate (records/s) and whether one is known.
func (s *sampler) topicRate(topic string) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.mu.topicRate[topic]
	return r, ok
}

// groupLag is the group's lag series.
func (s *sampler) groupLag(group string) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.mu.lag[group]; ok {
		return r.points()
	}
	return nil
}
