package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/IBM/sarama"
)

func TestSaramaTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, saramaClient{})
}

// txnProducer is a transactional SyncProducer of txnID (sarama initialises the producer id
// as it is created): idempotent, acks=all, one request in flight, manual partitions.
func (c saramaClient) txnProducer(addr, txnID string) (sarama.SyncProducer, error) {
	cfg := c.config(addr)
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	return sarama.NewSyncProducer([]string{addr}, cfg)
}

func saramaSend(p sarama.SyncProducer, topic string, recs []Rec) error {
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = toSarama(topic, r)
	}
	err := p.SendMessages(msgs)
	if pes := (sarama.ProducerErrors{}); errors.As(err, &pes) && len(pes) > 0 {
		return fmt.Errorf("%d of %d messages failed, first: %w", len(pes), len(msgs), pes[0].Err)
	}
	return err
}

func (c saramaClient) TxnProduce(_ context.Context, addr, topic, txnID string, recs []Rec, commit bool) error {
	p, err := c.txnProducer(addr, txnID)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := saramaSend(p, topic, recs); err != nil {
		return errors.Join(err, p.AbortTxn())
	}
	if commit {
		err = p.CommitTxn()
	} else {
		err = p.AbortTxn()
	}
	if err != nil {
		return fmt.Errorf("end transaction (commit %v): %w", commit, err)
	}
	return nil
}

func (c saramaClient) TxnConsume(ctx context.Context, addr, topic string, n int, committed bool) ([]Rec, error) {
	c.readCommitted = committed
	return c.Consume(ctx, addr, topic, n)
}

// saramaCopier is a ConsumerGroupHandler that copies each record it is handed in a
// transaction of its own which also commits the record's offset (AddMessageToTxn).
type saramaCopier struct {
	mu     sync.Mutex // one transaction at a time across the claims' goroutines
	p      sarama.SyncProducer
	out    string
	group  string
	copied int
	err    error
	done   chan struct{}
	n      int
}

func (h *saramaCopier) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaCopier) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaCopier) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		if err := h.copy(m); err != nil {
			return err
		}
	}
	return nil
}

func (h *saramaCopier) copy(m *sarama.ConsumerMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	fail := func(err error) error {
		h.err = errors.Join(err, h.p.AbortTxn())
		close(h.done)
		return h.err
	}
	if err := h.p.BeginTxn(); err != nil {
		return fail(fmt.Errorf("begin: %w", err))
	}
	r := fromSarama(m)
	r.Timestamp = 0
	if err := saramaSend(h.p, h.out, []Rec{r}); err != nil {
		return fail(err)
	}
	if err := h.p.AddMessageToTxn(m, h.group, nil); err != nil {
		return fail(fmt.Errorf("add offsets: %w", err))
	}
	if err := h.p.CommitTxn(); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	h.copied++
	if h.copied == h.n {
		close(h.done)
	}
	return nil
}

func (c saramaClient) Transform(ctx context.Context, addr, in, out, group, txnID string, n int) error {
	p, err := c.txnProducer(addr, txnID)
	if err != nil {
		return err
	}
	defer p.Close()
	c.readCommitted = true
	cfg := c.config(addr)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		return err
	}
	defer cg.Close()
	h := &saramaCopier{p: p, out: out, group: group, n: n, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		var err error
		for cctx.Err() == nil && err == nil {
			err = cg.Consume(cctx, []string{in}, h)
		}
		consumed <- err
	}()
	select {
	case <-h.done:
	case err := <-consumed:
		return fmt.Errorf("consume: %v", err)
	case <-ctx.Done():
	}
	cancel()
	<-consumed
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if h.copied < n {
		return fmt.Errorf("%d of %d records copied: %w", h.copied, n, ctx.Err())
	}
	return nil
}

func (c saramaClient) Fence(_ context.Context, addr, topic, txnID string, first, second, third Rec) (FenceResult, error) {
	var res FenceResult
	a, err := c.txnProducer(addr, txnID)
	if err != nil {
		return res, fmt.Errorf("A: %w", err)
	}
	defer a.Close()
	if err := a.BeginTxn(); err != nil {
		return res, fmt.Errorf("A begin: %w", err)
	}
	if err := saramaSend(a, topic, []Rec{first}); err != nil {
		return res, fmt.Errorf("A first write: %w", err)
	}
	b, err := c.txnProducer(addr, txnID) // InitProducerId fences A
	if err != nil {
		return res, fmt.Errorf("B: %w", err)
	}
	defer b.Close()
	if err := b.BeginTxn(); err != nil {
		return res, fmt.Errorf("B begin: %w", err)
	}
	if err := saramaSend(b, topic, []Rec{second}); err != nil {
		return res, fmt.Errorf("B write: %w", err)
	}
	if err := b.CommitTxn(); err != nil {
		return res, fmt.Errorf("B commit: %w", err)
	}
	res.WriteErr = saramaSend(a, topic, []Rec{third})
	res.CommitErr = a.CommitTxn()
	return res, nil
}

func (saramaClient) ExpectFenced() (write, commit Expectation) {
	fenced := func(err error) bool {
		return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
	}
	return Expectation{Desc: "sarama.ErrInvalidProducerEpoch or ErrProducerFenced", Match: fenced},
		Expectation{Desc: "sarama.ErrProducerFenced or ErrInvalidProducerEpoch (the transaction manager's fatal error)", Match: fenced}
}
