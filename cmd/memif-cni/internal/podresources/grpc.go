package podresources

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
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
	r := &responseReader{conn: conn, in: bufio.NewReaderSize(conn, maxFrame+9)}
	r.dec = hpack.NewDecoder(4096, r.onField)
	r.dec.SetMaxStringLength(maxFrame)
	return r.read()
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

// responseReader collects the response of the one stream.
type responseReader struct {
	conn io.Writer
	in   *bufio.Reader
	dec  *hpack.Decoder

	blocks  int               // header blocks decoded: 1 = response headers, 2 = trailers
	status  string            // :status
	grpc    map[string]string // grpc-status and grpc-message, from either block
	body    []byte
	fieldEr error
}

func (r *responseReader) onField(f hpack.HeaderField) {
	switch {
	case f.Name == ":status" && r.blocks == 0:
		r.status = f.Value
	case f.Name == "content-type" && r.blocks == 0:
		if !strings.HasPrefix(f.Value, "application/grpc") {
			r.fieldEr = fmt.Errorf("response content-type %q is not gRPC", f.Value)
		}
	case f.Name == "grpc-status" || f.Name == "grpc-message":
		r.grpc[f.Name] = f.Value
	}
}

func (r *responseReader) read() ([]byte, error) {
	r.grpc = map[string]string{}
	var hdr [9]byte
	var block []byte // header block fragments until END_HEADERS
	inBlock, blockEndsStream := false, false
	for {
		if _, err := io.ReadFull(r.in, hdr[:]); err != nil {
			return nil, fmt.Errorf("read frame: %w", err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags, sid := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		if n > maxFrame {
			return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, maxFrame)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r.in, payload); err != nil {
			return nil, fmt.Errorf("read frame payload: %w", err)
		}
		if inBlock && typ != frameContinuation {
			return nil, errors.New("header block interrupted by another frame")
		}
		switch typ {
		case frameSettings:
			if sid != 0 || n%6 != 0 || flags&flagAck != 0 && n != 0 {
				return nil, errors.New("malformed SETTINGS frame")
			}
			if flags&flagAck == 0 {
				if _, err := r.conn.Write(appendFrame(nil, frameSettings, flagAck, 0)); err != nil {
					return nil, err
				}
			}
		case framePing:
			if sid != 0 || n != 8 {
				return nil, errors.New("malformed PING frame")
			}
			if flags&flagAck == 0 {
				if _, err := r.conn.Write(appendFrame(nil, framePing, flagAck, 0, payload...)); err != nil {
					return nil, err
				}
			}
		case frameWindowUpdate:
			// Our request is already sent whole; nothing waits for window.
		case frameGoAway:
			if n < 8 {
				return nil, errors.New("malformed GOAWAY frame")
			}
			if binary.BigEndian.Uint32(payload)&0x7fffffff < stream {
				return nil, fmt.Errorf("server refused the call: GOAWAY code %d %q", binary.BigEndian.Uint32(payload[4:]), payload[8:])
			}
		case frameRSTStream:
			if n != 4 {
				return nil, errors.New("malformed RST_STREAM frame")
			}
			return nil, fmt.Errorf("server reset the call: code %d", binary.BigEndian.Uint32(payload))
		case framePushPromise:
			return nil, errors.New("server push, which we disabled")
		case frameData:
			if sid != stream {
				return nil, fmt.Errorf("DATA on stream %d", sid)
			}
			if r.blocks != 1 {
				return nil, errors.New("DATA before the response headers or after the trailers")
			}
			data, err := unpad(payload, flags)
			if err != nil {
				return nil, err
			}
			if len(r.body)+len(data) > maxMessage+5 {
				return nil, fmt.Errorf("response exceeds the %d-byte limit", maxMessage)
			}
			r.body = append(r.body, data...)
			if flags&flagEndStream != 0 {
				return nil, errors.New("response ended without trailers (no grpc-status)")
			}
		case frameHeaders, frameContinuation:
			if sid != stream {
				return nil, fmt.Errorf("header frame on stream %d", sid)
			}
			if typ == frameHeaders {
				if inBlock {
					return nil, errors.New("HEADERS inside a header block")
				}
				frag, err := unpad(payload, flags)
				if err != nil {
					return nil, err
				}
				if flags&flagPriority != 0 {
					if len(frag) < 5 {
						return nil, errors.New("malformed HEADERS priority")
					}
					frag = frag[5:]
				}
				block, inBlock, blockEndsStream = frag, true, flags&flagEndStream != 0
			} else {
				if !inBlock {
					return nil, errors.New("CONTINUATION outside a header block")
				}
				block = append(block, payload...)
			}
			if len(block) > 64<<10 {
				return nil, errors.New("header block too large")
			}
			if flags&flagEndHeaders == 0 {
				continue
			}
			inBlock = false
			if _, err := r.dec.Write(block); err != nil {
				return nil, fmt.Errorf("decode headers: %w", err)
			}
			if err := r.dec.Close(); err != nil {
				return nil, fmt.Errorf("decode headers: %w", err)
			}
			if r.fieldEr != nil {
				return nil, r.fieldEr
			}
			r.blocks++
			if r.blocks == 1 && r.status != "200" {
				return nil, fmt.Errorf("HTTP status %q", r.status)
			}
			if blockEndsStream {
				return r.finish()
			}
			if r.blocks > 1 {
				return nil, errors.New("trailers without END_STREAM")
			}
		}
	}
}

// finish interprets the complete response.
func (r *responseReader) finish() ([]byte, error) {
	code, ok := r.grpc["grpc-status"]
	if !ok {
		return nil, errors.New("response has no grpc-status")
	}
	if code != "0" {
		return nil, statusFrom(code, r.grpc["grpc-message"])
	}
	return oneMessage(r.body)
}

// unpad strips the padding of a DATA or HEADERS frame.
func unpad(p []byte, flags byte) ([]byte, error) {
	if flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, errors.New("bad padding")
	}
	return p[1 : len(p)-int(p[0])], nil
}

// oneMessage returns the single length-prefixed message of a unary response body.
func oneMessage(body []byte) ([]byte, error) {
	if len(body) < 5 {
		return nil, fmt.Errorf("response body of %d bytes has no message", len(body))
	}
	if body[0] != 0 {
		return nil, fmt.Errorf("compressed message (flag %d) but no compression was offered", body[0])
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(n) != uint64(len(body)-5) {
		return nil, fmt.Errorf("message length %d does not match the %d bytes received", n, len(body)-5)
	}
	return body[5:], nil
}

func statusFrom(code, message string) error {
	c, err := strconv.Atoi(code)
	if err != nil {
		c = 2 // Unknown
	}
	if m, err := url.PathUnescape(message); err == nil {
		message = m
	}
	return &statusError{code: c, message: message}
}
