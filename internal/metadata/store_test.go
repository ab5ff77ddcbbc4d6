package metadata

import (
	"errors"
	"testing"
)

// Every change is persisted before it is visible, and survives a reopen; producer ids are
// never handed out twice, even across reopens.
func TestStorePersistsChanges(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateTopic(Topic{Name: "a", Partitions: 2, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic(Topic{Name: "a", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := s.SetPartitions("a", 2); !errors.Is(err, ErrPartitions) {
		t.Fatalf("not growing: %v", err)
	}
	if _, err := s.SetPartitions("a", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic(Topic{Name: "b", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTopic("b"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := s.SetBrokerConfigs(map[string]string{"log.retention.ms": "9"}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := 0; i < 1500; i++ {
		id, err := s.NextProducerID()
		if err != nil || seen[id] {
			t.Fatalf("producer id %d: %v (seen %v)", id, err, seen[id])
		}
		seen[id] = true
	}

	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	im := r.Image()
	got := im.Topic("a")
	if got == nil || got.Partitions != 4 || got.ID != a.ID || got.Configs["retention.ms"] != "5" || im.Topic("b") != nil {
		t.Fatalf("after reopen: %+v, b=%v", got, im.Topic("b"))
	}
	if im.TopicByID(a.ID) != got || im.BrokerConfigs["log.retention.ms"] != "9" {
		t.Fatal("lookup by id or broker configs lost")
	}
	for i := 0; i < 10; i++ {
		id, err := r.NextProducerID()
		if err != nil || seen[id] {
			t.Fatalf("producer id %d reused after reopen: %v", id, err)
		}
	}
}
