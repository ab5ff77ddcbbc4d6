package batch

import (
	"bytes"
	"testing"
)

func TestPatchOffsetAndEpochKeepsCRC(t *testing.T) {
	for _, c := range allCodecs {
		b := mustBuild(t, freshHeader(10), sampleRecords(10), c)
		crc := append([]byte(nil), b[17:21]...)
		SetBaseOffset(b, 1<<50+3)
		SetPartitionLeaderEpoch(b, 77)
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if h.BaseOffset != 1<<50+3 || h.PartitionLeaderEpoch != 77 || h.LastOffset() != 1<<50+12 {
			t.Fatalf("%v: header %+v", c, h)
		}
		if !bytes.Equal(crc, b[17:21]) {
			t.Fatalf("%v: crc bytes changed", c)
		}
	}
}

func TestSetLogAppendTime(t *testing.T) {
	for _, c := range allCodecs {
		recs := sampleRecords(10)
		orig := mustBuild(t, freshHeader(10), recs, c)
		b := bytes.Clone(orig)
		SetLogAppendTime(b, 1_800_000_000_000)
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if h.Attributes&AttrLogAppendTime == 0 || h.Codec() != c || h.MaxTimestamp != 1_800_000_000_000 {
			t.Fatalf("%v: header %+v", c, h)
		}
		if h.BaseTimestamp != freshHeader(10).BaseTimestamp {
			t.Fatalf("%v: baseTimestamp changed to %d", c, h.BaseTimestamp)
		}
		// Only attributes, maxTimestamp and the CRC change; records are untouched.
		for i := range b {
			inAttrs := i >= 21 && i < 23
			inMax := i >= 35 && i < 43
			inCRC := i >= 17 && i < 21
			if b[i] != orig[i] && !inAttrs && !inMax && !inCRC {
				t.Fatalf("%v: byte %d changed", c, i)
			}
		}
		got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		recordsEqual(t, got, recs)

		again := bytes.Clone(b)
		SetLogAppendTime(again, 1_800_000_000_000)
		if !bytes.Equal(again, b) {
			t.Fatalf("%v: second identical stamp changed the batch", c)
		}
		SetLogAppendTime(again, 5)
		if h, err := Validate(again); err != nil || h.MaxTimestamp != 5 {
			t.Fatalf("%v: restamp: %+v %v", c, h, err)
		}
	}
}
