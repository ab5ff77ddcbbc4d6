package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/examples/internal/extest"
)

// partitions of the commands and events topics.
const partitions = 4

// TestEventSourcing runs two instances of the program (two processes, exactly_once_v2,
// lookups on ports of their own) against an embedded Gregor node. The first starts alone
// and decides half of a few hundred commands over a handful of accounts, many of them
// invalid (withdrawals beyond the balance, commands on closed and unknown accounts,
// reopenings, bad amounts, unknown kinds, a key that is not the account); the second then
// joins, taking over some of the accounts' tasks, and the rest is sent. The test decides
// every command itself, by the documented rules, and waits until every account's balance,
// asked through BOTH instances' HTTP lookups, is the one it computed (404 for the accounts
// no command opened), with each instance having read some accounts from its own store and
// answered others by forwarding. It stops both with SIGTERM expecting clean exits, then
// reads the events topic whole: exactly one event per command, each account's in the
// order of its commands (but for those keyed wrongly), with the verdict and balance
// computed here. The commands break every rule at least once.
func TestEventSourcing(t *testing.T) {
	bin := extest.Build(t)
	n := embedtest.Start(t, embed.Options{})
	cl := extest.Client(t, n.Addr())
	extest.CreateTopics(t, cl, partitions, nil, "commands", "events")
	start := func() (*extest.Program, string) {
		p := extest.Start(t, bin, "--bootstrap-server", n.Addr(), "--commands", "commands", "--events", "events",
			"--application-id", "bank", "--processing-guarantee", "exactly_once_v2", "--http", "127.0.0.1:0")
		return p, serving(t, p)
	}

	accounts, ghosts := accountNames(t)
	cmds, recs, want := commands(accounts, ghosts)
	broken := map[string]int{} // rule → commands rejected by it
	for _, v := range want.verdicts {
		if !v.accepted {
			broken[v.rule]++
		}
	}
	for _, r := range rules {
		if broken[r] == 0 {
			t.Fatalf("test data: no command is rejected as %s (%v)", r, broken)
		}
	}
	a, addrA := start()
	extest.Produce(t, cl, recs[:len(recs)/2]...)
	b, addrB := start()
	extest.Produce(t, cl, recs[len(recs)/2:]...)

	// Every command decided: as many committed events as commands.
	var seen int
	extest.Await(t, n.Addr(), "events", a, func(*kgo.Record) { seen++ }, func() bool { return seen >= len(cmds) },
		func() string {
			return fmt.Sprintf("%d events of %d commands\ninstance b stderr:\n%s", seen, len(cmds), b.Stderr())
		})

	// Every account through both lookups, until every answer is right and each lookup has
	// read some accounts from its own store and forwarded the others: b may join the group
	// (a rebalance) after the last event is written, and until then a runs every task.
	var wrong []string
	var hosts map[string]map[string]bool // lookup → the hosts that read its answers
	// Polling the condition, with a deadline.
	for deadline := time.Now().Add(extest.Timeout); ; time.Sleep(20 * time.Millisecond) {
		wrong, hosts = nil, map[string]map[string]bool{addrA: {}, addrB: {}}
		for _, addr := range []string{addrA, addrB} {
			for _, acct := range append(slices.Clone(accounts), ghosts...) {
				status, got := getBalance(t, addr, acct)
				exp, ok := want.accounts[acct]
				if ok && (status != http.StatusOK || got.Account != acct || got.Balance.Balance != exp.balance || got.Open != exp.open) ||
					!ok && status != http.StatusNotFound {
					wrong = append(wrong, fmt.Sprintf("GET %s/balance/%s: %d %+v, want %+v (found %v)", addr, acct, status, got, exp, ok))
				}
				hosts[addr][got.Host] = true
			}
		}
		if len(wrong) == 0 && hosts[addrA][addrB] && hosts[addrA][addrA] && hosts[addrB][addrA] && hosts[addrB][addrB] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookups: %q\nread on (lookup → hosts): %v: want each on both\ninstance a:\n%s\ninstance b:\n%s",
				wrong, hosts, a.Stderr(), b.Stderr())
		}
	}
	a.Stop(t)
	b.Stop(t)

	// The event log: exactly one event per command, as decided here.
	got := map[string]Event{}
	last := map[string]int{} // account → index of its latest command in the log so far
	for _, r := range extest.ReadAll(t, n.Addr(), "events") {
		var e Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatalf("event %q: %v", r.Value, err)
		}
		if string(r.Key) != e.Account {
			t.Errorf("event %s keyed %q, of account %q", e.ID, r.Key, e.Account)
		}
		if prev, dup := got[e.ID]; dup {
			t.Errorf("two events of command %s: %+v and %+v", e.ID, prev, e)
		}
		got[e.ID] = e
		i, err := strconv.Atoi(e.ID[1:])
		if err != nil || i >= len(cmds) {
			t.Errorf("event of no command: %+v", e)
			continue
		}
		if want.verdicts[i].rule == "wrong key" {
			continue // decided among another account's commands
		}
		if j, ok := last[e.Account]; ok && i <= j {
			t.Errorf("event %s of account %s after that of command c%d: out of the commands' order", e.ID, e.Account, j)
		}
		last[e.Account] = i
	}
	if len(got) != len(cmds) {
		t.Errorf("%d events of distinct commands, want %d", len(got), len(cmds))
	}
	for i, c := range cmds {
		e, ok := got[c.ID]
		v := want.verdicts[i]
		switch {
		case !ok:
			t.Errorf("command %+v: no event", c)
		case e.Command != c || e.Accepted != v.accepted || e.Balance != v.balance || e.Open != v.open || e.Accepted == (e.Reason != ""):
			t.Errorf("command %+v: event %+v, want accepted %v balance %d open %v", c, e, v.accepted, v.balance, v.open)
		}
	}
	t.Logf("%d commands over %d accounts, rejected: %v", len(cmds), len(accounts)+len(ghosts), broken)
}

