package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPIsTable checks what a handler's table answers: the range of a served key, not-ok
// and -1 for an unserved one, and the ApiVersions listing in key order.
func TestAPIsTable(t *testing.T) {
	table := APIs[string]{
		kmsg.Fetch.Int16():       {Min: 4, Max: 17, Handle: "fetch"},
		kmsg.ApiVersions.Int16(): {Min: 0, Max: 3, Handle: "apiversions"},
		kmsg.Produce.Int16():     {Min: 0, Max: 12, Handle: "produce"},
	}
	if lo, hi, ok := table.Versions(kmsg.Fetch.Int16()); !ok || lo != 4 || hi != 17 {
		t.Fatalf("Versions(Fetch) = %d, %d, %v; want 4, 17, true", lo, hi, ok)
	}
	if _, _, ok := table.Versions(kmsg.Metadata.Int16()); ok {
		t.Fatal("Versions(Metadata) ok for an unserved key")
	}
	if got := table.MaxVersion(kmsg.Produce.Int16()); got != 12 {
		t.Fatalf("MaxVersion(Produce) = %d, want 12", got)
	}
	if got := table.MaxVersion(kmsg.Metadata.Int16()); got != -1 {
		t.Fatalf("MaxVersion(Metadata) = %d, want -1", got)
	}
	keys := table.ApiKeys()
	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: kmsg.Produce.Int16(), MinVersion: 0, MaxVersion: 12},
		{ApiKey: kmsg.Fetch.Int16(), MinVersion: 4, MaxVersion: 17},
		{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: 0, MaxVersion: 3},
	}
	if len(keys) != len(want) {
		t.Fatalf("ApiKeys = %+v, want %+v", keys, want)
	}
	for i := range want {
		if keys[i].ApiKey != want[i].ApiKey || keys[i].MinVersion != want[i].MinVersion || keys[i].MaxVersion != want[i].MaxVersion {
			t.Fatalf("ApiKeys = %+v, want %+v", keys, want)
		}
	}
}
