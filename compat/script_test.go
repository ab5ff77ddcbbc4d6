package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gregor-project/gregor/compat"
)

// scriptClient drives a client written in another language through a small script in this
// directory: `<interpreter> <script> <op>` reads a JSON request on stdin and writes a JSON
// response on stdout (see scriptRequest and scriptResponse). An error the client reported
// comes back as the response's error; a crash is a non-zero exit.
type scriptClient struct {
	info   compat.ClientInfo
	caps   Caps
	argv   []string // interpreter and script, relative to compat/
	env    []string
	extra  map[string]any // sent with every request (e.g. api_version)
	expect map[string]Expectation
	noOps  map[string]string // op -> why the client has no such feature
	// fenced is what the client reports for a fenced producer's write and commit (TxnClient).
	fenced [2]Expectation
	// jvm, when set, runs the ops in a long-running process instead of one process per op
	// (argv is unused then).
	jvm *jvmServer
}

// scriptRequest is what a script reads.
type scriptRequest struct {
	Addr      string         `json:"addr"`
	Topic     string         `json:"topic,omitempty"`
	Codec     string         `json:"codec,omitempty"`
	Records   []Rec          `json:"records,omitempty"`
	N         int            `json:"n,omitempty"`
	Partition int32          `json:"partition"`
	Offset    int64          `json:"offset,omitempty"`
	Low       int64          `json:"low,omitempty"`
	High      int64          `json:"high,omitempty"`
	Timestamp int64          `json:"timestamp,omitempty"`
	Group     string         `json:"group,omitempty"`
	Config    string         `json:"config,omitempty"`
	Timeout   float64        `json:"timeout,omitempty"` // seconds the script may wait for records
	Extra     map[string]any `json:"extra,omitempty"`
	// Security is how to connect to a secured listener at Addr (see secConn.script): protocol,
	// mechanism, username, password and PEM files ca, cert, key; absent for PLAINTEXT.
	Security map[string]string `json:"security,omitempty"`
	// The transactional ops (see TxnClient).
	TransactionalID string `json:"transactional_id,omitempty"`
	Commit          bool   `json:"commit,omitempty"`
	ReadCommitted   bool   `json:"read_committed,omitempty"`
	Output          string `json:"output,omitempty"` // transform: the topic written
}

// scriptResponse is what a script writes.
type scriptResponse struct {
	Records []Rec        `json:"records"`
	Admin   *AdminResult `json:"admin"`
	Members []struct {
		Assigned []int32 `json:"assigned"`
		Records  []Rec   `json:"records"`
	} `json:"members"`
	Version string       `json:"version"`
	Error   *scriptError `json:"error"`
	// calls: what each Admin call of the Java driver's admin-tour answered ("ok" or the error).
	Calls map[string]string `json:"calls"`
	// fence: what the fenced producer's write and commit reported (null: they succeeded).
	Fence *struct {
		Write  *scriptError `json:"write"`
		Commit *scriptError `json:"commit"`
	} `json:"fence"`
}

// scriptError is an error the client reported: its type (class or name), Kafka error code
// or name where it has one, and message.
type scriptError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *scriptError) Error() string {
	return fmt.Sprintf("%s (code %s): %s", e.Type, e.Code, e.Message)
}

// compatDir is this package's directory (scripts are found relative to it).
func compatDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

func (c *scriptClient) call(ctx context.Context, op string, req scriptRequest) (*scriptResponse, error) {
	if why, ok := c.noOps[op]; ok {
		return nil, notSupported("%s", why)
	}
	req.Extra = c.extra
	req.Security = secured(req.Addr).script()
	if d, ok := ctx.Deadline(); ok {
		// The script gives up waiting for records before it would be killed, so that it can
		// report what the client said meanwhile. The margin also covers the interpreter's
		// start, the client's bootstrap and its close, which on a loaded machine can take
		// more than the 2 s it used to be (the zstd-topic step of kafka-python, 10 s in all,
		// ends on the script's own timeout).
		left := time.Until(d)
		req.Timeout = max(1, (left - min(5*time.Second, left/2)).Seconds())
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp scriptResponse
	if c.jvm != nil {
		out, err := c.jvm.do(ctx, op, in)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			return nil, fmt.Errorf("java %s: response: %w\n%s", op, err, tail(string(out), 2000))
		}
	} else {
		args := append(append([]string(nil), c.argv[1:]...), op)
		cmd := exec.CommandContext(ctx, c.argv[0], args...)
		cmd.Dir = compatDir()
		cmd.Env = append(cmd.Environ(), c.env...)
		cmd.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s %s: %w\n%s", strings.Join(c.argv, " "), op, err, tail(errb.String(), 3000))
		}
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			return nil, fmt.Errorf("%s %s: response: %w\n%s\n%s", strings.Join(c.argv, " "), op, err, tail(out.String(), 2000), tail(errb.String(), 2000))
		}
	}
	if resp.Error != nil {
		return &resp, resp.Error
	}
	return &resp, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (c *scriptClient) Info() compat.ClientInfo {
	info := c.info
	if resp, err := c.call(context.Background(), "version", scriptRequest{}); err == nil {
		info.Version = resp.Version
	} else {
		info.Version = "unavailable: " + strings.SplitN(err.Error(), "\n", 2)[0]
	}
	return info
}

