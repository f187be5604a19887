package podresources

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// maxHeaderBlock bounds a header block (a HEADERS frame and its CONTINUATION frames): the
// response headers and trailers of a unary call are a few dozen bytes.
const maxHeaderBlock = 64 << 10

// frame is one HTTP/2 frame (RFC 9113 section 4.1).
type frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

// headerBlock is a header block on its way in: a HEADERS frame, then CONTINUATION frames until
// END_HEADERS.
type headerBlock struct {
	open       bool // HEADERS came without END_HEADERS: only CONTINUATION may follow
	endsStream bool // the HEADERS frame had END_STREAM: this block is the stream's last
	frag       []byte
}

// responseReader collects the response of the one stream: it answers the connection's control
// frames, assembles header blocks and the body, and reads the gRPC status from them.
type responseReader struct {
	conn io.Writer
	in   *bufio.Reader
	dec  *hpack.Decoder

	block   headerBlock
	blocks  int               // header blocks decoded: 1 = response headers, 2 = trailers
	status  string            // :status
	grpc    map[string]string // grpc-status and grpc-message, from either block
	body    []byte
	fieldEr error
}

func newResponseReader(conn io.ReadWriter) *responseReader {
	r := &responseReader{conn: conn, in: bufio.NewReaderSize(conn, maxFrame+9), grpc: map[string]string{}}
	r.dec = hpack.NewDecoder(4096, r.onField)
	r.dec.SetMaxStringLength(maxFrame)
	return r
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

// read reads frames until the stream ends and returns the response's one message.
func (r *responseReader) read() ([]byte, error) {
	for {
		f, err := r.readFrame()
		if err != nil {
			return nil, err
		}
		if r.block.open && f.typ != frameContinuation {
			return nil, errors.New("header block interrupted by another frame")
		}
		ended := false
		switch f.typ {
		case frameData:
			err = r.onData(f)
		case frameHeaders, frameContinuation:
			ended, err = r.onHeaders(f)
		default:
			err = r.onControl(f)
		}
		if err != nil {
			return nil, err
		}
		if ended {
			return r.finish()
		}
	}
}

// readFrame reads the next frame, refusing one larger than we allow the peer to send.
func (r *responseReader) readFrame() (frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r.in, hdr[:]); err != nil {
		return frame{}, fmt.Errorf("read frame: %w", err)
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if n > maxFrame {
		return frame{}, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, maxFrame)
	}
	f := frame{typ: hdr[3], flags: hdr[4], stream: binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff, payload: make([]byte, n)}
	if _, err := io.ReadFull(r.in, f.payload); err != nil {
		return frame{}, fmt.Errorf("read frame payload: %w", err)
	}
	return f, nil
}

// onControl handles a frame about the connection rather than the response. SETTINGS and PING
// are acknowledged; WINDOW_UPDATE needs nothing, as our request is already sent whole; frame
// types not listed are ignored, as RFC 9113 requires of unknown ones.
func (r *responseReader) onControl(f frame) error {
	n := len(f.payload)
	switch f.typ {
	case frameSettings:
		if f.stream != 0 || n%6 != 0 || f.flags&flagAck != 0 && n != 0 {
			return errors.New("malformed SETTINGS frame")
		}
		if f.flags&flagAck == 0 {
			_, err := r.conn.Write(appendFrame(nil, frameSettings, flagAck, 0))
			return err
		}
	case framePing:
		if f.stream != 0 || n != 8 {
			return errors.New("malformed PING frame")
		}
		if f.flags&flagAck == 0 {
			_, err := r.conn.Write(appendFrame(nil, framePing, flagAck, 0, f.payload...))
			return err
		}
	case frameGoAway:
		if n < 8 {
			return errors.New("malformed GOAWAY frame")
		}
		if binary.BigEndian.Uint32(f.payload)&0x7fffffff < stream {
			return fmt.Errorf("server refused the call: GOAWAY code %d %q", binary.BigEndian.Uint32(f.payload[4:]), f.payload[8:])
		}
	case frameRSTStream:
		if n != 4 {
			return errors.New("malformed RST_STREAM frame")
		}
		return fmt.Errorf("server reset the call: code %d", binary.BigEndian.Uint32(f.payload))
	case framePushPromise:
		return errors.New("server push, which we disabled")
	}
	return nil
}

// onData adds a DATA frame to the body, which comes between the response headers and the
// trailers.
func (r *responseReader) onData(f frame) error {
	if f.stream != stream {
		return fmt.Errorf("DATA on stream %d", f.stream)
	}
	if r.blocks != 1 {
		return errors.New("DATA before the response headers or after the trailers")
	}
	data, err := unpad(f.payload, f.flags)
	if err != nil {
		return err
	}
	if len(r.body)+len(data) > maxMessage+5 {
		return fmt.Errorf("response exceeds the %d-byte limit", maxMessage)
	}
	r.body = append(r.body, data...)
	if f.flags&flagEndStream != 0 {
		return errors.New("response ended without trailers (no grpc-status)")
	}
	return nil
}

// onHeaders adds a HEADERS or CONTINUATION frame to the header block and decodes the block when
// it is complete. It reports whether the block ended the stream.
func (r *responseReader) onHeaders(f frame) (ended bool, err error) {
	if f.stream != stream {
		return false, fmt.Errorf("header frame on stream %d", f.stream)
	}
	if err := r.block.add(f); err != nil {
		return false, err
	}
	if f.flags&flagEndHeaders == 0 {
		return false, nil
	}
	return r.endBlock()
}

// add appends the fragment a HEADERS or CONTINUATION frame carries.
func (b *headerBlock) add(f frame) error {
	if f.typ == frameHeaders {
		if b.open {
			return errors.New("HEADERS inside a header block")
		}
		frag, err := unpad(f.payload, f.flags)
		if err != nil {
			return err
		}
		if f.flags&flagPriority != 0 {
			if len(frag) < 5 {
				return errors.New("malformed HEADERS priority")
			}
			frag = frag[5:]
		}
		b.frag, b.open, b.endsStream = frag, true, f.flags&flagEndStream != 0
	} else {
		if !b.open {
			return errors.New("CONTINUATION outside a header block")
		}
		b.frag = append(b.frag, f.payload...)
	}
	if len(b.frag) > maxHeaderBlock {
		return errors.New("header block too large")
	}
	return nil
}

// endBlock decodes the complete header block: first the response headers, then the trailers,
// which must end the stream.
func (r *responseReader) endBlock() (ended bool, err error) {
	r.block.open = false
	if _, err := r.dec.Write(r.block.frag); err != nil {
		return false, fmt.Errorf("decode headers: %w", err)
	}
	if err := r.dec.Close(); err != nil {
		return false, fmt.Errorf("decode headers: %w", err)
	}
	if r.fieldEr != nil {
		return false, r.fieldEr
	}
	r.blocks++
	if r.blocks == 1 && r.status != "200" {
		return false, fmt.Errorf("HTTP status %q", r.status)
	}
	if r.block.endsStream {
		return true, nil
	}
	if r.blocks > 1 {
		return false, errors.New("trailers without END_STREAM")
	}
	return false, nil
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