// servingLine is the program's announcement of its lookup's address.
var servingLine = regexp.MustCompile(`serving http://(\S+)/balance/`)

// serving waits for p to announce its lookup and returns the address.
func serving(t *testing.T, p *extest.Program) string {
	t.Helper()
	deadline := time.Now().Add(extest.Timeout)
	for time.Now().Before(deadline) {
		if m := servingLine.FindStringSubmatch(p.Stderr()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond) // polling the condition
	}
	t.Fatalf("no lookup announced\n%s", p.Stderr())
	return ""
}

// getBalance asks addr for account's balance.
func getBalance(t *testing.T, addr, account string) (int, Answer) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/balance/" + account)
	if err != nil {
		t.Fatalf("GET %s: %v", account, err)
	}
	defer resp.Body.Close()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("GET %s: %d: %v", account, resp.StatusCode, err)
	}
	return resp.StatusCode, a
}

// accountNames are the accounts that commands open, enough for their keys to cover every
// partition (so each instance runs some of them), and ghosts, accounts no command opens.
func accountNames(t *testing.T) (accounts, ghosts []string) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic("events")
	covered := map[int]bool{}
	for i := 0; len(accounts) < 6 || len(covered) < partitions; i++ {
		if i == 100 {
			t.Fatalf("accounts %v cover partitions %v only", accounts, covered)
		}
		acct := "acct-" + strconv.Itoa(i)
		accounts = append(accounts, acct)
		covered[part.Partition(&kgo.Record{Key: []byte(acct)}, partitions)] = true
	}
	return accounts, []string{"ghost-1", "ghost-2"}
}

// verdict is what the test decides of one command: accepted, or rejected by rule, and the
// account's state after it.
type verdict struct {
	accepted bool
	rule     string
	balance  int64
	open     bool
}

// rules are every rule a command can be rejected by.
var rules = []string{"wrong key", "unknown kind", "opened again", "unknown account", "closed account",
	"beyond the balance", "close with a balance", "bad amount"}

