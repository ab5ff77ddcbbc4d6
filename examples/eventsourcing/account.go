package main

import (
	"fmt"
	"math"
)

// Command is one record of the commands topic: what a client asks of an account. Amounts
// are integers in the currency's smallest unit (cents).
type Command struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Kind    string `json:"kind"` // open, deposit, withdraw or close
	Amount  int64  `json:"amount"`
}

// The kinds of command.
const (
	Open     = "open"
	Deposit  = "deposit"
	Withdraw = "withdraw"
	Close    = "close"
)

// Account is an account's state: the value of the accounts store, which the processor
// validates commands against. An account not in the store was never opened.
type Account struct {
	Open    bool  `json:"open"`
	Balance int64 `json:"balance"`
}

// Event is one record of the events topic: the verdict on one command. An accepted event
// carries the account's state after the command; a rejected one, its unchanged state and
// the reason.
type Event struct {
	Command
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Balance  int64  `json:"balance"`
	Open     bool   `json:"open"`
}

// Decide validates c against the account's state acc (exists is false for an account never
// opened) and returns the event and the account's new state. It is deterministic: replaying
// the commands replays the events. The rules:
//
//   - open: the account must never have been opened (a closed account stays closed); the
//     amount, at least 0, is the opening deposit.
//   - deposit and withdraw: the account must be open and the amount more than 0; a
//     withdrawal may not take the balance below 0 (insufficient funds), a deposit may not
//     overflow it.
//   - close: the account must be open, its balance 0, and the amount 0.
func Decide(c Command, acc Account, exists bool) (Event, Account) {
	reject := func(format string, args ...any) (Event, Account) {
		return Event{Command: c, Reason: fmt.Sprintf(format, args...), Balance: acc.Balance, Open: acc.Open}, acc
	}
	switch c.Kind {
	case Open, Deposit, Withdraw, Close:
	default:
		return reject("unknown kind %q", c.Kind)
	}
	if c.Kind == Open {
		switch {
		case exists && acc.Open:
			return reject("account already open")
		case exists:
			return reject("account closed")
		case c.Amount < 0:
			return reject("negative opening deposit")
		}
		acc = Account{Open: true, Balance: c.Amount}
		return Event{Command: c, Accepted: true, Balance: acc.Balance, Open: true}, acc
	}
	switch {
	case !exists:
		return reject("unknown account")
	case !acc.Open:
		return reject("account closed")
	}
	switch c.Kind {
	case Deposit:
		switch {
		case c.Amount <= 0:
			return reject("amount must be positive")
		case c.Amount > math.MaxInt64-acc.Balance:
			return reject("balance overflow")
		}
		acc.Balance += c.Amount
	case Withdraw:
		switch {
		case c.Amount <= 0:
			return reject("amount must be positive")
		case c.Amount > acc.Balance:
			return reject("insufficient funds: balance %d", acc.Balance)
		}
		acc.Balance -= c.Amount
	case Close:
		switch {
		case c.Amount != 0:
			return reject("close takes no amount")
		case acc.Balance != 0:
			return reject("balance not zero: %d", acc.Balance)
		}
		acc.Open = false
	}
	return Event{Command: c, Accepted: true, Balance: acc.Balance, Open: acc.Open}, acc
}
