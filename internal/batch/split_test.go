package batch

import (
	"errors"
	"testing"
	"unsafe"
)

func TestSplitBatches(t *testing.T) {
	var parts [][]byte
	var all []byte
	for i, c := range allCodecs {
		b := mustBuild(t, freshHeader(i+1), sampleRecords(i+1), c)
		parts = append(parts, b)
		all = append(all, b...)
	}
	got, err := Split(all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(parts) {
		t.Fatalf("%d batches, want %d", len(got), len(parts))
	}
	off := 0
	for i := range got {
		if string(got[i]) != string(parts[i]) {
			t.Fatalf("batch %d differs", i)
		}
		if unsafe.SliceData(got[i]) != &all[off] {
			t.Fatalf("batch %d is a copy, not a subslice", i)
		}
		if cap(got[i]) != len(got[i]) {
			t.Fatalf("batch %d: cap %d lets appends clobber the next batch", i, cap(got[i]))
		}
		if _, err := Validate(got[i]); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		off += len(got[i])
	}

	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"cut short":       {all[:len(all)-1], ErrCorrupt},
		"trailing bytes":  {append(all[:len(all):len(all)], 0, 0, 0), ErrCorrupt},
		"tiny length":     {patch(append([]byte(nil), parts[0]...), 8, 10), ErrCorrupt},
		"negative length": {patch(append([]byte(nil), parts[0]...), 8, -100), ErrCorrupt},
		"magic 3":         {patchByte(append([]byte(nil), parts[0]...), 16, 3), ErrUnsupportedMagic},
		"then legacy":     {append(append([]byte(nil), parts[0]...), v1Message(0, 0, 1, nil, make([]byte, 100))...), ErrCorrupt},
	} {
		if _, err := Split(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if got, err := Split(nil); got != nil || err != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
}

func TestSplitLegacy(t *testing.T) {
	set := append(v1Message(0, 0, 1, []byte("k"), []byte("v")), v1Message(1, 0, 2, nil, []byte("w"))...)
	got, err := Split(set)
	if err != nil || len(got) != 1 || len(got[0]) != len(set) {
		t.Fatalf("legacy set: %d parts, %v", len(got), err)
	}
	if m, err := Magic(got[0]); m != 1 || err != nil {
		t.Fatalf("Magic = %d, %v", m, err)
	}
	if _, err := Split(set[:len(set)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cut legacy set: %v", err)
	}
	mixed := append(v0Message(0, 0, nil, []byte("a")), set...)
	if _, err := Split(mixed); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("mixed magic: %v", err)
	}
	b := mustBuild(t, freshHeader(1), sampleRecords(1), CodecNone)
	if _, err := Split(append(set[:len(set):len(set)], b...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("legacy then v2: %v", err)
	}
}

func TestMagic(t *testing.T) {
	b := mustBuild(t, freshHeader(1), sampleRecords(1), CodecNone)
	if m, err := Magic(b); m != 2 || err != nil {
		t.Fatalf("%d %v", m, err)
	}
	if _, err := Magic(b[:16]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short: %v", err)
	}
	b[16] = 0xff
	if m, err := Magic(b); m != -1 || !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("magic -1: %d %v", m, err)
	}
}
