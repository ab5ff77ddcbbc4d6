package streams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runExactlyOnce is the stream thread under exactly_once_v2 (KIP-447): one transactional
// producer, whose transactions carry both what the tasks produced (output, repartition and
// changelog records) and the input offsets they consumed, so all of it commits or none does.
//
// Invariants:
//   - A transaction is open from Begin to End; tasks process and punctuate only inside one.
//   - Stores hold exactly the effects of committed transactions plus the open one. When a
//     transaction aborts (a rebalance during it, a failed offset commit), the stores hold
//     effects that never happened: every task is dropped and remade from the committed
//     changelogs, and the consumer goes back to the committed offsets (the session resets
//     them), so the input is processed again on the restored state.
//   - Tasks are created between transactions (rebuild), never in a group callback, so a
//     restore never waits for this member's own open transaction.
func (a *App) runExactlyOnce(ctx context.Context) error {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("streams: transactional id: %w", err)
	}
	opts := append(a.clientOpts(),
		kgo.TransactionalID(a.cfg.ApplicationID+"-"+hex.EncodeToString(id[:])),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.TransactionTimeout(a.cfg.TransactionTimeout),
	)
	s, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("streams: transactional client: %w", err)
	}
	a.client = s.Client()
	if err := s.Begin(); err != nil {
		s.Close()
		return fmt.Errorf("streams: begin transaction: %w", err)
	}
	before := func(ctx context.Context) (bool, error) {
		a.mu.Lock()
		rebuild := a.mu.rebuild
		a.mu.Unlock()
		if !rebuild {
			return false, nil
		}
		return true, a.rebuild(ctx, s)
	}
	commit := func(ctx context.Context) error {
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("streams: commit transaction: %w", err)
		}
		if committed {
			a.transactionCommitted()
		} else {
			a.log.Warn("streams: transaction aborted; restoring the tasks from their changelogs")
			a.mu.Lock()
			a.mu.rebuild = true
			a.mu.Unlock()
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("streams: begin transaction: %w", err)
		}
		return nil
	}
	err = a.loop(ctx, s.PollRecords, s.AllowRebalance, before, commit)
	// A clean stop commits what was processed; a stop that cut an abort or a commit short
	// aborts (what was polled may not all be processed).
	try := kgo.TryCommit
	if errors.Is(err, errStopping) {
		try, err = kgo.TryAbort, nil
	}
	if err != nil && !errors.Is(err, ErrApplicationShutdown) {
		try = kgo.TryAbort // a failed thread's work is undone
	}
	a.dirtyUnless(err)
	var ferr error
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ok, cerr := s.End(cctx, try)
	if cerr != nil {
		ferr = fmt.Errorf("streams: end transaction: %w", cerr)
	}
	cancel()
	// Only a committed last transaction leaves the stores holding committed state alone:
	// then the tasks close with a checkpoint, else without, and their stores are wiped and
	// restored when they open again.
	committed := ok && cerr == nil && try == kgo.TryCommit
	ferr = errors.Join(ferr, a.finish(a.client, committed))
	s.CloseAllowingRebalance()
	return errors.Join(err, ferr)
}

// rebuild aborts the open transaction (the session moves the consumer back to the committed
// offsets, dropping what was polled), remakes every task of the current assignment from the
// committed changelogs, and begins a new transaction. A task whose persistent stores took
// no write in the aborted transaction closes with a checkpoint, so it restores only the
// changelog's tail; the others are wiped and restored whole.
func (a *App) rebuild(ctx context.Context, s *kgo.GroupTransactSession) error {
	if _, err := s.End(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("streams: abort transaction: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for id, tk := range a.mu.tasks {
		a.queryUnpublish(id)
		a.mu.dropped += tk.dropped
		a.mu.skipped += tk.skipped
		if a.committedLocked(tk) {
			errs = append(errs, a.checkpointTask(tk, true))
		}
		errs = append(errs, tk.close())
		delete(a.mu.tasks, id)
	}
	ps := map[string][]int32{}
	for topic, parts := range a.mu.assigned {
		for p := range parts {
			ps[topic] = append(ps[topic], p)
		}
	}
	a.mu.rebuild = false
	if _, err := a.createTasksLocked(ctx, s.Client(), ps); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.Begin(); err != nil {
		return fmt.Errorf("streams: begin transaction: %w", err)
	}
	return nil
}
