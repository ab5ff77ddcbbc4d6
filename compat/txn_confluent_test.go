package compat_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestConfluentKafkaGoTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, confluentClient{})
}

// ckTxnProducer is a transactional producer of txnID, its transactions initialised.
func ckTxnProducer(ctx context.Context, addr, txnID string) (*kafka.Producer, error) {
	p, err := kafka.NewProducer(ckConfig(addr, "transactional.id", txnID))
	if err != nil {
		return nil, err
	}
	if err := p.InitTransactions(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("init transactions: %w", err)
	}
	return p, nil
}

// ckDeliver produces recs with p and waits for every delivery report.
func ckDeliver(ctx context.Context, p *kafka.Producer, topic string, recs []Rec) error {
	dr := make(chan kafka.Event, len(recs))
	for _, r := range recs {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: r.Partition}, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		if err := p.Produce(m, dr); err != nil {
			return err
		}
	}
	var errs []error
	for range recs {
		select {
		case e := <-dr:
			if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				errs = append(errs, m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return fmt.Errorf("delivery reports: %w", ctx.Err())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d messages failed, first: %w", len(errs), len(recs), errs[0])
	}
	return nil
}

func (confluentClient) TxnProduce(ctx context.Context, addr, topic, txnID string, recs []Rec, commit bool) error {
	p, err := ckTxnProducer(ctx, addr, txnID)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := ckDeliver(ctx, p, topic, recs); err != nil {
		return errors.Join(err, p.AbortTransaction(ctx))
	}
	if commit {
		err = p.CommitTransaction(ctx)
	} else {
		err = p.AbortTransaction(ctx)
	}
	if err != nil {
		return fmt.Errorf("end transaction (commit %v): %w", commit, err)
	}
	return nil
}

func (confluentClient) TxnConsume(ctx context.Context, addr, topic string, n int, committed bool) ([]Rec, error) {
	iso := "read_uncommitted"
	if committed {
		iso = "read_committed"
	}
	c, err := kafka.NewConsumer(ckConfig(addr, "group.id", "compat-assign", "auto.offset.reset", "earliest",
		"enable.auto.commit", false, "isolation.level", iso))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, err
	}
	var tps []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		return nil, err
	}
	return ckPoll(ctx, c, n)
}

// Transform is librdkafka's consume-transform-produce loop: poll, begin, produce the copies,
// SendOffsetsToTransaction with the consumer's group metadata, commit.
func (confluentClient) Transform(ctx context.Context, addr, in, out, group, txnID string, n int) error {
	c, err := kafka.NewConsumer(ckConfig(addr, "group.id", group, "auto.offset.reset", "earliest",
		"enable.auto.commit", false, "isolation.level", "read_committed"))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Subscribe(in, nil); err != nil {
		return err
	}
	p, err := ckTxnProducer(ctx, addr, txnID)
	if err != nil {
		return err
	}
	defer p.Close()
	copied := 0
	for copied < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d records copied: %w", copied, n, err)
		}
		var batch []Rec
		next := map[int32]int64{}
	poll:
		for len(batch) < 10 {
			switch e := c.Poll(100).(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					return e.TopicPartition.Error
				}
				batch = append(batch, fromCK(e))
				next[e.TopicPartition.Partition] = int64(e.TopicPartition.Offset) + 1
			case kafka.Error:
				if e.IsFatal() || e.Code() != kafka.ErrTransport && e.Code() != kafka.ErrAllBrokersDown {
					return e
				}
			case nil:
				break poll
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := p.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := ckDeliver(ctx, p, out, batch); err != nil {
			return errors.Join(err, p.AbortTransaction(ctx))
		}
		var offsets []kafka.TopicPartition
		for part, o := range next {
			offsets = append(offsets, kafka.TopicPartition{Topic: &in, Partition: part, Offset: kafka.Offset(o)})
		}
		meta, err := c.GetConsumerGroupMetadata()
		if err != nil {
			return err
		}
		if err := p.SendOffsetsToTransaction(ctx, offsets, meta); err != nil {
			return errors.Join(fmt.Errorf("send offsets: %w", err), p.AbortTransaction(ctx))
		}
		if err := p.CommitTransaction(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		copied += len(batch)
	}
	return nil
}

func (confluentClient) Fence(ctx context.Context, addr, topic, txnID string, first, second, third Rec) (FenceResult, error) {
	var res FenceResult
	a, err := ckTxnProducer(ctx, addr, txnID)
	if err != nil {
		return res, fmt.Errorf("A: %w", err)
	}
	defer a.Close()
	if err := a.BeginTransaction(); err != nil {
		return res, fmt.Errorf("A begin: %w", err)
	}
	if err := ckDeliver(ctx, a, topic, []Rec{first}); err != nil {
		return res, fmt.Errorf("A first write: %w", err)
	}
	b, err := ckTxnProducer(ctx, addr, txnID) // InitTransactions fences A
	if err != nil {
		return res, fmt.Errorf("B: %w", err)
	}
	defer b.Close()
	if err := b.BeginTransaction(); err != nil {
		return res, fmt.Errorf("B begin: %w", err)
	}
	if err := ckDeliver(ctx, b, topic, []Rec{second}); err != nil {
		return res, fmt.Errorf("B write: %w", err)
	}
	if err := b.CommitTransaction(ctx); err != nil {
		return res, fmt.Errorf("B commit: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res.WriteErr = ckDeliver(wctx, a, topic, []Rec{third})
	res.CommitErr = a.CommitTransaction(wctx)
	return res, nil
}

// ckFenced matches librdkafka's fatal error of a fenced transactional producer.
func ckFenced(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke.Code() {
	case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch:
		return true
	}
	return false
}

func (confluentClient) ExpectFenced() (write, commit Expectation) {
	return Expectation{Desc: "delivery report kafka.Error INVALID_PRODUCER_EPOCH (or PRODUCER_FENCED, ERR__FENCED)", Match: ckFenced},
		Expectation{Desc: "CommitTransaction: a fatal kafka.Error ERR__FENCED", Match: func(err error) bool {
			var ke kafka.Error
			return errors.As(err, &ke) && ke.IsFatal() && ke.Code() == kafka.ErrFenced
		}}
}
