// Package memiftest connects memif interfaces in one process, for tests, examples and benchmarks
// of code that uses pkg/memif.
package memiftest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
)

var seq atomic.Uint64

// UniqueSocket returns an abstract socket name no other test in this process uses.
func UniqueSocket() string {
	return fmt.Sprintf("@memiftest-%d-%d", os.Getpid(), seq.Add(1))
}

// QuietLogger discards log output.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Pair opens a server and a client interface on a fresh abstract socket, waits until they are
// connected and closes both when the test ends. server and client start from the given configs;
// Role, Socket and (if empty) Logger are set here.
func Pair(tb testing.TB, server, client memif.Config) (srv, cli *memif.Interface) {
	tb.Helper()
	addr := UniqueSocket()
	if server.Socket == "" {
		server.Socket = addr
	}
	if client.Socket == "" {
		client.Socket = server.Socket
	}
	server.Role, client.Role = memif.RoleServer, memif.RoleClient
	if server.Logger == nil {
		server.Logger = QuietLogger()
	}
	if client.Logger == nil {
		client.Logger = QuietLogger()
	}
	srv, err := memif.Open(server)
	if err != nil {
		tb.Fatalf("open memif server: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	cli, err = memif.Open(client)
	if err != nil {
		tb.Fatalf("open memif client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, i := range []*memif.Interface{cli, srv} {
		if err := i.WaitUp(ctx); err != nil {
			tb.Fatalf("memif pair did not connect: %v", err)
		}
	}
	return srv, cli
}
