// Package dpserver is the kubelet plumbing of one resource: the v1beta1
// DevicePlugin gRPC server on a unix socket in the kubelet's device-plugins
// directory, registration with the kubelet, and re-registration when the
// kubelet restarts (it wipes the directory and recreates kubelet.sock) or
// when the plugin's own socket is removed.
package dpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Backend is the device logic behind one server.
type Backend interface {
	Name() string
	Options() *pluginapi.DevicePluginOptions
	Devices() ([]*pluginapi.Device, <-chan struct{})
	Allocate(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
	Preferred(*pluginapi.PreferredAllocationRequest) *pluginapi.PreferredAllocationResponse
}

// PollInterval is how often the server looks at its socket and the
// kubelet's; it bounds the re-registration delay well under a second.
const PollInterval = 100 * time.Millisecond

// Server serves one Backend.
type Server struct {
	backend Backend
	dir     string
	socket  string
	log     *slog.Logger

	registered    atomic.Bool
	registrations atomic.Uint64
}

// New makes a server for backend in dir (<kubelet-dir>/device-plugins).
// The socket is named after the resource: memifnet.io/socket serves on
// memifnet.io-socket.sock.
func New(backend Backend, dir string, log *slog.Logger) *Server {
	name := strings.ReplaceAll(backend.Name(), "/", "-") + ".sock"
	return &Server{backend: backend, dir: dir, socket: name, log: log.With("resource", backend.Name())}
}

// Registered says whether the kubelet accepted the last registration.
func (s *Server) Registered() bool { return s.registered.Load() }

// Registrations counts successful registrations.
func (s *Server) Registrations() uint64 { return s.registrations.Load() }

// Run serves until ctx ends, re-serving and re-registering as needed.
func (s *Server) Run(ctx context.Context) error {
	sockPath := filepath.Join(s.dir, s.socket)
	kubeletSock := filepath.Join(s.dir, "kubelet.sock")
	defer os.Remove(sockPath)
	for ctx.Err() == nil {
		gs, ino, err := s.serve(sockPath)
		if err != nil {
			s.log.Error("serve", "err", err)
			if !sleep(ctx, time.Second) {
				break
			}
			continue
		}
		s.watch(ctx, sockPath, ino, kubeletSock)
		s.registered.Store(false)
		gs.Stop()
	}
	return nil
}

// watch registers and re-registers until the own socket goes away (then the
// caller re-serves) or ctx ends.
func (s *Server) watch(ctx context.Context, sockPath string, ino uint64, kubeletSock string) {
	var kubeletIno uint64
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		if cur, err := inode(sockPath); err != nil || cur != ino {
			s.log.Info("plugin socket removed, serving again", "socket", sockPath)
			return
		}
		cur, err := inode(kubeletSock)
		if err != nil {
			// Gone: a new kubelet.sock must be registered with even if the
			// file system hands it the old inode number.
			kubeletIno = 0
			s.registered.Store(false)
		} else if cur != kubeletIno {
			if err := s.register(ctx, kubeletSock); err != nil {
				s.log.Warn("register with kubelet", "err", err)
			} else {
				kubeletIno = cur
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) serve(sockPath string) (*grpc.Server, uint64, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, 0, fmt.Errorf("device plugin dir: %w", err)
	}
	if err := os.Remove(sockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", sockPath)
	if err != nil {
		return nil, 0, fmt.Errorf("listen: %w", err)
	}
	ino, err := inode(sockPath)
	if err != nil {
		lis.Close()
		return nil, 0, fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(gs, &service{b: s.backend, log: s.log})
	go func() {
		if err := gs.Serve(lis); err != nil {
			s.log.Warn("grpc serve ended", "err", err)
		}
	}()
	s.log.Info("serving", "socket", sockPath)
	return gs, ino, nil
}

func (s *Server) register(ctx context.Context, kubeletSock string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet: %w", err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     s.socket,
		ResourceName: s.backend.Name(),
		Options:      s.backend.Options(),
	})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	s.registered.Store(true)
	s.registrations.Add(1)
	s.log.Info("registered with kubelet", "endpoint", s.socket)
	return nil
}

func inode(path string) (uint64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("stat %s: no inode", path)
	}
	return st.Ino, nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// service implements the v1beta1 DevicePlugin service.
type service struct {
	pluginapi.UnimplementedDevicePluginServer
	b   Backend
	log *slog.Logger
}

func (v *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return v.b.Options(), nil
}

func (v *service) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		devs, changed := v.b.Devices()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("list and watch: %w", err)
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

func (v *service) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return v.b.Preferred(req), nil
}

func (v *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp, err := v.b.Allocate(req)
	if err != nil {
		v.log.Warn("allocate failed", "err", err)
		return nil, err
	}
	return resp, nil
}

func (v *service) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
