package socket

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// MsgSize is the size of every memif control message.
const MsgSize = 128

// Version is memif protocol version 2.0 as sent on the wire: (major << 8) | minor.
const Version uint16 = 0x0200

// Field sizes fixed by the protocol.
const (
	NameSize       = 32 // app and interface names, NUL-terminated
	SecretSize     = 24 // secret, compared as a C string
	DisconnectSize = 96 // disconnect reason text
)

// MsgType is the first field of every message.
type MsgType uint16

// The message types of memif protocol 2.0.
const (
	TypeNone MsgType = iota
	TypeAck
	TypeHello
	TypeInit
	TypeAddRegion
	TypeAddRing
	TypeConnect
	TypeConnected
	TypeDisconnect
)

func (t MsgType) String() string {
	names := [...]string{"NONE", "ACK", "HELLO", "INIT", "ADD_REGION", "ADD_RING", "CONNECT", "CONNECTED", "DISCONNECT"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("TYPE(%d)", uint16(t))
}

// Interface modes carried in Init.
const (
	ModeEthernet   uint8 = 0
	ModeIP         uint8 = 1
	ModePuntInject uint8 = 2
)

// AddRingFlagS2M marks a ring that the client (slave) produces on.
const AddRingFlagS2M uint16 = 1

// Msg is one decoded control message: Ack, Hello, Init, AddRegion, AddRing, Connect, Connected or
// Disconnect.
type Msg interface {
	Type() MsgType
	encode(b *[MsgSize]byte)
}

// Ack acknowledges a client message.
type Ack struct{}

// Hello is the server's greeting: its limits. Max* fields are the highest index allowed, not counts.
type Hello struct {
	Name            string
	MinVersion      uint16
	MaxVersion      uint16
	MaxRegion       uint16
	MaxM2SRing      uint16
	MaxS2MRing      uint16
	MaxLog2RingSize uint8
}

// Init opens the client's side of the handshake.
type Init struct {
	Version uint16
	ID      uint32
	Mode    uint8
	Secret  string
	Name    string
}

// AddRegion announces a shared memory region; the fd travels with the message.
type AddRegion struct {
	Index uint16
	Size  uint64
}

// AddRing announces a ring inside a region; its interrupt eventfd travels with the message.
type AddRing struct {
	Flags          uint16
	Index          uint16
	Region         uint16
	Offset         uint32
	Log2RingSize   uint8
	PrivateHdrSize uint16
}

// Connect ends the client's part of the handshake.
type Connect struct{ Name string }

// Connected ends the server's part of the handshake.
type Connected struct{ Name string }

// Disconnect tears the connection down with a reason.
type Disconnect struct {
	Code   uint32
	Reason string
}

func (Ack) Type() MsgType        { return TypeAck }
func (Hello) Type() MsgType      { return TypeHello }
func (Init) Type() MsgType       { return TypeInit }
func (AddRegion) Type() MsgType  { return TypeAddRegion }
func (AddRing) Type() MsgType    { return TypeAddRing }
func (Connect) Type() MsgType    { return TypeConnect }
func (Connected) Type() MsgType  { return TypeConnected }
func (Disconnect) Type() MsgType { return TypeDisconnect }

var ne = binary.NativeEndian

// Field offsets (from the start of the message) fixed by the protocol.
const (
	offHelloName     = 2
	offHelloMinVer   = 34
	offHelloMaxVer   = 36
	offHelloMaxReg   = 38
	offHelloMaxM2S   = 40
	offHelloMaxS2M   = 42
	offHelloMaxLog2  = 44
	offInitVersion   = 2
	offInitID        = 4
	offInitMode      = 8
	offInitSecret    = 9
	offInitName      = 33
	offRegionIndex   = 2
	offRegionSize    = 4
	offRingFlags     = 2
	offRingIndex     = 4
	offRingRegion    = 6
	offRingOffset    = 8
	offRingLog2      = 12
	offRingPrivHdr   = 13
	offConnectName   = 2
	offDisconnCode   = 2
	offDisconnReason = 6
)

func (Ack) encode(*[MsgSize]byte) {}

func (m Hello) encode(b *[MsgSize]byte) {
	putString(b[offHelloName:offHelloName+NameSize], m.Name)
	ne.PutUint16(b[offHelloMinVer:], m.MinVersion)
	ne.PutUint16(b[offHelloMaxVer:], m.MaxVersion)
	ne.PutUint16(b[offHelloMaxReg:], m.MaxRegion)
	ne.PutUint16(b[offHelloMaxM2S:], m.MaxM2SRing)
	ne.PutUint16(b[offHelloMaxS2M:], m.MaxS2MRing)
	b[offHelloMaxLog2] = m.MaxLog2RingSize
}

func (m Init) encode(b *[MsgSize]byte) {
	ne.PutUint16(b[offInitVersion:], m.Version)
	ne.PutUint32(b[offInitID:], m.ID)
	b[offInitMode] = m.Mode
	putString(b[offInitSecret:offInitSecret+SecretSize], m.Secret)
	putString(b[offInitName:offInitName+NameSize], m.Name)
}

func (m AddRegion) encode(b *[MsgSize]byte) {
	ne.PutUint16(b[offRegionIndex:], m.Index)
	ne.PutUint64(b[offRegionSize:], m.Size)
}

func (m AddRing) encode(b *[MsgSize]byte) {
	ne.PutUint16(b[offRingFlags:], m.Flags)
	ne.PutUint16(b[offRingIndex:], m.Index)
	ne.PutUint16(b[offRingRegion:], m.Region)
	ne.PutUint32(b[offRingOffset:], m.Offset)
	b[offRingLog2] = m.Log2RingSize
	ne.PutUint16(b[offRingPrivHdr:], m.PrivateHdrSize)
}

func (m Connect) encode(b *[MsgSize]byte) {
	putString(b[offConnectName:offConnectName+NameSize], m.Name)
}

func (m Connected) encode(b *[MsgSize]byte) {
	putString(b[offConnectName:offConnectName+NameSize], m.Name)
}

func (m Disconnect) encode(b *[MsgSize]byte) {
	ne.PutUint32(b[offDisconnCode:], m.Code)
	putString(b[offDisconnReason:offDisconnReason+DisconnectSize], m.Reason)
}

// Encode lays m out in the 128-byte wire format; unused bytes are zero.
func Encode(m Msg) [MsgSize]byte {
	var b [MsgSize]byte
	ne.PutUint16(b[0:], uint16(m.Type()))
	m.encode(&b)
	return b
}

// Decode parses one message. It fails on a wrong size or an unknown type; it does not judge field
// values, which is the handshake's job.
func Decode(b []byte) (Msg, error) {
	if len(b) != MsgSize {
		return nil, fmt.Errorf("invalid message size %d, want %d", len(b), MsgSize)
	}
	switch t := MsgType(ne.Uint16(b)); t {
	case TypeAck:
		return Ack{}, nil
	case TypeHello:
		return Hello{
			Name:            cString(b[offHelloName : offHelloName+NameSize]),
			MinVersion:      ne.Uint16(b[offHelloMinVer:]),
			MaxVersion:      ne.Uint16(b[offHelloMaxVer:]),
			MaxRegion:       ne.Uint16(b[offHelloMaxReg:]),
			MaxM2SRing:      ne.Uint16(b[offHelloMaxM2S:]),
			MaxS2MRing:      ne.Uint16(b[offHelloMaxS2M:]),
			MaxLog2RingSize: b[offHelloMaxLog2],
		}, nil
	case TypeInit:
		return Init{
			Version: ne.Uint16(b[offInitVersion:]),
			ID:      ne.Uint32(b[offInitID:]),
			Mode:    b[offInitMode],
			Secret:  cString(b[offInitSecret : offInitSecret+SecretSize]),
			Name:    cString(b[offInitName : offInitName+NameSize]),
		}, nil
	case TypeAddRegion:
		return AddRegion{
			Index: ne.Uint16(b[offRegionIndex:]),
			Size:  ne.Uint64(b[offRegionSize:]),
		}, nil
	case TypeAddRing:
		return AddRing{
			Flags:          ne.Uint16(b[offRingFlags:]),
			Index:          ne.Uint16(b[offRingIndex:]),
			Region:         ne.Uint16(b[offRingRegion:]),
			Offset:         ne.Uint32(b[offRingOffset:]),
			Log2RingSize:   b[offRingLog2],
			PrivateHdrSize: ne.Uint16(b[offRingPrivHdr:]),
		}, nil
	case TypeConnect:
		return Connect{Name: cString(b[offConnectName : offConnectName+NameSize])}, nil
	case TypeConnected:
		return Connected{Name: cString(b[offConnectName : offConnectName+NameSize])}, nil
	case TypeDisconnect:
		return Disconnect{
			Code:   ne.Uint32(b[offDisconnCode:]),
			Reason: cString(b[offDisconnReason : offDisconnReason+DisconnectSize]),
		}, nil
	default:
		return nil, fmt.Errorf("unknown message type %d", uint16(t))
	}
}

// cString reads a NUL-terminated field. A field without NUL is taken whole, as C peers that
// copy with strncpy may fill it completely.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// putString writes s NUL-terminated, truncated to fit the field with its NUL like strlcpy.
func putString(dst []byte, s string) {
	n := copy(dst[:len(dst)-1], s)
	clear(dst[n:])
}
