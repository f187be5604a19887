// Command memif-cni-install puts memif-cni on a node, like istio-cni's installer. It runs in the
// memif-deviceplugin DaemonSet:
//
//   - always: copies the memif-cni binary and its helper memif-cni-podinfo into the node's CNI
//     bin dir (atomically, so a runtime never executes a half-written file; the helper first, so
//     a new plugin never runs without it);
//   - with --chain: appends the memif-cni entry to the node's primary CNI configuration (the
//     first file by name in --cni-conf-dir, which it logs), the path where the runtime passes pod
//     annotations; Multus's own configuration is refused (use a NetworkAttachmentDefinition);
//   - with --wait (a sidecar: an init container with restartPolicy Always): stays up, puts the
//     entry back when the primary plugin rewrites its configuration, and on SIGTERM (the
//     DaemonSet is deleted) takes the entry out again;
//   - with --uninstall: takes the entry out (and, with --remove-binary, the binary) and exits.
//
// Logs go to stderr as JSON (log/slog).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-cni-install/internal/conflist"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// DefaultPlugin is the chained memif-cni entry: it asks the runtime for the pod annotations and
// for Multus's device-info file.
const DefaultPlugin = `{"type":"memif-cni","capabilities":{"io.kubernetes.cri.pod-annotations":true,"CNIDeviceInfoFile":true}}`

type options struct {
	source, binDir, confDir, plugin, helperSource string
	chain, wait, uninstall, removeBinary          bool
	interval                                      time.Duration
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var o options
	fs := flag.NewFlagSet("memif-cni-install", flag.ContinueOnError)
	fs.StringVar(&o.source, "source", "/usr/local/bin/memif-cni", "the memif-cni binary to install")
	fs.StringVar(&o.helperSource, "helper-source", "", "the memif-cni-podinfo binary to install next to it (default: next to --source)")
	fs.StringVar(&o.binDir, "cni-bin-dir", "/host/opt/cni/bin", "the node's CNI bin dir, as mounted in this container")
	fs.StringVar(&o.confDir, "cni-conf-dir", "/host/etc/cni/net.d", "the node's CNI configuration dir, as mounted in this container")
	fs.BoolVar(&o.chain, "chain", false, "append memif-cni to the primary CNI configuration")
	fs.StringVar(&o.plugin, "plugin-config", DefaultPlugin, "the memif-cni entry to chain (a JSON object)")
	fs.BoolVar(&o.wait, "wait", false, "stay up: keep the entry current, uninstall the entry on SIGTERM")
	fs.DurationVar(&o.interval, "check-interval", 5*time.Second, "with --wait: how often to check the configuration")
	fs.BoolVar(&o.uninstall, "uninstall", false, "take the memif-cni entry out of the primary configuration and exit")
	fs.BoolVar(&o.removeBinary, "remove-binary", false, "with --uninstall: also remove the binary (pods deleted afterwards get no memif-cni DEL; the device plugin scrubs their slots)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("memif-cni-install failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	if o.uninstall {
		return uninstall(o, log)
	}
	if o.helperSource == "" {
		o.helperSource = filepath.Join(filepath.Dir(o.source), names.PodInfoHelper)
	}
	if err := installBinary(o.helperSource, o.binDir, names.PodInfoHelper); err != nil {
		return err
	}
	if err := installBinary(o.source, o.binDir, "memif-cni"); err != nil {
		return err
	}
	log.Info("installed memif-cni", "path", filepath.Join(o.binDir, "memif-cni"))
	primary, err := refresh(o, log)
	if err != nil {
		return err
	}
	if primary != "" {
		log.Info("memif-cni is chained in the primary CNI configuration", "file", primary)
	}
	if !o.wait {
		return nil
	}
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if o.chain {
				return uninstall(o, log)
			}
			return nil
		case <-t.C:
			if _, err := refresh(o, log); err != nil {
				// Keep running: the primary plugin may be rewriting its file right now.
				log.Warn("check failed; retrying", "err", err)
			}
		}
	}
}

// refresh chains the entry into the primary configuration when it is missing there, and returns
// the file that holds it ("" without --chain). The primary is the runtime's: the first file by
// name in the conf dir; Multus's is refused (conflist.MultusError).
func refresh(o options, log *slog.Logger) (string, error) {
	if !o.chain {
		return "", nil
	}
	primary, err := conflist.Primary(o.confDir)
	if err != nil {
		return "", err
	}
	wrote, err := conflist.InstallFile(primary, []byte(o.plugin))
	if err != nil {
		return "", err
	}
	if wrote == "" {
		return primary, nil
	}
	log.Info("chained memif-cni into the primary CNI configuration", "file", wrote)
	return wrote, nil
}

func uninstall(o options, log *slog.Logger) error {
	primary, err := conflist.Primary(o.confDir)
	if err != nil {
		log.Info("no primary CNI configuration; nothing to take out", "reason", err.Error())
	} else if changed, err := conflist.UninstallFile(primary); err != nil {
		return err
	} else if changed {
		log.Info("took memif-cni out of the primary CNI configuration", "file", primary)
	}
	if o.removeBinary {
		for _, name := range []string{"memif-cni", names.PodInfoHelper} { // the plugin first: it needs the helper
			if err := os.Remove(filepath.Join(o.binDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			log.Info("removed "+name, "path", filepath.Join(o.binDir, name))
		}
	}
	return nil
}

// installBinary copies src into dir as name through a temporary file and a rename.
func installBinary(src, dir, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	// Durable: the runtime executes this file for every pod; a crash must not leave it torn.
	if err := safefs.WriteFile(filepath.Join(dir, name), data, 0o755, safefs.WriteOptions{Durable: true}); err != nil {
		return fmt.Errorf("install %s: %w", name, err)
	}
	return nil
}
