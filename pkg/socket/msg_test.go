package socket

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	msgs := []Msg{
		Ack{},
		Hello{Name: "VPP 24.10", MinVersion: Version, MaxVersion: Version, MaxRegion: 255, MaxM2SRing: 3, MaxS2MRing: 7, MaxLog2RingSize: 14},
		Init{Version: Version, ID: 0xdeadbeef, Mode: ModeIP, Secret: "s3cret", Name: "app"},
		AddRegion{Index: 3, Size: 1<<40 + 5},
		AddRing{Flags: AddRingFlagS2M, Index: 254, Region: 2, Offset: 0xfffffff0, Log2RingSize: 15},
		Connect{Name: "memif0/0"},
		Connected{Name: "memif1/0"},
		Disconnect{Code: 7, Reason: "Incorrect secret"},
	}
	for _, m := range msgs {
		b := Encode(m)
		got, err := Decode(b[:])
		if err != nil {
			t.Fatalf("%s: decode: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip = %#v, want %#v", m.Type(), got, m)
		}
	}
}

// TestWireOffsets pins the byte layout to the offsets of libmemif's packed structs (checked with
// offsetof on x86-64), independently of the encoder's constants.
func TestWireOffsets(t *testing.T) {
	ne := binary.NativeEndian
	b := Encode(Hello{Name: "x", MinVersion: 0x0200, MaxVersion: 0x0201, MaxRegion: 9, MaxM2SRing: 10, MaxS2MRing: 11, MaxLog2RingSize: 12})
	if ne.Uint16(b[0:]) != 2 || b[2] != 'x' || ne.Uint16(b[34:]) != 0x0200 || ne.Uint16(b[36:]) != 0x0201 ||
		ne.Uint16(b[38:]) != 9 || ne.Uint16(b[40:]) != 10 || ne.Uint16(b[42:]) != 11 || b[44] != 12 {
		t.Errorf("hello layout wrong: % x", b[:46])
	}
	b = Encode(Init{Version: 0x0200, ID: 0x01020304, Mode: 1, Secret: "sec", Name: "nm"})
	if ne.Uint16(b[0:]) != 3 || ne.Uint16(b[2:]) != 0x0200 || ne.Uint32(b[4:]) != 0x01020304 || b[8] != 1 ||
		string(b[9:12]) != "sec" || b[12] != 0 || string(b[33:35]) != "nm" {
		t.Errorf("init layout wrong: % x", b[:66])
	}
	b = Encode(AddRegion{Index: 5, Size: 0x1122334455})
	if ne.Uint16(b[0:]) != 4 || ne.Uint16(b[2:]) != 5 || ne.Uint64(b[4:]) != 0x1122334455 {
		t.Errorf("add_region layout wrong: % x", b[:12])
	}
	b = Encode(AddRing{Flags: 1, Index: 2, Region: 3, Offset: 0x10203040, Log2RingSize: 10, PrivateHdrSize: 0x55})
	if ne.Uint16(b[0:]) != 5 || ne.Uint16(b[2:]) != 1 || ne.Uint16(b[4:]) != 2 || ne.Uint16(b[6:]) != 3 ||
		ne.Uint32(b[8:]) != 0x10203040 || b[12] != 10 || ne.Uint16(b[13:]) != 0x55 {
		t.Errorf("add_ring layout wrong: % x", b[:15])
	}
	b = Encode(Disconnect{Code: 9, Reason: "bye"})
	if ne.Uint16(b[0:]) != 8 || ne.Uint32(b[2:]) != 9 || string(b[6:9]) != "bye" || b[9] != 0 {
		t.Errorf("disconnect layout wrong: % x", b[:10])
	}
}

// A C peer may leave padding and the unused tail of string fields uninitialised.
func TestDecodeIgnoresPadding(t *testing.T) {
	b := Encode(Init{Version: Version, ID: 1, Secret: "", Name: "a"})
	junk := bytes.Repeat([]byte{0xa5}, MsgSize)
	copy(b[65:], junk) // after the name field
	b[10] = 0x77       // after the (empty) secret's NUL
	m, err := Decode(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(Init); got.Secret != "" || got.Name != "a" || got.ID != 1 {
		t.Errorf("decoded %+v", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, n := range []int{0, 1, 127, 129, 256} {
		if _, err := Decode(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "size") {
			t.Errorf("size %d: err = %v", n, err)
		}
	}
	for _, typ := range []uint16{0, 9, 0xffff} {
		var b [MsgSize]byte
		binary.NativeEndian.PutUint16(b[:], typ)
		if _, err := Decode(b[:]); err == nil {
			t.Errorf("type %d decoded", typ)
		}
	}
}

func TestStringFields(t *testing.T) {
	long := strings.Repeat("x", 40)
	m, _ := Decode(func() []byte { b := Encode(Init{Secret: long, Name: long}); return b[:] }())
	init := m.(Init)
	if len(init.Secret) != SecretSize-1 || len(init.Name) != NameSize-1 {
		t.Errorf("truncation: secret %d name %d bytes", len(init.Secret), len(init.Name))
	}
	// A C peer that fills a field completely (no NUL) is read up to the field's end.
	var b [MsgSize]byte
	binary.NativeEndian.PutUint16(b[:], uint16(TypeConnect))
	copy(b[2:34], bytes.Repeat([]byte{'n'}, 32))
	b[34] = 'Z'
	m, err := Decode(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(Connect).Name; got != strings.Repeat("n", 32) {
		t.Errorf("name = %q", got)
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range []Msg{Ack{}, Hello{Name: "h"}, Init{Secret: "s"}, AddRegion{Size: 1}, AddRing{Log2RingSize: 10}, Connect{}, Connected{}, Disconnect{Reason: "r"}} {
		b := Encode(m)
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a message that decodes to the same value, except that
		// the encoder always NUL-terminates strings (as strlcpy does), so a full field loses its
		// last byte.
		if !stringsFit(m) {
			return
		}
		b := Encode(m)
		m2, err := Decode(b[:])
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode of %#v = %#v, %v", m, m2, err)
		}
	})
}

func stringsFit(m Msg) bool {
	switch m := m.(type) {
	case Hello:
		return len(m.Name) < NameSize
	case Init:
		return len(m.Secret) < SecretSize && len(m.Name) < NameSize
	case Connect:
		return len(m.Name) < NameSize
	case Connected:
		return len(m.Name) < NameSize
	case Disconnect:
		return len(m.Reason) < DisconnectSize
	}
	return true
}
