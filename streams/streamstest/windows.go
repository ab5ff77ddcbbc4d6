package streamstest

import "github.com/gregor-project/gregor/streams"

// WindowStore is the topology's store of sliding windows name.
func WindowStore[K, V any](d *Driver, name string) streams.WindowStore[K, V] {
	d.t.Helper()
	s, err := d.d.Store(name)
	if err != nil {
		d.t.Fatalf("streamstest: %v", err)
	}
	ws, ok := s.(streams.WindowStore[K, V])
	if !ok {
		d.t.Fatalf("streamstest: store %q is %T", name, s)
	}
	return ws
}

// SessionStore is the topology's session store name.
func SessionStore[K, V any](d *Driver, name string) streams.SessionStore[K, V] {
	d.t.Helper()
	s, err := d.d.Store(name)
	if err != nil {
		d.t.Fatalf("streamstest: %v", err)
	}
	ss, ok := s.(streams.SessionStore[K, V])
	if !ok {
		d.t.Fatalf("streamstest: store %q is %T", name, s)
	}
	return ss
}
