package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// scripted serves one connection: it reads the client's request with x/net/http2's framer and
// then runs script, which writes the response frames.
func scripted(t *testing.T, script func(fr *http2.Framer, hdr func(...string) []byte)) string {
	sock := filepath.Join(t.TempDir(), "h2.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		preface := make([]byte, len(clientPreface))
		if _, err := io.ReadFull(conn, preface); err != nil || string(preface) != clientPreface {
			t.Errorf("preface %q, %v", preface, err)
			return
		}
		fr := http2.NewFramer(conn, conn)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Errorf("read request: %v", err)
				return
			}
			if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
				break
			}
			if h, ok := f.(*http2.MetaHeadersFrame); ok && h.PseudoValue("path") != "/svc/M" {
				t.Errorf("path %q", h.PseudoValue("path"))
			}
		}
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		script(fr, func(kv ...string) []byte {
			buf.Reset()
			for i := 0; i < len(kv); i += 2 {
				_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return bytes.Clone(buf.Bytes())
		})
		// Let the client read everything before the connection closes.
		_, _ = io.Copy(io.Discard, conn)
	}()
	return sock
}

func grpcBody(msg string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

func callScripted(t *testing.T, script func(fr *http2.Framer, hdr func(...string) []byte)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return newClient(scripted(t, script)).call(ctx, "/svc/M", []byte("req"))
}

// Everything a server may legally do: settings and pings before the answer, headers split over
// CONTINUATION frames with padding and priority, the message split over padded DATA frames.
func TestH2LegalVariations(t *testing.T) {
	got, err := callScripted(t, func(fr *http2.Framer, hdr func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 10})
		_ = fr.WritePing(false, [8]byte{1, 2, 3})
		_ = fr.WriteWindowUpdate(0, 1000)
		h := hdr(":status", "200", "content-type", "application/grpc+proto", "x-long", strings.Repeat("v", 100))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h[:10], PadLength: 3,
			Priority: http2.PriorityParam{StreamDep: 0, Weight: 5}})
		_ = fr.WriteContinuation(1, false, h[10:20])
		_ = fr.WriteContinuation(1, true, h[20:])
		body := grpcBody("hello world")
		_ = fr.WriteDataPadded(1, false, body[:4], []byte{0, 0})
		_ = fr.WriteData(1, false, body[4:])
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true,
			BlockFragment: hdr("grpc-status", "0")})
	})
	if err != nil || string(got) != "hello world" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestH2Errors(t *testing.T) {
	ok := func(fr *http2.Framer, hdr func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hdr(":status", "200", "content-type", "application/grpc")})
	}
	for name, tc := range map[string]struct {
		script func(fr *http2.Framer, hdr func(...string) []byte)
		want   string
	}{
		"trailers-only status": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true,
				BlockFragment: hdr(":status", "200", "content-type", "application/grpc", "grpc-status", "12", "grpc-message", "not%20here")})
		}, "code = Unimplemented desc = not here"},
		"HTTP error": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true, BlockFragment: hdr(":status", "503")})
		}, `HTTP status "503"`},
		"not gRPC": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hdr(":status", "200", "content-type", "text/html")})
		}, "is not gRPC"},
		"reset": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		}, "server reset the call: code 7"},
		"goaway": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("busy"))
		}, `GOAWAY code 11 "busy"`},
		"no trailers": {func(fr *http2.Framer, hdr func(...string) []byte) {
			ok(fr, hdr)
			_ = fr.WriteData(1, true, grpcBody("x"))
		}, "without trailers"},
		"no status": {func(fr *http2.Framer, hdr func(...string) []byte) {
			ok(fr, hdr)
			_ = fr.WriteData(1, false, grpcBody("x"))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true, BlockFragment: hdr("x", "y")})
		}, "no grpc-status"},
		"two messages": {func(fr *http2.Framer, hdr func(...string) []byte) {
			ok(fr, hdr)
			_ = fr.WriteData(1, false, append(grpcBody("x"), grpcBody("y")...))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true, BlockFragment: hdr("grpc-status", "0")})
		}, "does not match"},
		"compressed": {func(fr *http2.Framer, hdr func(...string) []byte) {
			ok(fr, hdr)
			b := grpcBody("x")
			b[0] = 1
			_ = fr.WriteData(1, false, b)
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true, BlockFragment: hdr("grpc-status", "0")})
		}, "compressed"},
		"wrong stream": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteData(3, false, []byte("x"))
		}, "DATA on stream 3"},
		"data first": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteData(1, false, []byte("x"))
		}, "DATA before the response headers"},
		"interrupted block": {func(fr *http2.Framer, hdr func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr(":status", "200")})
			_ = fr.WritePing(false, [8]byte{})
		}, "interrupted"},
	} {
		_, err := callScripted(t, tc.script)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
	}
}

// rw is a connection whose peer sent fixed bytes and ignores what it is sent.
type rw struct {
	io.Reader
	io.Writer
}

// FuzzResponse feeds arbitrary server bytes to the response reader: it must return (a message or
// an error) without panicking, hanging or allocating beyond its limits.
func FuzzResponse(f *testing.F) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":status", "200"}, {"content-type", "application/grpc"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: bytes.Clone(hb.Bytes())})
	_ = fr.WriteData(1, false, grpcBody("msg"))
	hb.Reset()
	_ = enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndStream: true, EndHeaders: true, BlockFragment: hb.Bytes()})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := exchange(rw{bytes.NewReader(b), io.Discard}, "/svc/M", nil)
		if err == nil && len(msg) > maxMessage {
			t.Fatalf("message of %d bytes", len(msg))
		}
		var se *statusError
		if err != nil && errors.As(err, &se) && se.code == 0 {
			t.Fatal("OK status reported as an error")
		}
	})
}
