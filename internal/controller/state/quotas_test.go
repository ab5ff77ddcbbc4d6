package state

import (
	"errors"
	"maps"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/quota"
)

func sp(s string) *string { return &s }

func userPart(name string) quota.Part   { return quota.Part{Type: quota.TypeUser, Name: sp(name)} }
func clientPart(name string) quota.Part { return quota.Part{Type: quota.TypeClientID, Name: sp(name)} }

func TestClientQuotaRecordRoundTrip(t *testing.T) {
	recs := []Record{
		&ClientQuotaRecord{Entity: []quota.Part{userPart("alice"), {Type: quota.TypeClientID}}, Key: quota.ProducerByteRate, Value: 1048576},
		&ClientQuotaRecord{Entity: []quota.Part{{Type: quota.TypeIP, Name: sp("10.0.0.1")}}, Key: quota.ConnectionCreationRate, Remove: true},
		&ClientQuotaRecord{Entity: []quota.Part{clientPart("c")}, Key: quota.RequestPercentage, Value: 12.25},
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, recs)
	}
	// Truncated anywhere, the record is corrupt, never a panic.
	b := EncodeBatch(recs[:1])
	for n := 3; n < len(b); n++ {
		if _, err := DecodeBatch(b[:n]); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("%d of %d bytes: %v", n, len(b), err)
		}
	}
}

func TestAlterClientQuotas(t *testing.T) {
	h := newHarness(t)
	alice := []quota.Part{userPart("alice")}
	aliceApp := []quota.Part{userPart("alice"), clientPart("app")}
	clientDefault := []quota.Part{{Type: quota.TypeClientID}}
	run := func(validateOnly bool, as ...ClientQuotaAlteration) []error {
		t.Helper()
		recs, errs := h.c.AlterClientQuotas(AlterClientQuotasRequest{Alterations: as, ValidateOnly: validateOnly})
		if validateOnly && len(recs) > 0 {
			t.Fatalf("validate_only wrote %d records", len(recs))
		}
		h.apply(recs)
		return errs
	}
	set := func(k string, v float64) ClientQuotaOp { return ClientQuotaOp{Key: k, Value: v} }

	// validate_only checks and writes nothing.
	if errs := run(true, ClientQuotaAlteration{Entity: alice, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 1024)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if len(h.c.Image().ClientQuotas()) != 0 {
		t.Fatal("validate_only changed the image")
	}
	errs := run(false,
		ClientQuotaAlteration{Entity: alice, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 1024), set(quota.RequestPercentage, 50)}},
		ClientQuotaAlteration{Entity: aliceApp, Ops: []ClientQuotaOp{set(quota.ConsumerByteRate, 2048)}},
		ClientQuotaAlteration{Entity: clientDefault, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 10.5)}},
		ClientQuotaAlteration{Entity: []quota.Part{clientPart("x")}, Ops: []ClientQuotaOp{set("bogus", 1)}},
		ClientQuotaAlteration{Entity: alice, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 1)}},
		ClientQuotaAlteration{Entity: []quota.Part{clientPart("y")}, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 1), set(quota.ProducerByteRate, 2)}},
	)
	want := []string{
		"",
		"",
		"producer_byte_rate cannot be a fractional value.",
		"Invalid configuration key bogus",
		"Ignoring duplicate entity user=alice",
		"Duplicate quota key producer_byte_rate not updating quota for this entity client-id=y",
	}
	for i, err := range errs {
		got := ""
		if err != nil {
			got = err.Error()
			if !errors.Is(err, kerr.InvalidRequest) {
				t.Errorf("alteration %d: %v is not INVALID_REQUEST", i, err)
			}
		}
		if got != want[i] {
			t.Errorf("alteration %d: %q, want %q", i, got, want[i])
		}
	}
	tab := h.c.Image().ClientQuotas()
	wantTab := quota.Table{
		{User: quota.Of("alice")}:                            {quota.ProducerByteRate: 1024, quota.RequestPercentage: 50},
		{User: quota.Of("alice"), ClientID: quota.Of("app")}: {quota.ConsumerByteRate: 2048},
	}
	if !equalTables(tab, wantTab) {
		t.Fatalf("quotas %v, want %v", tab, wantTab)
	}

	// The same value again writes nothing; removing a key not set writes nothing.
	recs, errs := h.c.AlterClientQuotas(AlterClientQuotasRequest{Alterations: []ClientQuotaAlteration{
		{Entity: alice, Ops: []ClientQuotaOp{set(quota.ProducerByteRate, 1024), {Key: quota.ConsumerByteRate, Remove: true}}},
	}})
	if errs[0] != nil || len(recs) != 0 {
		t.Fatalf("no-op alteration: %v, %d records", errs[0], len(recs))
	}

	// A snapshot carries the quotas; replaying the log rebuilds the same table.
	im, err := Restore(h.c.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !equalTables(im.ClientQuotas(), wantTab) {
		t.Fatalf("restored quotas %v", im.ClientQuotas())
	}
	replayed := NewImage()
	for i, batch := range h.log {
		if err := replayed.Apply(int64(i+1), batch); err != nil {
			t.Fatal(err)
		}
	}
	if !equalTables(replayed.ClientQuotas(), wantTab) {
		t.Fatalf("replayed quotas %v", replayed.ClientQuotas())
	}

	// Removing an entity's last key removes the entity; the key map handed out before stays.
	held := tab[quota.Entity{User: quota.Of("alice"), ClientID: quota.Of("app")}]
	run(false, ClientQuotaAlteration{Entity: aliceApp, Ops: []ClientQuotaOp{{Key: quota.ConsumerByteRate, Remove: true}}})
	if _, ok := h.c.Image().ClientQuotas()[quota.Entity{User: quota.Of("alice"), ClientID: quota.Of("app")}]; ok {
		t.Fatal("an entity without keys stayed")
	}
	if len(held) != 1 {
		t.Fatal("a change modified a key map handed out earlier")
	}
}

func TestApplyRejectsBadClientQuota(t *testing.T) {
	im := NewImage()
	for _, r := range []*ClientQuotaRecord{
		{Key: quota.ProducerByteRate, Value: 1},
		{Entity: []quota.Part{{Type: "group"}}, Key: quota.ProducerByteRate, Value: 1},
		{Entity: []quota.Part{userPart("a")}, Value: 1},
	} {
		if err := im.Apply(1, []Record{r}); !errors.Is(err, ErrRecordRejected) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func equalTables(a, b quota.Table) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]float64) bool { return maps.Equal(x, y) })
}
