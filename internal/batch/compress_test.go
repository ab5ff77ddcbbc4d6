package batch

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func testInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 200<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	return map[string][]byte{
		"empty":  {},
		"one":    {42},
		"text":   bytes.Repeat([]byte("the quick brown fox "), 5000),
		"zeros":  make([]byte, 1<<20),
		"random": random,
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for name, in := range testInputs() {
		for _, c := range allCodecs {
			z, err := Compress(c, in)
			if err != nil {
				t.Fatalf("%s %v: %v", name, c, err)
			}
			out, err := Decompress(c, z)
			if err != nil {
				t.Fatalf("%s %v: Decompress: %v", name, c, err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("%s %v: round trip differs", name, c)
			}
			if c != CodecNone && name == "text" && len(z) > len(in)/4 {
				t.Fatalf("%s %v: %d -> %d is not compressing", name, c, len(in), len(z))
			}
		}
	}
}

// What we write must be readable by the reference decoders of each format.
func TestCompressReadableByLibraries(t *testing.T) {
	in := testInputs()["text"]
	z, _ := Compress(CodecSnappy, in)
	if !bytes.HasPrefix(z, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")) {
		t.Fatalf("snappy output is not xerial framed: % x", z[:16])
	}
	if out, err := xerial.Decode(z); err != nil || !bytes.Equal(out, in) {
		t.Fatalf("xerial.Decode: %v", err)
	}
	z, _ = Compress(CodecLZ4, in)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(lz4.NewReader(bytes.NewReader(z))); err != nil || !bytes.Equal(buf.Bytes(), in) {
		t.Fatalf("lz4 reader: %v", err)
	}
	// Frame descriptor: version 01, block independence set (Kafka's reader requires it).
	if z[4]&0xc0 != 0x40 || z[4]&0x20 == 0 {
		t.Fatalf("lz4 FLG %#x", z[4])
	}
	z, _ = Compress(CodecZstd, in)
	d, _ := zstd.NewReader(nil)
	if out, err := d.DecodeAll(z, nil); err != nil || !bytes.Equal(out, in) {
		t.Fatalf("zstd: %v", err)
	}
}

// librdkafka and franz-go send snappy as one raw block; the Java client xerial-framed with
// blocks of any size.
func TestDecompressSnappyShapes(t *testing.T) {
	in := testInputs()["text"]
	for name, z := range map[string][]byte{
		"raw block":   s2.EncodeSnappy(nil, in),
		"xerial":      xerial.Encode(nil, in),
		"xerial+tiny": xerial.Encode(nil, []byte("x")),
	} {
		want := in
		if name == "xerial+tiny" {
			want = []byte("x")
		}
		out, err := Decompress(CodecSnappy, z)
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if out, err := Decompress(CodecSnappy, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")); err != nil || len(out) != 0 {
		t.Fatalf("empty xerial: %q %v", out, err)
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64)
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(c, garbage); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v garbage: %v", c, err)
		}
		z, _ := Compress(c, testInputs()["text"])
		if _, err := Decompress(c, z[:len(z)/2]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v truncated: %v", c, err)
		}
	}
	for _, z := range [][]byte{
		[]byte("\x82SNAPPY\x00\x00\x00"),                                             // header cut short
		[]byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10"),         // block length cut short
		[]byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff\x00"), // block past end
	} {
		if _, err := Decompress(CodecSnappy, z); !errors.Is(err, ErrCorrupt) {
			t.Errorf("xerial %q: %v", z, err)
		}
	}
	if _, err := Decompress(5, garbage); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("codec 5: %v", err)
	}
	if _, err := Compress(5, garbage); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("compress codec 5: %v", err)
	}
}

// A small input that inflates past MaxDecompressedSize is refused, for every codec.
func TestDecompressionBomb(t *testing.T) {
	zeros := make([]byte, MaxDecompressedSize+1)
	for _, c := range allCodecs[1:] {
		z, err := Compress(c, zeros)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(c, z); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: %d bytes inflating to %d: %v", c, len(z), len(zeros), err)
		}
		exact, _ := Compress(c, zeros[:MaxDecompressedSize])
		if out, err := Decompress(c, exact); err != nil || len(out) != MaxDecompressedSize {
			t.Errorf("%v: exactly the limit: %v", c, err)
		}
	}
	// A raw snappy block that merely claims a huge length is refused before allocating.
	claim := append([]byte{0xff, 0xff, 0xff, 0x1f}, 0) // ~64 MiB claimed by 5 bytes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Decompress(CodecSnappy, claim); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("refusing a lying snappy block allocated %d bytes", n)
	}
}

// The pools must be safe under concurrent use.
func TestCompressConcurrent(t *testing.T) {
	in := testInputs()["text"]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				c := allCodecs[(g+i)%len(allCodecs)]
				data := in[:len(in)-g*i]
				z, err := Compress(c, data)
				if err != nil {
					t.Error(err)
					return
				}
				out, err := Decompress(c, z)
				if err != nil || !bytes.Equal(out, data) {
					t.Errorf("%v: %v", c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
