package main

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// imageArchs are the image's platforms (all linux); pluginPlatforms are kubectl-memifnet's.
var (
	imageArchs      = []string{"amd64", "arm64"}
	pluginPlatforms = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
)

// pluginCmd is the kubectl plugin's command (also in the image).
const pluginCmd = "kubectl-memifnet"

type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

// builds are the release's binaries: Image[arch][name] for the image's platforms, Plugin[p] the
// kubectl-memifnet for each plugin platform (the linux ones are the image's).
type builds struct {
	Cmds   []string // binary names (every main package under cmd/), sorted
	Image  map[string]map[string]string
	Plugin map[platform]string
}

// buildAll builds every command for each image platform and kubectl-memifnet for the others,
// the way `make image` does (static, -trimpath, the version stamped with -X main.version),
// and checks each file is an executable for its platform.
func buildAll(c config, scratch string) (*builds, error) {
	pkgs, err := mainPackages(c.Root)
	if err != nil {
		return nil, err
	}
	b := &builds{Image: map[string]map[string]string{}, Plugin: map[platform]string{}}
	for _, p := range pkgs {
		b.Cmds = append(b.Cmds, filepath.Base(p))
	}
	for _, arch := range imageArchs {
		p := platform{"linux", arch}
		out := filepath.Join(scratch, "linux-"+arch)
		if err := goBuild(c, p, out, pkgs...); err != nil {
			return nil, err
		}
		b.Image[arch] = map[string]string{}
		for _, name := range b.Cmds {
			b.Image[arch][name] = filepath.Join(out, name)
		}
		b.Plugin[p] = filepath.Join(out, pluginCmd)
	}
	for _, p := range pluginPlatforms {
		if _, ok := b.Plugin[p]; ok {
			continue
		}
		out := filepath.Join(scratch, p.OS+"-"+p.Arch)
		if err := goBuild(c, p, out, "./cmd/"+pluginCmd); err != nil {
			return nil, err
		}
		b.Plugin[p] = filepath.Join(out, pluginCmd)
	}
	for p, f := range b.Plugin {
		if err := checkExecutable(f, p); err != nil {
			return nil, err
		}
	}
	for arch, bins := range b.Image {
		for _, f := range bins {
			if err := checkExecutable(f, platform{"linux", arch}); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := b.Image[imageArchs[0]][pluginCmd]; !ok {
		return nil, fmt.Errorf("no ./cmd/%s among the commands %v", pluginCmd, b.Cmds)
	}
	return b, nil
}

// mainPackages lists the commands: every main package under ./cmd.
func mainPackages(root string) ([]string, error) {
	out, err := goCmd(root, nil, "list", "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./cmd/...")
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, l := range strings.Fields(out) {
		pkgs = append(pkgs, "./cmd/"+filepath.Base(l))
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no commands under %s/cmd", root)
	}
	sort.Strings(pkgs)
	return pkgs, nil
}

// goBuild builds pkgs for p into dir with the flags `make image` uses.
func goBuild(c config, p platform, dir string, pkgs ...string) error {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Arch}
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w -X main.version=" + c.Version, "-o", dir + "/"}, pkgs...)
	_, err := goCmd(c.Root, env, args...)
	return err
}

// vetArm64 runs go vet over pkgs for linux/arm64: the pure-Go packages type-check and vet clean
// on the second architecture (this machine cannot run arm64 tests).
func vetArm64(root string, pkgs ...string) error {
	_, err := goCmd(root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"}, append([]string{"vet"}, pkgs...)...)
	return err
}

// goCmd runs the go command in root with env added; errors carry its output.
func goCmd(root string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s go %s: %w\n%s", strings.Join(env, " "), strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// elfMachines and machoCPUs map GOARCH to the header's machine field.
var (
	elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	machoCPUs   = map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}
)

// checkExecutable reads f's header: an ELF (linux) or Mach-O (darwin) executable for p's
// architecture, so a cross build that silently produced the host's binary fails the release.
func checkExecutable(f string, p platform) error {
	switch p.OS {
	case "linux":
		e, err := elf.Open(f)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", f, p, err)
		}
		defer e.Close()
		if want := elfMachines[p.Arch]; e.Machine != want || e.Type != elf.ET_EXEC {
			return fmt.Errorf("%s: ELF %v %v, want %v executable for %s", f, e.Machine, e.Type, want, p)
		}
	case "darwin":
		m, err := macho.Open(f)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", f, p, err)
		}
		defer m.Close()
		if want := machoCPUs[p.Arch]; m.Cpu != want || m.Type != macho.TypeExec {
			return fmt.Errorf("%s: Mach-O %v %v, want %v executable for %s", f, m.Cpu, m.Type, want, p)
		}
	default:
		return fmt.Errorf("%s: no header check for %s", f, p)
	}
	return nil
}
