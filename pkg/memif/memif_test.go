package memif_test

import (
	"bytes"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

func TestPairSmoke(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{})
	tx := cli.TxQueue(0)
	rx := srv.RxQueue(0)
	want := []byte("hello memif")
	if n := tx.TxBurst([][]byte{want}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	buf := [][]byte{make([]byte, 0, 2048)}
	if n := rx.RxBurst(buf); n != 1 || !bytes.Equal(buf[0], want) {
		t.Fatalf("RxBurst = %d %q", n, buf[0])
	}
	// and back
	if n := srv.TxQueue(0).TxBurst([][]byte{want}); n != 1 {
		t.Fatalf("server TxBurst = %d", n)
	}
	if n := cli.RxQueue(0).RxBurst(buf); n != 1 || !bytes.Equal(buf[0], want) {
		t.Fatalf("client RxBurst = %d %q", n, buf[0])
	}
}
