package main

// The Helm chart step: it packages charts/memifnet the way `helm package` lays a chart out (a
// gzipped tarball of the chart directory under its name), with the release's version as the
// chart's version and appVersion and the image pinned by the release's index digest in its
// values, so that `helm install` of the packaged chart runs exactly the released image.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// chartDir is the Helm chart's place in the module.
const chartDir = "charts/memifnet"

// packageChart writes memifnet-<version>.tgz (without the leading v, as Helm names charts)
// when charts/memifnet exists; without it the release simply has no chart.
func packageChart(c config, dir, repo, digest string) error {
	src := filepath.Join(c.Root, chartDir)
	if _, err := os.Stat(filepath.Join(src, "Chart.yaml")); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	edits := map[string]func([]byte) ([]byte, error){
		"memifnet/Chart.yaml": func(b []byte) ([]byte, error) {
			b, err := setField(b, "version", c.Version[1:])
			if err != nil {
				return nil, err
			}
			return setField(b, "appVersion", c.Version)
		},
		"memifnet/values.yaml": func(b []byte) ([]byte, error) {
			b, err := setField(b, "  repository", repo)
			if err != nil || digest == "" {
				return b, err
			}
			return setField(b, "  digest", digest)
		},
	}
	return packageChartDir(src, filepath.Join(dir, "memifnet-"+c.Version[1:]+".tgz"), edits)
}

// setField sets the value of the one line "<key>: ..." (key with its indentation), quoted;
// a chart without exactly one such line is refused rather than packaged unpinned.
func setField(b []byte, key, value string) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `: .*$`)
	if n := len(re.FindAllIndex(b, -1)); n != 1 {
		return nil, fmt.Errorf("chart: %d lines %q, want one", n, strings.TrimSpace(key)+":")
	}
	return re.ReplaceAllLiteral(b, []byte(key+": "+fmt.Sprintf("%q", value))), nil
}

// packageChartDir tars the chart's files under "memifnet/", sorted, reproducibly, applying
// edits to the files they name (a symlinked file is packaged with its target's content, as
// helm does).
func packageChartDir(src, out string, edits map[string]func([]byte) ([]byte, error)) error {
	var names []string
	files := map[string]string{}
	staged, err := os.MkdirTemp("", "chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staged)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		n := "memifnet/" + filepath.ToSlash(rel)
		names = append(names, n)
		files[n] = p
		if edit := edits[n]; edit != nil {
			files[n], err = stageEdited(p, staged, edit)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tarGz(out, names, files, "")
}

// stageEdited writes edit(content of p) into dir and returns its path.
func stageEdited(p, dir string, edit func([]byte) ([]byte, error)) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if b, err = edit(b); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	f, err := os.CreateTemp(dir, "edited-")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
