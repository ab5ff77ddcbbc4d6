package main

import (
	"fmt"

	"github.com/gregor-project/gregor/streams"
)

// AccountsStore is the processor's store: account → Account, changelogged to
// <application.id>-accounts-changelog, so a task moved to another instance validates
// against the same state.
const AccountsStore = "accounts"

// validator decides each command against its account's state in the accounts store and
// forwards the event, keyed by account. A command's record key must be its account (so
// every command of an account reaches the same task, in order); one that is not is
// rejected without touching any state, its event telling no balance (0, not open); keyed
// by the account it names, that event may stand out of order among the account's own,
// which changes no balance (the balances take accepted events only).
type validator struct {
	ctx      streams.ProcessorContext[string, Event]
	accounts streams.KeyValueStore[string, Account]
}

func (v *validator) Init(ctx streams.ProcessorContext[string, Event]) error {
	s, err := streams.GetKeyValueStore[string, Account](ctx, AccountsStore)
	v.ctx, v.accounts = ctx, s
	return err
}

func (v *validator) Process(r streams.Record[string, Command]) error {
	c := r.Value
	var e Event
	if r.Key != c.Account {
		e = Event{Command: c, Reason: fmt.Sprintf("record key %q is not the account", r.Key)}
	} else {
		acc, exists, err := v.accounts.Get(c.Account)
		if err != nil {
			return err
		}
		var next Account
		e, next = Decide(c, acc, exists)
		if e.Accepted {
			if err := v.accounts.Put(c.Account, next); err != nil {
				return err
			}
		}
	}
	return v.ctx.Forward(streams.Record[string, Event]{Key: c.Account, Value: e, Timestamp: r.Timestamp, Headers: r.Headers})
}

func (v *validator) Close() error { return nil }
