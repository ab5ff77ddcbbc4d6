package quota

import (
	"net/netip"
	"testing"
)

func strp(s string) *string { return &s }

func TestResolvePrecedence(t *testing.T) {
	// Kafka's DefaultQuotaCallback order; each step removes the entry that won before.
	entries := []struct {
		e      Entity
		sensor SensorKey
	}{
		{Entity{User: Of("alice"), ClientID: Of("app")}, SensorKey{"alice", "app"}},
		{Entity{User: Of("alice"), ClientID: DefaultName}, SensorKey{"alice", "app"}},
		{Entity{User: Of("alice")}, SensorKey{User: "alice"}},
		{Entity{User: DefaultName, ClientID: Of("app")}, SensorKey{"alice", "app"}},
		{Entity{User: DefaultName, ClientID: DefaultName}, SensorKey{"alice", "app"}},
		{Entity{User: DefaultName}, SensorKey{User: "alice"}},
		{Entity{ClientID: Of("app")}, SensorKey{ClientID: "app"}},
		{Entity{ClientID: DefaultName}, SensorKey{ClientID: "app"}},
	}
	tab := Table{}
	for i, en := range entries {
		tab[en.e] = map[string]float64{ProducerByteRate: float64(i + 1)}
	}
	// Entries that never apply to alice/app.
	tab[Entity{User: Of("bob")}] = map[string]float64{ProducerByteRate: 100}
	tab[Entity{ClientID: Of("other")}] = map[string]float64{ProducerByteRate: 100}
	tab[Entity{IP: DefaultName}] = map[string]float64{ConnectionCreationRate: 100}
	for i, en := range entries {
		limit, sensor, ok := tab.Resolve(ProducerByteRate, "alice", "app")
		if !ok || limit != float64(i+1) || sensor != en.sensor {
			t.Fatalf("step %d (%v): got %v %+v %v, want %d %+v", i, en.e, limit, sensor, ok, i+1, en.sensor)
		}
		if _, _, ok := tab.Resolve(ConsumerByteRate, "alice", "app"); ok {
			t.Fatal("a quota of another key applied")
		}
		delete(tab, en.e)
	}
	if _, _, ok := tab.Resolve(ProducerByteRate, "alice", "app"); ok {
		t.Fatal("a quota applied with no matching entity left")
	}
}

func TestResolveEmptyClientID(t *testing.T) {
	tab := Table{
		{User: DefaultName, ClientID: DefaultName}: {ProducerByteRate: 1},
		{ClientID: DefaultName}:                    {ProducerByteRate: 2},
		{User: Of("alice")}:                        {ProducerByteRate: 3},
	}
	if l, s, _ := tab.Resolve(ProducerByteRate, "alice", ""); l != 3 || s != (SensorKey{User: "alice"}) {
		t.Fatalf("empty client id: got %v %+v, want the user's quota", l, s)
	}
	if _, _, ok := tab.Resolve(ProducerByteRate, "bob", ""); ok {
		t.Fatal("client-id defaults applied to an empty client id")
	}
}

func TestParseEntityAndValidate(t *testing.T) {
	for _, c := range []struct {
		parts []Part
		err   string
	}{
		{nil, "Invalid empty client quota entity"},
		{[]Part{{Type: "group", Name: strp("g")}}, "Unhandled client quota entity type: group"},
		{[]Part{{Type: TypeUser, Name: strp("a")}, {Type: TypeUser}}, "Invalid client quota entity, duplicate entity entry user"},
		{[]Part{{Type: TypeClientID, Name: strp("")}}, "Empty client-id not supported"},
		{[]Part{{Type: TypeIP, Name: strp("10.0.0.1")}, {Type: TypeUser}}, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{[]Part{{Type: TypeIP, Name: strp("not an ip")}}, "not an ip is not a valid IP or resolvable host."},
		{[]Part{{Type: TypeUser, Name: strp("a")}, {Type: TypeClientID}}, ""},
		{[]Part{{Type: TypeIP}}, ""},
	} {
		_, err := ParseEntity(c.parts)
		if got := errText(err); got != c.err {
			t.Errorf("ParseEntity(%v) = %q, want %q", c.parts, got, c.err)
		}
	}
	user := Entity{User: Of("a")}
	ip := Entity{IP: DefaultName}
	for _, c := range []struct {
		e     Entity
		key   string
		value float64
		err   string
	}{
		{user, ProducerByteRate, 1024, ""},
		{user, RequestPercentage, 12.5, ""},
		{user, ProducerByteRate, 10.5, "producer_byte_rate cannot be a fractional value."},
		{user, ConsumerByteRate, 0, "Quota consumer_byte_rate must be greater than 0"},
		{user, ConnectionCreationRate, 5, "Invalid configuration key connection_creation_rate"},
		{user, "bogus", 5, "Invalid configuration key bogus"},
		{ip, ConnectionCreationRate, 5, ""},
		{ip, ConnectionCreationRate, 1e10, "Proposed value for connection_creation_rate is too large for an INT."},
		{user, ControllerMutationRate, 5, "Quota controller_mutation_rate is not enforced by Gregor yet"},
		{ip, ProducerByteRate, 5, "Invalid configuration key producer_byte_rate"},
	} {
		if got := errText(ValidateValue(c.e, c.key, c.value)); got != c.err {
			t.Errorf("ValidateValue(%v, %s, %v) = %q, want %q", c.e, c.key, c.value, got, c.err)
		}
	}
	if s := (Entity{User: Of("a"), ClientID: DefaultName}).String(); s != "user=a, client-id=<default>" {
		t.Fatalf("String = %q", s)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestResolveIP(t *testing.T) {
	ip := func(s string) Entity { return Entity{IP: Of(s)} }
	tab := Table{
		ip("10.0.0.1"):         {ConnectionCreationRate: 5},
		ip("::ffff:10.0.0.2"):  {ConnectionCreationRate: 7},
		{IP: DefaultName}:      {ConnectionCreationRate: 100},
		{User: Of("10.0.0.3")}: {ProducerByteRate: 1},
	}
	for _, c := range []struct {
		addr string
		want float64
	}{{"10.0.0.1", 5}, {"::ffff:10.0.0.1", 5}, {"10.0.0.2", 7}, {"10.0.0.3", 100}} {
		if got, ok := tab.ResolveIP(ConnectionCreationRate, netip.MustParseAddr(c.addr)); !ok || got != c.want {
			t.Errorf("ResolveIP(%s) = %v, %v; want %v", c.addr, got, ok, c.want)
		}
	}
	delete(tab, Entity{IP: DefaultName})
	if _, ok := tab.ResolveIP(ConnectionCreationRate, netip.MustParseAddr("10.0.0.3")); ok {
		t.Error("an address with no entity and no default has a quota")
	}
}
