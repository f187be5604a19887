package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2/hpack"
)

// maxMessage bounds a response: List on a busy node is the largest answer, a few hundred bytes
// per pod. grpc-go's default receive limit is 4 MiB; we allow more, as the kubelet allows itself
// up to 16 MiB.
const maxMessage = 16 << 20

// The HTTP/2 (RFC 9113) frame types and flags a unary gRPC call meets.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingEnablePush        = 0x2
	settingInitialWindowSize = 0x4

	// maxFrame is the default SETTINGS_MAX_FRAME_SIZE, which we do not raise: the peer may not
	// send larger frames.
	maxFrame = 16384
	// stream is the only stream of the connection: one call per connection.
	stream = 1
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// client makes unary gRPC calls to a Unix socket, one HTTP/2 connection per call, speaking just
// enough HTTP/2 for that (prior knowledge, as grpc-go does on a Unix socket): one stream, no
// server push, flow-control windows opened wide up front.
type client struct {
	socket string
}

func newClient(socket string) *client { return &client{socket: socket} }

// statusError is a non-OK gRPC status.
type statusError struct {
	code    int
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", codeName(e.code), e.message)
}

func codeName(c int) string {
	names := [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
		"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
		"OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}
	if c >= 0 && c < len(names) {
		return names[c]
	}
	return "Code(" + strconv.Itoa(c) + ")"
}

// call sends one request message to method ("/package.Service/Method") and returns the one
// response message.
func (c *client) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Cancellation moves the deadline into the past, which ends any read or write in progress.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	msg, err := exchange(conn, method, req)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return msg, nil
}

// exchange writes the request on a fresh connection and reads the response.
func exchange(conn io.ReadWriter, method string, req []byte) ([]byte, error) {
	if err := writeRequest(conn, method, req); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	return newResponseReader(conn).read()
}

func writeRequest(w io.Writer, method string, req []byte) error {
	var hdrs bytes.Buffer
	enc := hpack.NewEncoder(&hdrs)
	for _, f := range [...][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return err
		}
	}
	if hdrs.Len() > maxFrame || len(req)+5 > maxFrame {
		return errors.New("request too large for one frame")
	}
	b := []byte(clientPreface)
	settings := binary.BigEndian.AppendUint16(nil, settingEnablePush)
	settings = binary.BigEndian.AppendUint32(settings, 0)
	settings = binary.BigEndian.AppendUint16(settings, settingInitialWindowSize)
	settings = binary.BigEndian.AppendUint32(settings, maxMessage+5)
	b = appendFrame(b, frameSettings, 0, 0, settings...)
	// The connection window does not follow SETTINGS; open it separately.
	b = appendFrame(b, frameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, maxMessage+5)...)
	b = appendFrame(b, frameHeaders, flagEndHeaders, stream, hdrs.Bytes()...)
	data := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req))) // uncompressed, length
	b = appendFrame(b, frameData, flagEndStream, stream, append(data, req...)...)
	_, err := w.Write(b)
	return err
}

func appendFrame(b []byte, typ, flags byte, streamID uint32, payload ...byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, streamID)
	return append(b, payload...)
}
