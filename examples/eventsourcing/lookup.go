package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// BalancesStore is the balances table's store: account → Balance, the latest accepted
// event of each account.
const BalancesStore = "balances"

// Balance is a value of the balances table.
type Balance struct {
	Account string `json:"account"`
	Balance int64  `json:"balance"`
	Open    bool   `json:"open"`
}

// Answer is the lookup's JSON answer: the balance, or an error, and the instance
// (application.server) that read it from its store.
type Answer struct {
	Balance
	Error string `json:"error,omitempty"`
	Host  string `json:"host"`
}

// forwardedHeader marks a request one instance forwarded to another, which answers it
// from its own store or not at all: instances that disagree for a moment about where a
// key lives (a rebalance) never pass a request back and forth.
const forwardedHeader = "X-Forwarded-From"

// lookup serves GET /balance/{account} through interactive queries: the key's partition
// and the instance running its task come from MetadataForKey; this instance reads its own
// store instance of that partition, and forwards the request to the one that runs it
// otherwise. While the application rebalances or restores, it answers 503 (retry).
type lookup struct {
	app    *streams.App
	self   string // this instance's application.server
	client *http.Client
}

func (l *lookup) balance(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("account")
	md, err := streams.MetadataForKey(l.app, BalancesStore, account, serde.String)
	if err != nil {
		l.answer(w, http.StatusServiceUnavailable, Answer{Balance: Balance{Account: account}, Error: err.Error()})
		return
	}
	if host := md.Active.String(); host != l.self {
		if from := r.Header.Get(forwardedHeader); from != "" {
			l.answer(w, http.StatusServiceUnavailable, Answer{Balance: Balance{Account: account},
				Error: "forwarded by " + from + " but the account's task runs on " + host})
			return
		}
		l.forward(w, r, host, account)
		return
	}
	balances, err := streams.Store[string, Balance](l.app, BalancesStore, streams.InPartition(md.Partition))
	var b Balance
	var found bool
	if err == nil {
		b, found, err = balances.Get(account)
	}
	switch {
	case errors.Is(err, streams.ErrInvalidStateStore):
		l.answer(w, http.StatusServiceUnavailable, Answer{Balance: Balance{Account: account}, Error: err.Error()})
	case err != nil:
		l.answer(w, http.StatusInternalServerError, Answer{Balance: Balance{Account: account}, Error: err.Error()})
	case !found:
		l.answer(w, http.StatusNotFound, Answer{Balance: Balance{Account: account}, Error: "unknown account"})
	default:
		l.answer(w, http.StatusOK, Answer{Balance: b})
	}
}

// forward asks the instance at host and passes its answer on as it is.
func (l *lookup) forward(w http.ResponseWriter, r *http.Request, host, account string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+host+"/balance/"+url.PathEscape(account), nil)
	if err != nil {
		l.answer(w, http.StatusInternalServerError, Answer{Balance: Balance{Account: account}, Error: err.Error()})
		return
	}
	req.Header.Set(forwardedHeader, l.self)
	resp, err := l.client.Do(req)
	if err != nil {
		l.answer(w, http.StatusBadGateway, Answer{Balance: Balance{Account: account}, Error: err.Error()})
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (l *lookup) answer(w http.ResponseWriter, status int, a Answer) {
	a.Host = l.self
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