// state is an account as the test keeps it.
type state struct {
	exists, open bool
	balance      int64
}

// expected is the test's own decisions: each command's verdict, and the final state of
// every account some command opened.
type expected struct {
	verdicts []verdict
	accounts map[string]state
}

// commands makes a few hundred commands, reproducibly, with the records that carry them
// (keyed by account, but for a few keyed wrongly), and decides each by the rules the
// program documents: open only an account never opened; deposit and withdraw only on an
// open account, a positive amount, never below zero; close only an open account with a
// zero balance and no amount; any other kind rejected; a command whose key is not its
// account rejected, with no balance (it reached a task that may not hold the account).
func commands(accounts, ghosts []string) ([]Command, []*kgo.Record, expected) {
	rng := rand.New(rand.NewPCG(13, 7))
	all := append(slices.Clone(accounts), ghosts...)
	exp := expected{accounts: map[string]state{}}
	var cmds []Command
	var recs []*kgo.Record
	add := func(acct, kind string, amount int64, key string) {
		c := Command{ID: "c" + strconv.Itoa(len(cmds)), Account: acct, Kind: kind, Amount: amount}
		s := exp.accounts[acct]
		ok := false
		if key == acct {
			switch kind {
			case "open":
				ok = !s.exists && amount >= 0
				if ok {
					s = state{exists: true, open: true, balance: amount}
				}
			case "deposit":
				ok = s.open && amount > 0
				if ok {
					s.balance += amount
				}
			case "withdraw":
				ok = s.open && amount > 0 && amount <= s.balance
				if ok {
					s.balance -= amount
				}
			case "close":
				ok = s.open && amount == 0 && s.balance == 0
				if ok {
					s.open = false
				}
			}
		}
		if s.exists {
			exp.accounts[acct] = s
		}
		v := verdict{accepted: ok, balance: s.balance, open: s.open}
		switch {
		case key != acct:
			v = verdict{rule: "wrong key"} // decided on another account's task: no state to tell
		case ok:
		case !slices.Contains([]string{"open", "deposit", "withdraw", "close"}, kind):
			v.rule = "unknown kind"
		case kind == "open" && s.exists:
			v.rule = "opened again"
		case !s.exists:
			v.rule = "unknown account"
		case !s.open:
			v.rule = "closed account"
		case kind == "withdraw" && amount > s.balance:
			v.rule = "beyond the balance"
		case kind == "close" && s.balance != 0:
			v.rule = "close with a balance"
		default:
			v.rule = "bad amount"
		}
		exp.verdicts = append(exp.verdicts, v)
		cmds = append(cmds, c)
		val, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		recs = append(recs, &kgo.Record{Topic: "commands", Key: []byte(key), Value: val})
	}
	// Open all but the ghosts, one with a bad opening deposit first.
	add(accounts[0], "open", -5, accounts[0])
	for _, acct := range accounts {
		add(acct, "open", rng.Int64N(1000), acct)
	}
	for len(cmds) < 300 {
		acct := all[rng.IntN(len(all))]
		s := exp.accounts[acct]
		switch r := rng.IntN(100); {
		case r < 40:
			add(acct, "deposit", 1+rng.Int64N(500), acct)
		case r < 75: // often beyond the balance
			add(acct, "withdraw", 1+rng.Int64N(800), acct)
		case r < 77: // empty it, then close it: later commands on it are rejected
			if s.balance > 0 {
				add(acct, "withdraw", s.balance, acct)
			}
			add(acct, "close", 0, acct)
		case r < 84:
			add(acct, "open", 100, acct)
		case r < 88:
			add(acct, "close", 0, acct)
		case r < 92:
			add(acct, []string{"deposit", "withdraw"}[rng.IntN(2)], -rng.Int64N(3), acct)
		case r < 95:
			add(acct, "transfer", 10, acct)
		case r < 97:
			add(acct, "close", 5, acct)
		default: // keyed as another account
			add(acct, "deposit", 10, all[(slices.Index(all, acct)+1)%len(all)])
		}
	}
	return cmds, recs, exp
}