func (c *scriptClient) Caps() Caps { return c.caps }

func (c *scriptClient) Admin(ctx context.Context, addr, topic string) (AdminResult, error) {
	resp, err := c.call(ctx, "admin", scriptRequest{Addr: addr, Topic: topic, Config: retentionValue})
	if err != nil {
		return AdminResult{}, err
	}
	if resp.Admin == nil {
		return AdminResult{}, fmt.Errorf("admin: no result")
	}
	return *resp.Admin, nil
}

func (c *scriptClient) Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	_, err := c.call(ctx, "produce", scriptRequest{Addr: addr, Topic: topic, Codec: codec, Records: recs})
	return err
}

func (c *scriptClient) records(ctx context.Context, op string, req scriptRequest) ([]Rec, error) {
	resp, err := c.call(ctx, op, req)
	if resp == nil {
		return nil, err
	}
	return resp.Records, err
}

func (c *scriptClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	return c.records(ctx, "consume", scriptRequest{Addr: addr, Topic: topic, N: n})
}

func (c *scriptClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	resp, err := c.call(ctx, "group", scriptRequest{Addr: addr, Topic: topic, Group: group, Records: recs})
	if err != nil {
		return members, err
	}
	if len(resp.Members) != 2 {
		return members, fmt.Errorf("group: %d members reported", len(resp.Members))
	}
	for i, m := range resp.Members {
		members[i] = Member{Assigned: m.Assigned, Records: m.Records}
	}
	return members, nil
}

func (c *scriptClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return c.records(ctx, "seek-offset", scriptRequest{Addr: addr, Topic: topic, Partition: partition, Offset: offset, N: n})
}

func (c *scriptClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	return c.records(ctx, "seek-time", scriptRequest{Addr: addr, Topic: topic, Partition: partition, Timestamp: ts, N: n})
}

func (c *scriptClient) ProduceUnknown(ctx context.Context, addr, topic string) error {
	_, err := c.call(ctx, "produce-unknown", scriptRequest{Addr: addr, Topic: topic, Codec: "none",
		Records: []Rec{{Partition: -1, Key: []byte("k"), Value: []byte("v")}}})
	return err
}

func (c *scriptClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, low, high int64, n int) ([]Rec, error) {
	return c.records(ctx, "out-of-range", scriptRequest{Addr: addr, Topic: topic, Partition: partition, Low: low, High: high, N: n})
}

func (c *scriptClient) ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error {
	_, err := c.call(ctx, "produce", scriptRequest{Addr: addr, Topic: topic, Codec: "none", Records: []Rec{rec}})
	return err
}

func (c *scriptClient) Expect(kind string) Expectation { return c.expect[kind] }

// scriptErr matches a scriptError whose type and code contain the given strings.
func scriptErr(typ, code string) func(error) bool {
	return func(err error) bool {
		se, ok := err.(*scriptError)
		return ok && strings.Contains(se.Type, typ) && strings.Contains(se.Code, code)
	}
}

// --- the transactional ops (TxnClient) ---

func (c *scriptClient) TxnProduce(ctx context.Context, addr, topic, txnID string, recs []Rec, commit bool) error {
	_, err := c.call(ctx, "txn-produce", scriptRequest{Addr: addr, Topic: topic, Records: recs, TransactionalID: txnID, Commit: commit})
	return err
}

func (c *scriptClient) TxnConsume(ctx context.Context, addr, topic string, n int, committed bool) ([]Rec, error) {
	return c.records(ctx, "txn-consume", scriptRequest{Addr: addr, Topic: topic, N: n, ReadCommitted: committed})
}

func (c *scriptClient) Transform(ctx context.Context, addr, in, out, group, txnID string, n int) error {
	_, err := c.call(ctx, "transform", scriptRequest{Addr: addr, Topic: in, Output: out, Group: group, TransactionalID: txnID, N: n})
	return err
}

func (c *scriptClient) Fence(ctx context.Context, addr, topic, txnID string, first, second, third Rec) (FenceResult, error) {
	var res FenceResult
	resp, err := c.call(ctx, "fence", scriptRequest{Addr: addr, Topic: topic, TransactionalID: txnID, Records: []Rec{first, second, third}})
	if err != nil {
		return res, err
	}
	if resp.Fence == nil {
		return res, fmt.Errorf("fence: no result")
	}
	if resp.Fence.Write != nil {
		res.WriteErr = resp.Fence.Write
	}
	if resp.Fence.Commit != nil {
		res.CommitErr = resp.Fence.Commit
	}
	return res, nil
}

func (c *scriptClient) ExpectFenced() (write, commit Expectation) { return c.fenced[0], c.fenced[1] }
