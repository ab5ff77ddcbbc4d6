package metadata

import (
	"maps"
	"testing"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/quota"
)

// The broker's image carries the client quotas the log sets, after a snapshot too, and a
// published table is never changed by a later record.
func TestClientQuotasInImage(t *testing.T) {
	h := newHarness(t)
	name := "app"
	set := func(parts []quota.Part, key string, v float64, remove bool) {
		t.Helper()
		recs, errs := h.c.AlterClientQuotas(state.AlterClientQuotasRequest{Alterations: []state.ClientQuotaAlteration{
			{Entity: parts, Ops: []state.ClientQuotaOp{{Key: key, Value: v, Remove: remove}}},
		}})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		h.apply(recs)
	}
	app := []quota.Part{{Type: quota.TypeClientID, Name: &name}}
	set(app, quota.ProducerByteRate, 1000, false)
	first := h.p.Image().ClientQuotas
	want := quota.Table{{ClientID: quota.Of("app")}: {quota.ProducerByteRate: 1000}}
	if !equalTables(first, want) {
		t.Fatalf("image quotas %v, want %v", first, want)
	}
	h.register(1) // a record that is no quota's keeps the table
	if im := h.p.Image(); len(im.ClientQuotas) != 1 || fmtPtr(im.ClientQuotas) != fmtPtr(first) {
		t.Fatal("an unrelated record rebuilt the quota table")
	}
	set([]quota.Part{{Type: quota.TypeUser}}, quota.ConsumerByteRate, 5, false)
	set(app, quota.ProducerByteRate, 0, true)
	if !equalTables(first, want) {
		t.Fatalf("a published table changed: %v", first)
	}
	want = quota.Table{{User: quota.DefaultName}: {quota.ConsumerByteRate: 5}}
	if got := h.p.Image().ClientQuotas; !equalTables(got, want) {
		t.Fatalf("image quotas %v, want %v", got, want)
	}

	p := NewPublisher()
	if err := p.ApplyBatch([]Entry{{Offset: h.offset, Snapshot: h.c.Snapshot()}}); err != nil {
		t.Fatal(err)
	}
	if got := p.Image().ClientQuotas; !equalTables(got, want) {
		t.Fatalf("quotas after a snapshot %v, want %v", got, want)
	}
}

func equalTables(a, b quota.Table) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]float64) bool { return maps.Equal(x, y) })
}
